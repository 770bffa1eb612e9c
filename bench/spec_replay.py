#!/usr/bin/env python3
"""Replays greedy outputs through the n-gram (prompt lookup) proposer to see
what drafting could gain, apart from the machine's noise: at temperature 0
the output does not depend on speculation, so which drafts a verify accepts
is a function of the prompt and the output alone. Each step's cost comes
from a measured matmul cost curve (`bench_kernels --verify`) plus a fixed
per-step overhead; k is chosen as the engine chooses it (expected tokens
per unit cost at the request's moving-average acceptance rate), and, as a
bound, knowing each verify's outcome.

    bench/spec_replay.py --workload W/edit_t0.0_n64.jsonl [--cost-ms 6.2,6.9,...] [--overhead-ms 1.3]

Prints the decode-phase speedup over plain decoding under both rules.
"""
import argparse
import json
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ms for 1..9 tokens, bench_kernels --verify on the 2-core machine
# (docs/journal/benchmarks-record.md §4)
DEFAULT_COST = "6.2,6.9,7.6,9.0,11.2,12.3,14.0,16.6,20.9"


def longest_match(tokens, n_max=4):
    """As NgramProposer: the longest earlier occurrence of the context's suffix, most recent first."""
    length, n_cap = len(tokens), min(n_max, len(tokens) - 1)
    best, best_next, nxt = 0, 0, length - 1
    while nxt >= 1 and best < n_cap:
        cap, m = min(n_cap, nxt), 0
        while m < cap and tokens[nxt - 1 - m] == tokens[length - 1 - m]:
            m += 1
        if m > best:
            best, best_next = m, nxt
        nxt -= 1
    return best, best_next


def expected_tokens(a, k):
    return sum(a ** j for j in range(k + 1))


class Rate:  # AcceptanceStats' moving averages
    def __init__(self, weight=0.2):
        self.w, self.n, self.acc, self.ex = weight, 0, 0.0, 0.0

    def record(self, drafted, accepted):
        examined = accepted + (1 if accepted < drafted else 0)
        if self.n == 0:
            self.acc, self.ex = accepted, examined
        else:
            self.acc = (1 - self.w) * self.acc + self.w * accepted
            self.ex = (1 - self.w) * self.ex + self.w * examined
        self.n += 1

    def value(self):
        return self.acc / self.ex if self.n else 0.5


def replay(prompts, outputs, cost, oracle):
    k_max = len(cost) - 1
    plain = spec = 0.0
    for prompt, out in zip(prompts, outputs):
        plain += cost[0] * (len(out) - 1)
        g, rate = 1, Rate()
        while g < len(out):
            ctx = prompt + out[:g]
            match, nxt = longest_match(ctx)

            def accepted(k):
                d, a = ctx[nxt:nxt + k], 0
                while a < len(d) and g + a < len(out) and d[a] == out[g + a]:
                    a += 1
                return len(d), a

            if match == 0:
                k = 0
            elif oracle:
                k = max(range(k_max + 1), key=lambda j: ((accepted(j)[1] + 1) / cost[accepted(j)[0]], -j))
            else:
                a = rate.value()
                k = max(range(k_max + 1), key=lambda j: (expected_tokens(a, j) / cost[j], -j))
            drafted, acc = accepted(k)
            if drafted:
                rate.record(drafted, acc)
            spec += cost[drafted]
            g += acc + 1
    return plain / spec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True, help="a temperature-0 workload of bench/make_spec_workloads.py")
    ap.add_argument("--exe", default=str(ROOT / "build" / "bin" / "exactly"))
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--cost-ms", default=DEFAULT_COST, help="matmul ms of a step of 1, 2, ... tokens")
    ap.add_argument("--overhead-ms", type=float, default=1.3, help="the rest of a step, whatever its size")
    args = ap.parse_args()
    cost = [float(c) + args.overhead_ms for c in args.cost_ms.split(",")]
    requests = [json.loads(line) for line in Path(args.workload).read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        texts, out = Path(tmp) / "prompts.jsonl", Path(tmp) / "out.jsonl"
        texts.write_text("".join(json.dumps(r["prompt"]) + "\n" for r in requests))
        ids = subprocess.run([args.exe, "tokenize", "-m", args.model, "--jsonl", str(texts)], check=True,
                             capture_output=True, text=True).stdout.splitlines()
        subprocess.run([args.exe, "batch", "-m", args.model, "-i", args.workload, "-o", str(out)], check=True,
                       capture_output=True)
        rows = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["index"])
        outputs = [r["choices"][0]["token_ids"] for r in rows]
    prompts = [json.loads(line) for line in ids]
    print(f"{len(prompts)} requests, {sum(len(o) for o in outputs)} output tokens")
    print(f"decode phase, k as the engine picks it: x{replay(prompts, outputs, cost, False):.2f}")
    print(f"decode phase, k knowing each outcome:   x{replay(prompts, outputs, cost, True):.2f}")


if __name__ == "__main__":
    main()
