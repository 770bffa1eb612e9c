"""Exactness checks of the CUDA training FlashAttention (kernels/cuda/flash_train.h)
on the GPU. Each case runs the forward (out, lse) and the backward (dq, dk, dv)
on random bf16 or fp16 inputs and compares every tensor with float64 PyTorch
autograd of naive attention on the upcast inputs; the same naive attention
run in the inputs' dtype (what PyTorch's math path computes: 16-bit
products, softmax and gradients) against that same reference sets the bound.
The kernel's max and RMS errors must each be at most twice the math path's,
plus ABS_SLACK. Outputs are poisoned with NaN before every run (NaN never
passes, so an unwritten element fails), and two runs must be bit-identical.
A control shows the bound has teeth: dq from a float64 reference that drops
the D term of dS = P (dP - D) must fail it.

    python3 tests/cuda/check_flash_train.py [--small] [--json FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import torch

from check_report import Report
from kernels_lib import DTYPE_CODE, check, load_library, ptr

# Added to both bounds: where the math path is exact (one key: out = v), the
# kernel may still differ by fp32 rounding (D = dO . O summed in another order
# than dP = dO . v), far below a 16-bit ulp of 1 (2^-8 bf16, 2^-11 fp16).
ABS_SLACK = 1e-4
TENSORS = ("out", "lse", "dq", "dk", "dv")


@dataclass
class Case:
    """A varlen batch: q, d_out [total_q, H, D]; k, v [total_k, KV, D]."""
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    d_out: torch.Tensor
    q_lens: list[int]
    k_lens: list[int]
    cu_q: torch.Tensor  # int32 [n_seqs + 1], on the device
    cu_k: torch.Tensor
    causal: bool

    @property
    def n_heads(self) -> int:
        return self.q.shape[1]

    @property
    def n_kv(self) -> int:
        return self.k.shape[1]

    @property
    def head_dim(self) -> int:
        return self.q.shape[2]

    @property
    def scale(self) -> float:
        return self.head_dim ** -0.5


def offsets(lens):
    return torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")


def make_case(q_lens, k_lens, n_heads, n_kv, d, dtype, causal, seed=0) -> Case:
    g = torch.Generator(device="cpu").manual_seed(seed)
    tq, tk = sum(q_lens), sum(k_lens)

    def randn(*shape):
        return torch.randn(shape, generator=g).to(dtype).cuda()

    return Case(randn(tq, n_heads, d), randn(tk, n_kv, d), randn(tk, n_kv, d), randn(tq, n_heads, d), list(q_lens),
                list(k_lens), offsets(q_lens), offsets(k_lens), causal)


def shape_args(c: Case):
    return (len(c.q_lens), ptr(c.cu_q), ptr(c.cu_k), max(c.q_lens), max(c.k_lens), c.n_heads, c.n_kv, c.head_dim,
            DTYPE_CODE[c.q.dtype], c.scale, int(c.causal))


def run_forward(lib, c: Case):
    out = torch.full_like(c.q, float("nan"))
    lse = torch.full(c.q.shape[:2], float("nan"), dtype=torch.float32, device="cuda")
    check(lib, lib.exactly_cuda_flash_forward(ptr(c.q), ptr(c.k), ptr(c.v), *shape_args(c), ptr(out), ptr(lse), None))
    return out, lse


def run_backward(lib, c: Case, out, lse):
    dq, dk, dv = (torch.full_like(t, float("nan")) for t in (c.q, c.k, c.v))
    n = lib.exactly_cuda_flash_backward_workspace_bytes(len(c.q_lens) * max(c.q_lens), c.n_heads)
    workspace = torch.empty(max(n, 16), dtype=torch.uint8, device="cuda")
    check(lib, lib.exactly_cuda_flash_backward(
        ptr(c.q), ptr(c.k), ptr(c.v), ptr(out), ptr(c.d_out), ptr(lse), *shape_args(c), ptr(dq), ptr(dk), ptr(dv),
        ptr(workspace), n, None))
    return dq, dk, dv


def run_kernels(lib, c: Case) -> dict:
    out, lse = run_forward(lib, c)
    dq, dk, dv = run_backward(lib, c, out, lse)
    torch.cuda.synchronize()
    return dict(out=out, lse=lse, dq=dq, dk=dk, dv=dv)


def first_seeing_row(lq, lk, causal):
    """Queries before this one see no key (output 0, lse -inf, no gradient)."""
    if lk == 0:
        return lq
    return max(0, lq - lk) if causal else 0


def naive_sequence(q, k, v, d_out, causal, scale, drop_delta=False):
    """Naive attention of one sequence in the inputs' dtype, with autograd:
    out, lse and the gradients of (out * d_out).sum(). Rows that see no key are
    left out (the caller's zeros and -inf stand for them). drop_delta: dq from
    dS = P dP instead of P (dP - D), computed by hand (the teeth control)."""
    lq, lk = q.shape[0], k.shape[0]
    g = q.shape[1] // k.shape[1]
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    qq, kk, vv = leaves[0], leaves[1].repeat_interleave(g, dim=1), leaves[2].repeat_interleave(g, dim=1)
    s = torch.einsum("qhd,khd->hqk", qq, kk) * scale
    if causal:
        hidden = torch.arange(lk, device=q.device)[None, :] > torch.arange(lq, device=q.device)[:, None] + lk - lq
        s = s.masked_fill(hidden[None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    out = torch.einsum("hqk,khd->qhd", p, vv)
    out.backward(d_out)
    dq = leaves[0].grad
    if drop_delta:
        dp = torch.einsum("qhd,khd->hqk", d_out, vv.detach())
        dq = torch.einsum("hqk,khd->qhd", p.detach() * dp, kk.detach()) * scale
    return out.detach(), torch.logsumexp(s.detach(), dim=-1).transpose(0, 1), dq, leaves[1].grad, leaves[2].grad


def naive(c: Case, dtype, drop_delta=False) -> dict:
    """Naive attention of every sequence in `dtype`, in the kernels' layout."""
    cast = [t.to(dtype) for t in (c.q, c.k, c.v, c.d_out)]
    res = dict(out=torch.zeros_like(cast[0]), lse=torch.full(c.q.shape[:2], float("-inf"), dtype=dtype, device="cuda"),
               dq=torch.zeros_like(cast[0]), dk=torch.zeros_like(cast[1]), dv=torch.zeros_like(cast[2]))
    qa = ka = 0
    for lq, lk in zip(c.q_lens, c.k_lens):
        r0 = first_seeing_row(lq, lk, c.causal)
        if r0 < lq:
            q, d_out = (t[qa + r0:qa + lq] for t in (cast[0], cast[3]))
            k, v = (t[ka:ka + lk] for t in (cast[1], cast[2]))
            got = naive_sequence(q, k, v, d_out, c.causal, c.scale, drop_delta)
            for name, t in zip(("out", "lse", "dq"), got[:3]):
                res[name][qa + r0:qa + lq] = t
            res["dk"][ka:ka + lk], res["dv"][ka:ka + lk] = got[3], got[4]
        qa, ka = qa + lq, ka + lk
    return res


def errors(x: torch.Tensor, ref: torch.Tensor):
    """Max and RMS error against the float64 reference, over finite entries
    (lse is -inf where a query sees no key; there x must be -inf too)."""
    x = x.double()
    finite = torch.isfinite(ref)
    same_infinities = bool(torch.equal(x[~finite], ref[~finite]) and not torch.isnan(x).any())
    diff = (x - ref)[finite]
    if diff.numel() == 0:
        return 0.0, 0.0, same_infinities
    return diff.abs().max().item(), diff.square().mean().sqrt().item(), same_infinities


def within_bound(mine, base) -> bool:
    return mine[2] and mine[0] <= 2 * base[0] + ABS_SLACK and mine[1] <= 2 * base[1] + ABS_SLACK


def bit_identical(a: dict, b: dict) -> bool:
    as_bits = {2: torch.int16, 4: torch.int32}
    return all(torch.equal(a[n].view(as_bits[a[n].element_size()]), b[n].view(as_bits[b[n].element_size()]))
               for n in TENSORS)


def flash_case(lib, report: Report, name, q_lens, k_lens, n_heads, n_kv, d, dtype, causal, seed=0, control=False):
    c = make_case(q_lens, k_lens, n_heads, n_kv, d, dtype, causal, seed)
    first, second = run_kernels(lib, c), run_kernels(lib, c)
    ref, base = naive(c, torch.float64), naive(c, dtype)
    ok, fields = bit_identical(first, second), {}
    fields["deterministic"] = ok
    for t in TENSORS:
        mine, theirs = errors(first[t], ref[t]), errors(base[t], ref[t])
        ok = ok and within_bound(mine, theirs)
        fields[t] = f"{mine[0]:.3g}/{theirs[0]:.3g}" + ("" if mine[2] else "(inf/nan!)")
    report.record(name, ok, **fields)
    if control:
        wrong = errors(naive(c, torch.float64, drop_delta=True)["dq"], ref["dq"])
        bound = errors(base["dq"], ref["dq"])
        report.record(f"control: dq without the D term fails the bound ({name})", not within_bound(wrong, bound),
                      err=f"{wrong[0]:.3g}", math_path_err=f"{bound[0]:.3g}")


def bad_arguments_case(lib, report: Report):
    c = make_case([4], [4], 4, 2, 64, torch.bfloat16, True)
    out, lse = torch.empty_like(c.q), torch.empty(c.q.shape[:2], device="cuda")
    args = list(shape_args(c))
    args[7] = 96  # head_dim
    rc = lib.exactly_cuda_flash_forward(ptr(c.q), ptr(c.k), ptr(c.v), *args, ptr(out), ptr(lse), None)
    msg = lib.exactly_last_error().decode()
    report.record("head_dim 96 is refused by name", rc == -1 and "head_dim 96" in msg, message=repr(msg))
    args = list(shape_args(c))
    args[5], args[6] = 4, 3  # heads not in whole KV groups
    rc = lib.exactly_cuda_flash_backward(ptr(c.q), ptr(c.k), ptr(c.v), ptr(out), ptr(c.d_out), ptr(lse), *args,
                                         ptr(out), ptr(c.k), ptr(c.v), ptr(out), 64, None)
    msg = lib.exactly_last_error().decode()
    report.record("heads not in whole KV groups are refused", rc == -1 and "4 query heads over 3 KV heads" in msg,
                  message=repr(msg))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="a few small cases (for compute-sanitizer)")
    ap.add_argument("--json", help="write every case's figures here")
    args = ap.parse_args()
    lib = load_library()
    torch.backends.cuda.matmul.allow_tf32 = False
    report, start = Report(), time.time()
    bf, fp = torch.bfloat16, torch.float16
    # Mixed lengths with Lq != Lk: a prefix before the queries (Lq < Lk), more
    # queries than keys (under the causal mask the first Lq - Lk see nothing),
    # a sequence without queries and one without keys.
    mixed_q, mixed_k = [1, 17, 300, 129, 64, 0, 3], [1, 40, 300, 100, 700, 5, 0]
    if args.small:
        flash_case(lib, report, "small mixed bf16 d128 gqa4 causal", mixed_q, mixed_k, 8, 2, 128, bf, True,
                   control=True)
        flash_case(lib, report, "small mixed fp16 d64 gqa8 non-causal", mixed_q, mixed_k, 8, 1, 64, fp, False)
    else:
        for dtype in (bf, fp):
            for d in (64, 128):
                for n_kv in (8, 2, 1):
                    for causal in (True, False):
                        kind = f"{str(dtype)[6:]} d{d} gqa{8 // n_kv} {'causal' if causal else 'non-causal'}"
                        for n in (1, 17, 128, 1000, 4096):
                            flash_case(lib, report, f"L={n} {kind}", [n], [n], 8, n_kv, d, dtype, causal, seed=n + d)
                        flash_case(lib, report, f"mixed {kind}", mixed_q, mixed_k, 8, n_kv, d, dtype, causal,
                                   seed=d + n_kv, control=dtype == bf and d == 128 and n_kv == 2 and causal)
    bad_arguments_case(lib, report)
    print(f"({time.time() - start:.1f} s)")
    sys.exit(report.finish("training FlashAttention checks", args.json))


if __name__ == "__main__":
    main()
