"""Sums Nsight Compute's kernel durations (CSV) by kernel and grid size."""
import collections, csv, sys

rows = collections.defaultdict(lambda: [0, 0.0])
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    key = (r["Kernel Name"][:60], r["Grid Size"], r["Block Size"])
    v = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "ns")
    v = v / 1000 if unit in ("ns", "nsecond") else v * 1000 if unit in ("ms", "msecond") else v
    rows[key][0] += 1
    rows[key][1] += v
total = sum(t for _, t in rows.values())
print(f"== {sys.argv[2]}: {sum(c for c, _ in rows.values())} kernels, {total:.0f} us")
for (name, grid, block), (count, t) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:28]:
    print(f"{t:10.0f} us {count:6d} x {t / count:8.2f} us  {name} grid {grid} block {block}")
