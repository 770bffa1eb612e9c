"""Checks of the GPU verification of speculative drafts (verify_drafts in
kernels/cuda/sampling.h, run by scripts/gpu-check) against a float64
reference of the host's rule (speculative/rejection_sampler.cc, acceptance_rule.cc,
distribution_view.cc), written here from its description, over target rows
processed by check_sampling's reference of the host sampler:

- verdicts: random jobs (vocabularies 1000, 49152, 128256, 33; k = 1, 3, 5; no
  filter, top-k, top-p, min-p, all three, penalties, and a greedy row, which
  counts as one-hot) with draft distributions q of every kind a drafter
  gives: one-hot at the draft (n-gram), one-hot at a draft outside p's
  support, sparse (40 entries), dense (every token), q equal to p (always
  accepted), q above p (no residual mass: the draw falls back to p), q
  disjoint from p (never accepted); each with uniforms that force the first
  rejection at every position, all zeros, all 1 - 2^-53 and random ones:
  the number accepted and the token equal the reference's except where the
  reference calls the case borderline (a uniform within 1e-9 relative of the
  acceptance probability, a draw within rounding of a boundary, a residual
  made of rounding, a filter at its threshold); none may differ, few may be
  borderline;
- processed logits: what the kernel writes back equals the reference's
  penalised, temperature-scaled float32 logits bit for bit;
- law: one job of two drafts, 1,024,000 verifications (4096 copies per
  launch, fresh drafts from q and fresh uniforms each launch): the first
  emitted token (x_1 when accepted, else the replacement) passes a
  chi-square test against p_1 at a false-alarm rate of 1e-4, equals the
  reference rule's token on the same draws, and the same test rejects a
  deliberately wrong rule (the residual replaced by p) on the same draws;
- determinism: the same launch twice gives the same results and logits, and
  a job's result does not change when the jobs are permuted;
- invalid jobs: a job sharing a row with an earlier one, or reaching past the
  rows, gets -1; the others are unaffected;
- argument errors: a negative job count, vocab 0, too few rows and a
  misaligned pointer are refused with a message.

--small runs two small vocabularies only (for compute-sanitizer).

    python3 tests/cuda/check_verify.py [--json FILE] [--small]
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from dataclasses import dataclass

import numpy as np
import torch

from check_report import Report
from check_sampling import (BORDER, PARAMS_DTYPE, PENALISED, PENALTY_DTYPE, U_LAST, Case, chi2_critical,
                            chi_square, random_logits, random_penalties, reference)
from kernels_lib import load_library, ptr

REPORT = Report()
record = REPORT.record

# The C structs (sampling.h).
JOB_DTYPE = np.dtype([("first_row", "<i4"), ("num_drafts", "<i4"), ("draft_begin", "<i4"), ("q_begin", "<i4"),
                      ("uniform_begin", "<i4"), ("pad", "<i4")])
DRAFT_PROB_DTYPE = np.dtype([("id", "<i4"), ("pad", "<i4"), ("p", "<f8")], align=True)
assert JOB_DTYPE.itemsize == 24 and DRAFT_PROB_DTYPE.itemsize == 16 and DRAFT_PROB_DTYPE.fields["p"][1] == 8

# A difference p(y) - q(y) within this fraction of p(y) may have either sign
# on the GPU (p is summed in another order there).
SIGN_SLACK = 1e-10


def bind(lib):
    c_int, c_i64, c_p = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
    lib.exactly_cuda_verify_workspace_bytes.restype = c_i64
    lib.exactly_cuda_verify_workspace_bytes.argtypes = [c_i64, c_int]
    lib.exactly_cuda_verify_drafts.argtypes = [c_p, c_i64, c_int, c_p, c_p, c_p, c_int, c_p, c_p, c_p, c_p, c_p,
                                               c_p, c_p, c_p]


class Target:
    """A processed row's distribution as the host's Sampler::distribution
    gives it: the survivors in p's order with their renormalised
    probabilities (a greedy row: one-hot at its argmax)."""

    def __init__(self, case: Case):
        ref = reference(case)
        self.processed = ref.processed
        if ref.greedy is not None:
            self.order, self.p, self.borderline = np.array([ref.greedy]), np.array([1.0]), False
        else:
            self.order, self.p = ref.order, ref.p
            self.borderline = ref.top_p_borderline or ref.min_p_borderline

    def prob(self, x: int) -> float:
        at = np.nonzero(self.order == x)[0]
        return float(self.p[at[0]]) if at.size else 0.0

    def draw(self, u: float) -> tuple[int, bool]:
        """draw_from: the first token whose running mass exceeds u times the
        total, else the last of positive mass; and whether u lies within
        BORDER of a boundary (u = 0 is exact: the first positive)."""
        c = np.cumsum(self.p)
        target = u * c[-1]
        j = int(np.searchsorted(c, target, side="right"))
        if j >= len(c):
            j = int(np.nonzero(self.p > 0)[0][-1])
        near = u > 0 and bool(np.any(np.abs(c[:-1] - target) < BORDER))
        return int(self.order[j]), near


def accept_probability(p_x: float, q_x: float) -> float:
    if not q_x > 0:
        return 0.0
    return 1.0 if p_x >= q_x else p_x / q_x


def q_prob(q: tuple[np.ndarray, np.ndarray], x: int) -> float:
    at = np.nonzero(q[0] == x)[0]
    return float(q[1][at[0]]) if at.size else 0.0


def residual_draw(t: Target, q: tuple[np.ndarray, np.ndarray], u: float, v: int) -> tuple[int, bool, str]:
    """The replacement after a rejection: draw_from(max(0, p - q) in p's
    order) with u, or draw_from(p) when that has no mass; whether it is
    borderline; which of the two it was."""
    dense = np.zeros(v)
    ids, probs = q
    inside = (ids >= 0) & (ids < v)
    dense[ids[inside]] = probs[inside]
    p = t.p
    diff = p - dense[t.order]
    positive = p > 0
    r = np.where(positive & (diff > 0), diff, 0.0)
    total = r.sum()
    unsure = positive & (np.abs(diff) <= SIGN_SLACK * p)
    slack = 1e-12 + SIGN_SLACK * float(p[unsure].sum())
    if total <= 0 and not unsure.any():
        token, near = t.draw(u)
        return token, near, "fallback"
    if total <= 1e3 * slack:  # a residual made of rounding: either side may win
        return (t.draw(u)[0] if total <= 0 else int(t.order[np.argmax(r > 0)])), True, "residual"
    c = np.cumsum(r)
    target = u * total
    j = int(np.searchsorted(c, target, side="right"))
    if j >= len(c):
        j = int(np.nonzero(r > 0)[0][-1])
    if u > 0:
        near = bool(np.any(np.abs(c[:-1] - target) < slack + BORDER * total))
    else:  # the first positive, unless rounding makes an earlier one positive on the GPU
        near = bool(unsure[:j].any())
    return int(t.order[j]), near, "residual"


@dataclass
class Job:
    """One verification: k + 1 rows, k drafts and their draft distributions."""
    cases: list[Case]
    drafts: list[int]
    qs: list[tuple[np.ndarray, np.ndarray]]  # (ids int32, probabilities float64) per draft
    targets: list[Target]
    label: str = ""

    @property
    def k(self) -> int:
        return len(self.drafts)

    def accept_probabilities(self) -> list[float]:
        return [accept_probability(self.targets[i].prob(x), q_prob(self.qs[i], x)) for i, x in enumerate(self.drafts)]

    def verdict(self, us, v: int) -> tuple[int, int, bool, str]:
        """(accepted, token, borderline, outcome) by the host's rule."""
        near = False
        for i, x in enumerate(self.drafts):
            t = self.targets[i]
            near |= t.borderline
            p_x, q_x = t.prob(x), q_prob(self.qs[i], x)
            a = accept_probability(p_x, q_x)
            # p(x) >= q(x) by more than rounding gives exactly 1 on the GPU too.
            if not (a == 1.0 and p_x - q_x > SIGN_SLACK * p_x):
                near |= abs(us[i] - a) < BORDER * a
            if us[i] < a:
                continue
            token, n, outcome = residual_draw(t, self.qs[i], float(us[i + 1]), v)
            return i, token, near or n, outcome
        t = self.targets[self.k]
        token, n = t.draw(float(us[self.k]))
        return self.k, token, near or n or t.borderline, "bonus"


class Batch:
    """Jobs laid out on the device: their rows one after another, the C
    structs, and the outputs. The job table can be replaced (upload_jobs),
    e.g. to make jobs share draft distributions or rows."""

    def __init__(self, lib, jobs: list[Job], vocab: int):
        self.lib, self.jobs, self.vocab = lib, jobs, vocab
        cases = [c for j in jobs for c in j.cases]
        self.rows = len(cases)
        self.source = torch.from_numpy(np.stack([c.logits for c in cases])).cuda()
        self.logits = torch.empty_like(self.source)
        params = np.zeros(self.rows, dtype=PARAMS_DTYPE)
        for name in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
                     "presence_penalty"):
            params[name] = [getattr(c, name) for c in cases]
        sizes = np.array([len(c.penalties) for c in cases], dtype=np.int64)
        params["penalty_end"] = np.cumsum(sizes)
        params["penalty_begin"] = params["penalty_end"] - sizes
        params["uniform"] = np.nan  # not read
        self.params = torch.from_numpy(params.view(np.uint8).copy()).cuda()
        entries = [e for c in cases for e in c.penalties]
        self.penalties = None
        if entries:
            host = np.array(entries, dtype=np.int32).view(PENALTY_DTYPE).reshape(-1)
            self.penalties = torch.from_numpy(host.view(np.uint8).copy()).cuda()
        table = np.zeros(len(jobs), dtype=JOB_DTYPE)
        ks = np.array([j.k for j in jobs], dtype=np.int64)
        table["num_drafts"] = ks
        table["first_row"] = np.cumsum(ks + 1) - (ks + 1)
        table["draft_begin"] = np.cumsum(ks) - ks
        table["q_begin"] = table["first_row"]  # k + 1 offsets a job
        table["uniform_begin"] = table["first_row"]
        self.table = table
        self.upload_jobs(table)
        self.upload_drafts([d for j in jobs for d in j.drafts])
        offsets, pieces, at = [], [], 0
        for j in jobs:
            for ids, probs in j.qs:
                offsets.append(at)
                piece = np.zeros(len(ids), dtype=DRAFT_PROB_DTYPE)
                piece["id"], piece["p"] = ids, probs
                pieces.append(piece)
                at += len(ids)
            offsets.append(at)
        self.q_offsets = torch.from_numpy(np.array(offsets, dtype=np.int32)).cuda()
        q_entries = np.concatenate(pieces) if pieces else np.zeros(0, dtype=DRAFT_PROB_DTYPE)
        self.q_entries = torch.from_numpy(q_entries.view(np.uint8).copy()).cuda() if at else None
        n = lib.exactly_cuda_verify_workspace_bytes(self.rows, vocab)
        self.workspace = torch.empty(max(n, 16) // 8, dtype=torch.int64, device="cuda")
        self.uniforms = None

    def upload_jobs(self, table: np.ndarray) -> None:
        self.num_jobs = len(table)
        self.device_jobs = torch.from_numpy(table.view(np.uint8).copy()).cuda()
        self.accepted = torch.empty(self.num_jobs, dtype=torch.int32, device="cuda")
        self.tokens = torch.empty(self.num_jobs, dtype=torch.int32, device="cuda")

    def upload_drafts(self, drafts) -> None:
        self.drafts = torch.from_numpy(np.asarray(drafts, dtype=np.int32).copy()).cuda()

    def upload_uniforms(self, us) -> None:
        """us: the k + 1 uniforms of every job, in job order."""
        self.uniforms = torch.from_numpy(np.concatenate(us).astype(np.float64)).cuda()

    def launch(self) -> int:
        return self.lib.exactly_cuda_verify_drafts(
            ptr(self.logits), self.rows, self.vocab, ptr(self.params), ptr(self.penalties), ptr(self.device_jobs),
            self.num_jobs, ptr(self.drafts), ptr(self.q_offsets), ptr(self.q_entries), ptr(self.uniforms),
            ptr(self.accepted), ptr(self.tokens), ptr(self.workspace), None)

    def run(self, us=None) -> tuple[np.ndarray, np.ndarray]:
        """Verifies every job from the pristine logits: (accepted, tokens)."""
        if us is not None:
            self.upload_uniforms(us)
        self.logits.copy_(self.source)
        self.accepted.fill_(-2)
        self.tokens.fill_(-2)
        if self.launch() != 0:
            raise RuntimeError(f"exactly_cuda_verify_drafts: {self.lib.exactly_last_error().decode()}")
        torch.cuda.synchronize()
        return self.accepted.cpu().numpy(), self.tokens.cpu().numpy()


COMBOS = [("T1.0", dict(temperature=1.0)),
          ("T0.7 top_k 40", dict(temperature=0.7, top_k=40)),
          ("T1.0 top_p 0.95", dict(temperature=1.0, top_p=0.95)),
          ("T1.5 min_p 0.05", dict(temperature=1.5, min_p=0.05)),
          ("T0.7 all three", dict(temperature=0.7, top_k=40, top_p=0.95, min_p=0.05)),
          ("T1.0 penalties", dict(temperature=1.0, penalised=True)),
          ("T1.0 all three+penalties", dict(temperature=1.0, top_k=40, top_p=0.95, min_p=0.05, penalised=True)),
          ("greedy", dict(temperature=0.0))]
Q_KINDS = ("one-hot", "one-hot outside", "sparse", "dense", "equal", "above", "disjoint")


def softmax(x: np.ndarray) -> np.ndarray:
    w = np.exp(x - x.max())
    return w / w.sum()


def pick(rng, ids: np.ndarray, probs: np.ndarray) -> int:
    return int(rng.choice(ids, p=probs / probs.sum()))


def draft_distribution(rng, t: Target, kind: str, v: int) -> tuple[int, tuple[np.ndarray, np.ndarray], str]:
    """(draft, q, kind) for a position whose target is t: the draft is drawn
    from q, as a drafter draws it, except for 'one-hot outside' and 'above'."""
    outside = np.setdiff1d(np.arange(v), t.order)
    if kind == "disjoint" and outside.size == 0:
        kind = "sparse"  # no filter: p covers the vocabulary
    base = t.processed.astype(np.float64)
    base = np.where(np.isfinite(base), base, -1e30)
    if kind == "one-hot":
        x = pick(rng, t.order, t.p)
        return x, (np.array([x]), np.array([1.0])), kind
    if kind == "one-hot outside":
        x = int(rng.choice(outside)) if outside.size else int(t.order[np.argmin(t.p)])
        return x, (np.array([x]), np.array([1.0])), kind
    if kind == "sparse":  # the drafter's own top 40
        noisy = base + rng.standard_normal(v)
        ids = np.argsort(-noisy, kind="stable")[:min(40, v)]
        probs = softmax(noisy[ids])
    elif kind == "dense":
        ids = np.arange(v)
        probs = softmax(base / 1.3 + 0.5 * rng.standard_normal(v))
    elif kind == "equal":
        ids, probs = t.order.copy(), t.p.copy()
    elif kind == "above":  # q >= p everywhere on p's support: no residual
        ids, probs = t.order.copy(), t.p * 1.001
        return pick(rng, t.order, t.p), (ids.astype(np.int32), probs), kind
    else:  # disjoint
        ids = rng.choice(outside, size=min(40, outside.size), replace=False)
        probs = rng.dirichlet(np.ones(ids.size))
    perm = rng.permutation(ids.size)  # entries in no particular order
    ids, probs = ids[perm].astype(np.int32), probs[perm]
    return pick(rng, ids, probs), (ids, probs), kind


def make_job(rng, v: int, combo: dict, kind: str, k: int, logit_kind: str, label: str) -> Job:
    combo = dict(combo)
    penalised = combo.pop("penalised", False)
    cases = []
    for _ in range(k + 1):
        logits = random_logits(rng, v, logit_kind)
        extra = dict(PENALISED, penalties=random_penalties(rng, logits)) if penalised else {}
        cases.append(Case(logits, **combo, **extra))
    targets = [Target(c) for c in cases]
    drafts, qs, kinds = [], [], set()
    for i in range(k):
        x, q, used = draft_distribution(rng, targets[i], kind, v)
        drafts.append(x)
        qs.append(q)
        kinds.add(used)
    return Job(cases, drafts, qs, targets, f"{label} / q {'+'.join(sorted(kinds))} / k {k} / {logit_kind}")


def make_jobs(rng, v: int, ks=(1, 3, 5), combos=COMBOS, kinds=Q_KINDS) -> list[Job]:
    jobs, n = [], 0
    logit_kinds = ("normal", "ties", "neg-inf")
    for name, combo in combos:
        for kind in kinds:
            for k in ks:
                jobs.append(make_job(rng, v, combo, kind, k, logit_kinds[n % 3], name))
                n += 1
    return jobs


def uniform_sets(rng, jobs: list[Job]) -> list[tuple[str, list[np.ndarray]]]:
    """Per launch, each job's k + 1 uniforms: the first rejection forced at
    position m (m = k: all accepted) for every m, then all zeros, all
    1 - 2^-53, and random."""
    sets = []
    accepts = [np.array(j.accept_probabilities()) for j in jobs]
    for m in range(max(j.k for j in jobs) + 1):
        us = []
        for j, a in zip(jobs, accepts):
            u = rng.random(j.k + 1)
            stop = min(m, j.k)
            u[:stop] = a[:stop] * rng.random(stop)  # below a: accepted (when a > 0)
            if stop < j.k:
                u[stop] = min(a[stop] + (1 - a[stop]) * rng.random(), U_LAST)  # at or above a: rejected
            us.append(u)
        sets.append((f"reject at {m}", us))
    sets.append(("all 0", [np.zeros(j.k + 1) for j in jobs]))
    sets.append(("all 1-2^-53", [np.full(j.k + 1, U_LAST) for j in jobs]))
    for n in range(3):
        sets.append((f"random {n}", [rng.random(j.k + 1) for j in jobs]))
    return sets


def check_verdicts(lib, rng, v: int, **kw):
    jobs = make_jobs(rng, v, **kw)
    batch = Batch(lib, jobs, v)
    total = mismatches = borderline = 0
    outcomes: dict[str, int] = {}
    shown = 0
    logits_ok = True
    for n, (name, us) in enumerate(uniform_sets(rng, jobs)):
        accepted, tokens = batch.run(us)
        if n == 0:
            got = batch.logits.cpu().numpy()
            row = 0
            for j in jobs:
                for t in j.targets:
                    if not np.array_equal(got[row].view(np.uint32), t.processed.view(np.uint32)):
                        logits_ok = False
                        print(f"  logits differ: {j.label}, row {row}")
                    row += 1
        for i, j in enumerate(jobs):
            want_accepted, want_token, near, outcome = j.verdict(us[i], v)
            total += 1
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if near:
                borderline += 1
            elif int(accepted[i]) != want_accepted or int(tokens[i]) != want_token:
                mismatches += 1
                if shown < 10:
                    shown += 1
                    print(f"  mismatch: V={v} {j.label} ({name}) drafts {j.drafts} u={us[i].tolist()}: GPU "
                          f"{int(accepted[i])} accepted, token {int(tokens[i])}; reference {want_accepted}, "
                          f"{want_token} ({outcome})")
    ok = mismatches == 0 and borderline <= 0.1 * total and all(outcomes.get(o, 0) > 0 for o in
                                                               ("bonus", "residual", "fallback"))
    record(f"verdicts, vocab {v} ({len(jobs)} jobs, {batch.rows} rows)", ok, cases=total, mismatches=mismatches,
           borderline=borderline, **{f"outcome_{o}": c for o, c in sorted(outcomes.items())})
    record(f"processed logits bit-exact, vocab {v}", logits_ok, rows=batch.rows)


def fixed_job(rng, v: int, params: dict, k: int) -> Job:
    """A job of fixed rows whose draft distributions overlap p's support in
    part: 20 of p's likeliest tokens and 20 tokens outside it."""
    cases = [Case((rng.standard_normal(v) * 1.5).astype(np.float32), **params) for _ in range(k + 1)]
    targets = [Target(c) for c in cases]
    qs = []
    for t in targets[:k]:
        inside = t.order[:20]
        outside = rng.choice(np.setdiff1d(np.arange(v), t.order), size=20, replace=False)
        ids = np.concatenate([inside, outside]).astype(np.int32)
        qs.append((ids, rng.dirichlet(np.full(ids.size, 0.7))))
    return Job(cases, [int(q[0][0]) for q in qs], qs, targets, "law")


def check_law(lib, rng):
    v, copies, launches, alpha, k = 1000, 4096, 250, 1e-4, 2
    job = fixed_job(rng, v, dict(temperature=1.0, top_k=50, top_p=0.9, min_p=0.02), k)
    p1, (q_ids, q_probs) = job.targets[0], job.qs[0]
    batch = Batch(lib, [job] * copies, v)
    # All copies read the one job's draft distributions.
    table = batch.table.copy()
    table["q_begin"] = 0
    batch.upload_jobs(table)
    # The reference rule, and the wrong one, for x_1 ~ q_1 and the same uniforms.
    q_of = np.zeros(v)
    q_of[q_ids] = q_probs
    p_of = np.zeros(v)
    p_of[p1.order] = p1.p
    accept = np.where(q_of > 0, np.where(p_of >= q_of, 1.0, p_of / np.where(q_of > 0, q_of, 1.0)), 0.0)
    residual = np.maximum(p_of[p1.order] - q_of[p1.order], 0.0)
    residual_c = np.cumsum(residual)
    p_c = np.cumsum(p1.p)
    counts = np.zeros(v, dtype=np.int64)
    wrong_counts = np.zeros(v, dtype=np.int64)
    mismatches = near = 0
    for _ in range(launches):
        x = np.stack([rng.choice(ids, size=copies, p=probs / probs.sum()) for ids, probs in job.qs], axis=1)
        us = rng.random((copies, k + 1))
        batch.upload_drafts(x.reshape(-1))
        accepted, tokens = batch.run(list(us))
        first = np.where(accepted >= 1, x[:, 0], tokens)
        counts += np.bincount(first, minlength=v)
        a = accept[x[:, 0]]
        kept = us[:, 0] < a
        target = us[:, 1] * residual_c[-1]
        right = np.where(kept, x[:, 0], p1.order[np.minimum(np.searchsorted(residual_c, target, side="right"),
                                                            len(p1.order) - 1)])
        wrong = np.where(kept, x[:, 0], p1.order[np.minimum(np.searchsorted(p_c, us[:, 1] * p_c[-1], side="right"),
                                                            len(p1.order) - 1)])
        wrong_counts += np.bincount(wrong, minlength=v)
        borderline = (np.abs(us[:, 0] - a) <= BORDER * a) | \
            (~kept & (np.abs(residual_c[None, :-1] - target[:, None]) < BORDER).any(axis=1))
        near += int(borderline.sum())
        mismatches += int(((first != right) & ~borderline).sum())
    draws = int(counts.sum())
    record("law: the GPU's first tokens equal the reference rule's on the same draws", mismatches == 0,
           draws=draws, mismatches=mismatches, borderline=near)
    for name, c, right_rule in (("GPU", counts, True), ("wrong rule (residual replaced by p)", wrong_counts, False)):
        x2, df, outside = chi_square(c, p1.order, p1.p)
        critical, how = chi2_critical(df, alpha)
        fits = outside == 0 and x2 <= critical
        record(f"law: {name}'s first token vs p_1: {'accepted' if right_rule else 'rejected'} at false alarm {alpha}",
               fits if right_rule else not fits, draws=int(c.sum()), support=len(p1.order), chi2=f"{x2:.1f}", df=df,
               critical=f"{critical:.1f} ({how})", off_support=outside)


def check_determinism(lib, rng):
    v = 49152
    jobs = make_jobs(rng, v, ks=(1, 3), combos=COMBOS[:4] + COMBOS[6:], kinds=Q_KINDS)
    us = [rng.random(j.k + 1) for j in jobs]
    batch = Batch(lib, jobs, v)
    first = batch.run(us)
    first_logits = batch.logits.clone()
    second = batch.run(us)
    same = all(np.array_equal(a, b) for a, b in zip(first, second))
    same_logits = torch.equal(first_logits.view(torch.int32), batch.logits.view(torch.int32))
    record("determinism: the same launch twice", same and same_logits, jobs=len(jobs))
    perm = rng.permutation(len(jobs))
    permuted = Batch(lib, [jobs[i] for i in perm], v).run([us[i] for i in perm])
    record("determinism: jobs permuted", all(np.array_equal(p, f[perm]) for p, f in zip(permuted, first)),
           jobs=len(jobs))


def check_invalid_jobs(lib, rng):
    v = 1000
    jobs = [make_job(rng, v, dict(temperature=1.0, top_k=40), "sparse", 3, "normal", "valid") for _ in range(3)]
    batch = Batch(lib, jobs, v)
    us = [rng.random(j.k + 1) for j in jobs]
    want = batch.run(us)
    table = batch.table.copy()
    table = np.concatenate([table, table[1:2], table[2:3]])  # job 3 repeats job 1's rows
    table["first_row"][4] = batch.rows - 1  # job 4 reaches past the last row
    batch.upload_jobs(table)
    accepted, tokens = batch.run(us + [us[1], us[2]])
    ok = (np.array_equal(accepted[:3], want[0]) and np.array_equal(tokens[:3], want[1]) and
          accepted[3:].tolist() == [-1, -1] and tokens[3:].tolist() == [-1, -1])
    record("invalid jobs: a shared row or rows past the end give -1, the others unaffected", ok,
           accepted=accepted.tolist(), tokens=tokens.tolist())


def check_errors(lib, rng):
    v = 1000
    jobs = [make_job(rng, v, dict(temperature=1.0), "one-hot", 1, "normal", "")]
    batch = Batch(lib, jobs, v)
    batch.upload_uniforms([np.array([0.5, 0.5])])
    raw = torch.zeros(64, dtype=torch.int64, device="cuda")
    b = batch

    def call(rows=b.rows, vocab=v, num_jobs=1, q_entries=ptr(b.q_entries)):
        return lib.exactly_cuda_verify_drafts(ptr(b.logits), rows, vocab, ptr(b.params), None, ptr(b.device_jobs),
                                              num_jobs, ptr(b.drafts), ptr(b.q_offsets), q_entries, ptr(b.uniforms),
                                              ptr(b.accepted), ptr(b.tokens), ptr(b.workspace), None)

    for name, kw in (("jobs -1", dict(num_jobs=-1)), ("vocab 0", dict(vocab=0)), ("rows -1", dict(rows=-1)),
                     ("1 row for 1 job", dict(rows=1)), ("misaligned q_entries", dict(q_entries=ptr(raw) + 4))):
        rc = call(**kw)
        message = lib.exactly_last_error().decode() if rc != 0 else ""
        record(f"argument error refused: {name}", rc != 0 and message != "", rc=rc, message=repr(message))
    rc = lib.exactly_cuda_verify_drafts(None, 0, v, None, None, None, 0, None, None, None, None, None, None, None,
                                        None)
    record("zero jobs: nothing to do", rc == 0, rc=rc)
    n = lib.exactly_cuda_verify_workspace_bytes(3, v)
    record("workspace bytes", n == 3 * (v * 8 + 56), bytes=n)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--small", action="store_true", help="two small vocabularies only (for compute-sanitizer)")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    lib = load_library()
    bind(lib)
    if a.small:
        for v in (1000, 33):
            check_verdicts(lib, rng, v, ks=(1, 3))
        check_invalid_jobs(lib, rng)
        check_errors(lib, rng)
        return REPORT.finish("verification checks", a.json)
    for v in (1000, 49152, 128256):
        check_verdicts(lib, rng, v)
    check_verdicts(lib, rng, 33, ks=(1, 3))
    check_law(lib, rng)
    check_determinism(lib, rng)
    check_invalid_jobs(lib, rng)
    check_errors(lib, rng)
    return REPORT.finish("verification checks", a.json)


if __name__ == "__main__":
    sys.exit(main())
