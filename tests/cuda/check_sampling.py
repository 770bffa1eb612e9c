"""Checks of the GPU sampler (kernels/cuda/sampling.h, run by scripts/gpu-check)
against an independent float64 reference of the host sampler's steps
(sample/sampler.cc), written here from its description:

- tokens: random rows (vocabularies 1000, 49152, 128256, and a few tiny ones;
  normal logits of scale 1-5, rows of many exact ties, rows with -inf
  entries) under greedy, temperature alone, top-k (1, 40, V-1, V), top-p
  (0.5, 0.95), min-p (0.05), all three, and penalties, each with the
  uniforms 0, 1 - 2^-53 and random ones: the GPU's token equals the
  reference's except where the reference calls the case borderline (the
  uniform within 1e-9 of a boundary between two tokens' cumulative shares,
  top-p within 1e-9 of a prefix's mass, a probability within 1e-9 of the
  min-p floor), where summation order may decide; none may differ, few may
  be borderline;
- processed logits: what the kernel writes back equals the reference's
  penalised, temperature-scaled float32 logits bit for bit;
- distribution: one row drawn 1,024,000 times (4096 copies per launch, fresh
  uniforms each launch) passes a chi-square goodness-of-fit test against
  the reference distribution at a false-alarm rate of 1e-4, and the same
  test rejects a deliberately wrong reference (top-p left out);
- determinism: the same launch twice gives the same tokens and logits, and a
  row's token does not change when the rows are permuted or run alone;
- argument errors: a negative row count, vocab 0 and a misaligned pointer
  are refused with a message.

With --bench, also times launches of 1-256 rows of a 49k or 128k vocabulary.
--small runs two small vocabularies only (for compute-sanitizer).

    python3 tests/cuda/check_sampling.py [--json FILE] [--bench] [--small]
"""

from __future__ import annotations

import argparse
import ctypes
import math
import sys
from dataclasses import dataclass, field

import numpy as np
import torch

from check_report import Report
from kernels_lib import load_library, ptr

REPORT = Report()
record = REPORT.record
TIMINGS: list[dict] = []

# The C structs (sampling.h), padding included: the double sits at offset 40.
PARAMS_DTYPE = np.dtype([("temperature", "<f4"), ("top_k", "<i4"), ("top_p", "<f4"), ("min_p", "<f4"),
                         ("repetition_penalty", "<f4"), ("frequency_penalty", "<f4"),
                         ("presence_penalty", "<f4"), ("penalty_begin", "<i4"), ("penalty_end", "<i4"),
                         ("uniform", "<f8")], align=True)
PENALTY_DTYPE = np.dtype([("id", "<i4"), ("output_count", "<i4"), ("in_window", "<i4")], align=True)
assert PARAMS_DTYPE.itemsize == 48 and PARAMS_DTYPE.fields["uniform"][1] == 40
assert PENALTY_DTYPE.itemsize == 12

BORDER = 1e-9
U_LAST = 1.0 - 2.0**-53


def bind(lib):
    c_int, c_i64, c_p = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
    lib.exactly_cuda_sampling_workspace_bytes.restype = c_i64
    lib.exactly_cuda_sampling_workspace_bytes.argtypes = [c_i64, c_int]
    lib.exactly_cuda_sample_rows.argtypes = [c_p, c_i64, c_int, c_p, c_p, c_p, c_p, c_p]


@dataclass
class Case:
    """One row: its raw logits, its parameters, its context's penalty entries."""
    logits: np.ndarray  # float32 [V]
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalties: list = field(default_factory=list)  # (id, output_count, in_window), distinct ids
    label: str = ""


@dataclass
class Reference:
    processed: np.ndarray  # float32 [V]
    order: np.ndarray      # the survivors in the draw's order
    p: np.ndarray          # their renormalised probabilities (float64)
    greedy: int | None
    top_p_borderline: bool
    min_p_borderline: bool

    def draw(self, u: float) -> tuple[int, bool]:
        """The token for uniform u and whether u lies within BORDER of a
        boundary between two survivors' cumulative shares (at u = 0 the host
        compares exactly: the first token with p > 0)."""
        if self.greedy is not None:
            return self.greedy, False
        c = np.cumsum(self.p)
        j = int(np.searchsorted(c, u, side="right"))  # the first c_j > u
        token = int(self.order[min(j, len(self.order) - 1)])
        near = u > 0 and bool(np.any(np.abs(c[:-1] - u) < BORDER))
        return token, near or self.top_p_borderline or self.min_p_borderline


def reference(c: Case) -> Reference:
    """The host sampler's steps in numpy: float32 where the host uses float,
    float64 where it uses double."""
    f32 = np.float32
    l = c.logits.astype(np.float32).copy()
    v = l.size
    ids = np.array([e[0] for e in c.penalties], dtype=np.int64)
    counts = np.array([e[1] for e in c.penalties], dtype=np.int64)
    window = np.array([e[2] for e in c.penalties], dtype=bool)
    in_range = (ids >= 0) & (ids < v) if ids.size else np.zeros(0, dtype=bool)
    rp, fp, pp = f32(c.repetition_penalty), f32(c.frequency_penalty), f32(c.presence_penalty)
    if rp != f32(1):
        sel = ids[in_range & window]
        x = l[sel]
        l[sel] = np.where(x > 0, x / rp, x * rp).astype(np.float32)
    if fp != f32(0) or pp != f32(0):
        m = in_range & (counts > 0)
        sel = ids[m]
        # fp * n + pp as one fused multiply-add (the host's std::fma): the
        # product is exact in float64, and so the sum is rounded once
        # (barring a double-rounding tie, far rarer than these tests reach).
        fused = (np.float64(fp) * counts[m].astype(np.float64) + np.float64(pp)).astype(np.float32)
        l[sel] = l[sel] - fused
    assert l.dtype == np.float32
    if c.temperature <= 0:
        return Reference(l, np.zeros(0, np.int64), np.zeros(0), int(np.argmax(l)), False, False)
    l = (l / f32(c.temperature)).astype(np.float32)
    x = l.astype(np.float64) + 0.0  # + 0.0 folds -0 into +0: equal for the host's comparisons
    sorted_order = c.top_k > 0 or f32(c.top_p) < f32(1)
    order = np.lexsort((np.arange(v), -x)) if sorted_order else np.arange(v)
    if 0 < c.top_k < v:
        order = order[:c.top_k]
    xs = x[order]
    w = np.exp(xs - xs.max())
    p = w / w.sum()
    top_p_borderline = min_p_borderline = False
    if f32(c.top_p) < f32(1):
        top_p = float(f32(c.top_p))
        cum = np.cumsum(p)
        reached = np.nonzero(cum >= top_p)[0]
        n = max(1, int(reached[0]) + 1 if reached.size else len(p))
        top_p_borderline = bool(np.any(np.abs(cum - top_p) < BORDER))
        order, p = order[:n], p[:n]
    if f32(c.min_p) > f32(0):
        floor = p.max() * float(f32(c.min_p))
        keep = ~(p < floor)
        min_p_borderline = bool(np.any(np.abs(p - floor) <= BORDER * floor))
        order, p = order[keep], p[keep]
    return Reference(l, order, p / p.sum(), None, top_p_borderline, min_p_borderline)


class Batch:
    """Cases of one vocabulary on the device: pristine logits, parameters and
    penalty entries as the C structs, tokens and workspace."""

    def __init__(self, lib, cases: list[Case]):
        self.lib, self.cases = lib, cases
        self.rows, self.vocab = len(cases), cases[0].logits.size
        self.source = torch.from_numpy(np.stack([c.logits for c in cases])).cuda()
        self.logits = torch.empty_like(self.source)
        self.params = np.zeros(self.rows, dtype=PARAMS_DTYPE)
        for name in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
                     "presence_penalty"):
            self.params[name] = [getattr(c, name) for c in cases]
        sizes = np.array([len(c.penalties) for c in cases], dtype=np.int64)
        self.params["penalty_end"] = np.cumsum(sizes)
        self.params["penalty_begin"] = self.params["penalty_end"] - sizes
        entries = [e for c in cases for e in c.penalties]
        self.penalties = None
        if entries:
            host = np.array(entries, dtype=np.int32).view(PENALTY_DTYPE).reshape(-1)
            self.penalties = torch.from_numpy(host.view(np.uint8).copy()).cuda()
        self.device_params = None
        self.tokens = torch.empty(self.rows, dtype=torch.int32, device="cuda")
        n = lib.exactly_cuda_sampling_workspace_bytes(self.rows, self.vocab)
        self.workspace = torch.empty(max(n, 16) // 8, dtype=torch.int64, device="cuda")

    def upload(self, uniforms) -> None:
        self.params["uniform"] = np.asarray(uniforms, dtype=np.float64)
        self.device_params = torch.from_numpy(self.params.view(np.uint8).copy()).cuda()

    def launch(self) -> None:
        rc = self.lib.exactly_cuda_sample_rows(ptr(self.logits), self.rows, self.vocab, ptr(self.device_params),
                                               ptr(self.penalties), ptr(self.tokens), ptr(self.workspace), None)
        if rc != 0:
            raise RuntimeError(f"exactly_cuda_sample_rows: {self.lib.exactly_last_error().decode()}")

    def run(self, uniforms) -> np.ndarray:
        """Samples every row with its uniform from the pristine logits: the
        tokens (the processed logits stay in self.logits)."""
        self.upload(uniforms)
        self.logits.copy_(self.source)
        self.tokens.fill_(-1)
        self.launch()
        torch.cuda.synchronize()
        return self.tokens.cpu().numpy()


def random_logits(rng, v: int, kind: str) -> np.ndarray:
    scale = rng.uniform(1.0, 5.0)
    x = rng.standard_normal(v) * scale
    if kind == "ties":  # multiples of 1/2 (and some -0): thousands of tokens share each value
        x = np.round(x * 2) / 2
    elif kind == "neg-inf":  # a fifth of the tokens, never all of them
        mask = rng.random(v) < 0.2
        mask[rng.integers(v)] = False
        x[mask] = -np.inf
    return x.astype(np.float32)


def random_penalties(rng, logits: np.ndarray) -> list:
    """Distinct ids of a context, many among the likeliest tokens (where a
    penalty changes the outcome), a few outside the vocabulary (ignored)."""
    v = logits.size
    top = np.argsort(-logits.astype(np.float64), kind="stable")[:min(v, 20)]
    ids = set(int(i) for i in rng.choice(top, size=min(len(top), 10), replace=False))
    ids |= set(int(i) for i in rng.integers(0, v, size=min(v, 40)))
    ids |= {-1, v, v + 7}
    entries = []
    for i in sorted(ids):
        count = int(rng.integers(0, 10))
        window = int(rng.random() < 0.6)
        entries.append((i, count, window))
    rng.shuffle(entries)
    return entries


PENALISED = dict(repetition_penalty=1.3, frequency_penalty=0.5, presence_penalty=0.3)


def combinations(v: int) -> list[tuple[str, dict]]:
    out = [("greedy", dict(temperature=0.0)), ("greedy+penalties", dict(temperature=0.0, penalised=True))]
    for t in (0.7, 1.0, 1.5):
        out += [(f"T{t}", dict(temperature=t)),
                (f"T{t} top_k 1", dict(temperature=t, top_k=1)),
                (f"T{t} top_k 40", dict(temperature=t, top_k=40)),
                (f"T{t} top_k V-1", dict(temperature=t, top_k=max(1, v - 1))),
                (f"T{t} top_k V", dict(temperature=t, top_k=v)),
                (f"T{t} top_p 0.5", dict(temperature=t, top_p=0.5)),
                (f"T{t} top_p 0.95", dict(temperature=t, top_p=0.95)),
                (f"T{t} min_p 0.05", dict(temperature=t, min_p=0.05)),
                (f"T{t} all three", dict(temperature=t, top_k=40, top_p=0.95, min_p=0.05)),
                (f"T{t} penalties", dict(temperature=t, penalised=True)),
                (f"T{t} all three+penalties", dict(temperature=t, top_k=40, top_p=0.95, min_p=0.05,
                                                   penalised=True))]
    return out


def make_cases(rng, v: int, kinds=("normal", "ties", "neg-inf")) -> list[Case]:
    cases = []
    for name, combo in combinations(v):
        for kind in kinds:
            combo = dict(combo)
            penalised = combo.pop("penalised", False)
            logits = random_logits(rng, v, kind)
            extra = dict(PENALISED, penalties=random_penalties(rng, logits)) if penalised else {}
            # A frequency penalty whose product with some counts rounds (0.7 * 3,
            # 0.7 * 7): the float steps must stay apart (no fused multiply-add).
            if penalised and kind == "ties":
                extra["frequency_penalty"] = 0.7
            cases.append(Case(logits, **combo, **extra, label=f"{name} / {kind}"))
    return cases


def check_tokens(lib, rng, v: int, n_random_u: int = 6, kinds=("normal", "ties", "neg-inf")):
    cases = make_cases(rng, v, kinds)
    refs = [reference(c) for c in cases]
    batch = Batch(lib, cases)
    uniforms = [np.zeros(batch.rows), np.full(batch.rows, U_LAST)]
    uniforms += [rng.random(batch.rows) for _ in range(n_random_u)]
    total = mismatches = 0
    borderline = {"u=0": 0, "u=1-2^-53": 0, "random u": 0}
    shown = 0
    logits_ok = True
    for k, us in enumerate(uniforms):
        tokens = batch.run(us)
        if k == 0:
            got = batch.logits.cpu().numpy()
            for r, ref in enumerate(refs):
                if not np.array_equal(got[r].view(np.uint32), ref.processed.view(np.uint32)):
                    logits_ok = False
                    bad = np.nonzero(got[r].view(np.uint32) != ref.processed.view(np.uint32))[0]
                    print(f"  logits differ: {cases[r].label}: {bad.size} ids, first {bad[:5].tolist()}")
        which = "u=0" if k == 0 else "u=1-2^-53" if k == 1 else "random u"
        for r, ref in enumerate(refs):
            want, near = ref.draw(float(us[r]))
            total += 1
            if near:
                borderline[which] += 1
            elif int(tokens[r]) != want:
                mismatches += 1
                if shown < 10:
                    shown += 1
                    print(f"  mismatch: V={v} {cases[r].label} u={us[r]!r}: GPU {int(tokens[r])}, reference {want}")
    skipped = sum(borderline.values())
    ok = mismatches == 0 and borderline["random u"] <= 0.01 * total and skipped <= 0.1 * total
    record(f"tokens, vocab {v} ({batch.rows} rows x {len(uniforms)} uniforms)", ok, cases=total,
           mismatches=mismatches, **{f"borderline_{k.replace(' ', '_')}": n for k, n in borderline.items()})
    record(f"processed logits bit-exact, vocab {v}", logits_ok, rows=batch.rows)


def chi2_critical(df: int, alpha: float) -> tuple[float, str]:
    """The chi-square quantile 1 - alpha: scipy's, else Wilson-Hilferty's."""
    try:
        from scipy.stats import chi2
        return float(chi2.ppf(1 - alpha, df)), "scipy"
    except ImportError:
        lo, hi = 0.0, 40.0  # z with P(Z > z) = alpha, by bisection
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if 0.5 * math.erfc(mid / math.sqrt(2)) > alpha else (lo, mid)
        z = (lo + hi) / 2
        a = 2 / (9 * df)
        return df * (1 - a + z * math.sqrt(a)) ** 3, "Wilson-Hilferty"


def chi_square(counts: np.ndarray, support: np.ndarray, p: np.ndarray) -> tuple[float, int, int]:
    """X^2 of the counts against p over the support (bins with fewer than 5
    expected merged into one); the degrees of freedom; draws off the support."""
    n = counts.sum()
    outside = int(n - counts[support].sum())
    expected = n * p
    small = expected < 5
    obs = list(counts[support][~small]) + ([counts[support][small].sum()] if small.any() else [])
    exp = list(expected[~small]) + ([expected[small].sum()] if small.any() else [])
    obs, exp = np.array(obs, dtype=np.float64), np.array(exp, dtype=np.float64)
    return float(((obs - exp) ** 2 / exp).sum()), len(exp) - 1, outside


def check_distribution(lib, rng):
    v, copies, launches, alpha = 1000, 4096, 250, 1e-4
    logits = (rng.standard_normal(v) * 1.5).astype(np.float32)
    params = dict(temperature=1.0, top_k=50, top_p=0.9, min_p=0.02)
    right = reference(Case(logits, **params))
    wrong = reference(Case(logits, **dict(params, top_p=1.0)))
    batch = Batch(lib, [Case(logits, **params) for _ in range(copies)])
    counts = np.zeros(v, dtype=np.int64)
    for _ in range(launches):
        counts += np.bincount(batch.run(rng.random(copies)), minlength=v)
    for name, ref in (("reference", right), ("wrong reference (no top-p)", wrong)):
        x2, df, outside = chi_square(counts, ref.order, ref.p)
        critical, how = chi2_critical(df, alpha)
        accept = outside == 0 and x2 <= critical
        ok = accept if ref is right else not accept
        record(f"distribution vs {name}: {'accepted' if ref is right else 'rejected'} at false alarm {alpha}", ok,
               draws=int(counts.sum()), support=len(ref.order), chi2=f"{x2:.1f}", df=df,
               critical=f"{critical:.1f} ({how})", off_support=outside)


def check_determinism(lib, rng):
    v = 49152
    cases = make_cases(rng, v)
    us = rng.random(len(cases))
    batch = Batch(lib, cases)
    first = batch.run(us)
    first_logits = batch.logits.clone()
    second = batch.run(us)
    same_logits = torch.equal(first_logits.view(torch.int32), batch.logits.view(torch.int32))
    record("determinism: the same launch twice", np.array_equal(first, second) and same_logits, rows=len(cases))
    perm = rng.permutation(len(cases))
    permuted = Batch(lib, [cases[i] for i in perm]).run(us[perm])
    record("determinism: rows permuted", np.array_equal(permuted, first[perm]), rows=len(cases))
    alone = [int(Batch(lib, [cases[i]]).run(us[i:i + 1])[0]) for i in range(0, len(cases), 7)]
    record("determinism: rows run alone", alone == [int(first[i]) for i in range(0, len(cases), 7)],
           rows=len(alone))


def check_penalty_rounding(lib):
    """l - fma(0.7, 3, 0.1) is -2.2 in float; separate float steps would give
    -2.1999998."""
    logits = np.zeros(8, dtype=np.float32)
    batch = Batch(lib, [Case(logits, frequency_penalty=0.7, presence_penalty=0.1, penalties=[(5, 3, 0)])])
    batch.run([0.5])
    got = batch.logits.cpu().numpy()[0, 5]
    f32 = np.float32
    want = f32(0) - f32(np.float64(f32(0.7)) * 3 + np.float64(f32(0.1)))
    record("penalty as one fused multiply-add (the host's std::fma)", got.view(np.uint32) == want.view(np.uint32),
           got=repr(float(got)), want=repr(float(want)))


def check_errors(lib):
    v = 1000
    batch = Batch(lib, [Case(np.zeros(v, dtype=np.float32))])
    batch.upload([0.5])
    params = batch.device_params
    raw = torch.zeros(v + 1, dtype=torch.float32, device="cuda")
    for name, rows, vocab, logits in (("rows -1", -1, v, ptr(batch.logits)), ("vocab 0", 1, 0, ptr(batch.logits)),
                                      ("misaligned logits", 1, v, ptr(raw) + 2)):
        rc = lib.exactly_cuda_sample_rows(logits, rows, vocab, ptr(params), None, ptr(batch.tokens),
                                          ptr(batch.workspace), None)
        message = lib.exactly_last_error().decode() if rc != 0 else ""
        record(f"argument error refused: {name}", rc != 0 and message != "", rc=rc, message=repr(message))
    rc = lib.exactly_cuda_sample_rows(None, 0, v, None, None, None, None, None)
    record("zero rows: nothing to do", rc == 0, rc=rc)
    n = lib.exactly_cuda_sampling_workspace_bytes(3, v)
    record("workspace bytes", n == 3 * v * 8, bytes=n)


def bench(lib, rng):
    print("sampling       rows   vocab   us per launch")
    every = dict(top_k=40, top_p=0.95, min_p=0.05)
    for rows, v, label, params in ((1, 128256, "all three", every), (64, 128256, "all three", every),
                                   (64, 128256, "top_p only", dict(top_p=0.95)),
                                   (64, 128256, "min_p only", dict(min_p=0.05)),
                                   (64, 128256, "top_k only", dict(top_k=40)), (64, 128256, "T only", {}),
                                   (256, 128256, "all three", every), (256, 49152, "all three", every)):
        batch = Batch(lib, [Case(random_logits(rng, v, "normal"), temperature=0.8, **params) for _ in range(rows)])
        batch.run(rng.random(rows))
        times = []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            batch.logits.copy_(batch.source)
            start.record()
            batch.launch()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        t = sorted(times)[len(times) // 2]
        print(f"{label:12s} {rows:6d} {v:7d}   {t:9.1f}", flush=True)
        TIMINGS.append({"bench": f"sampling {label}", "rows": rows, "vocab": v, "us": round(t, 1)})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--small", action="store_true", help="two small vocabularies only (for compute-sanitizer)")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    lib = load_library()
    bind(lib)
    if a.small:
        for v in (1000, 33):
            check_tokens(lib, rng, v, n_random_u=1)
        check_errors(lib)
        return REPORT.finish("sampling checks", a.json)
    for v in (1000, 49152, 128256):
        check_tokens(lib, rng, v)
    for v in (1, 2, 33, 1025):
        check_tokens(lib, rng, v, n_random_u=3)
    check_distribution(lib, rng)
    check_determinism(lib, rng)
    check_penalty_rounding(lib)
    check_errors(lib)
    if a.bench:
        bench(lib, rng)
    return REPORT.finish("sampling checks", a.json, TIMINGS)


if __name__ == "__main__":
    sys.exit(main())
