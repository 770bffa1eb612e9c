"""Exactness checks of the CUDA model's layer operations on the GPU (run by
scripts/gpu-check), against float64 references computed by PyTorch:

- products (the few-row streaming kernel, cuBLASLt, cuBLASLt in deterministic
  mode; bf16 and fp32 outputs, fp32 accumulated into the output): bf16
  outputs' max error at most twice PyTorch's own bf16 product's against the
  same reference (plus 2^-20 of the output's scale); fp32 outputs within the
  CPU kernels' bound for fp32 accumulation, (k/8 + 3) 2^-24 sum|x w| per
  element (Hopper's tensor cores accumulate less precisely than a sequential
  fp32 sum: cuBLASLt's error is 10-20x PyTorch's fp32 product, which runs
  without tensor cores); and batch invariance where it is promised — a
  row's bits equal with 1 or 8 rows on the streaming path, with 1, 8, 64 or
  256 rows on the deterministic path, and in the canonical order at 19 row
  counts from 1 to 8,192 for every product of Llama-3-8B and SmolLM2 (each
  also against float64 within the fp32 accumulation bound);
- RMSNorm (also through a row gather), SwiGLU: within one bf16 rounding of
  the float64 value (2^-8 relative) plus the fp32 arithmetic's share;
- RoPE + KV store in both layouts (adjacent pairs, half split), with and
  without biases, rotating only the leading dims: q, k within a bf16
  rounding, v bit-exact without bias, nothing written for a negative slot;
- argmax: the lowest index among equal maxima, as the host's scan.

With --bench, also times the decode-shaped products of a Llama-3-8B layer
(streaming kernel vs cuBLASLt, 1-8 rows; weights rotated through more memory
than L2 holds) and the small operations, and prints achieved GB/s.

    python3 tests/cuda/check_layer_ops.py [--json FILE] [--bench]
"""

from __future__ import annotations

import argparse
import ctypes
import math
import sys

import torch

from check_report import Report
from kernels_lib import load_library, ptr

REPORT = Report()
record = REPORT.record
TIMINGS: list[dict] = []


def bind(lib):
    c_int, c_i64, c_f, c_p = ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
    lib.exactly_cuda_gemm.argtypes = [c_p, c_p, c_p, c_i64, c_i64, c_i64, c_int, c_int, c_int, c_p]
    lib.exactly_cuda_gemv.argtypes = [c_p, c_p, c_p, c_i64, c_i64, c_i64, c_int, c_int, c_p]
    lib.exactly_cuda_rmsnorm.argtypes = [c_p, c_p, c_p, c_i64, c_int, c_f, c_p, c_p]
    lib.exactly_cuda_rope_store.argtypes = [c_p, c_p, c_p, c_p, c_i64, c_int, c_int, c_int, c_int, c_f, c_int, c_p,
                                            c_p, c_p, c_i64, c_int, c_p, c_p]
    lib.exactly_cuda_rope_angles.argtypes = [c_p, c_i64, c_int, c_f, c_p, c_f, c_p, c_p]
    lib.exactly_cuda_swiglu.argtypes = [c_p, c_i64, c_int, c_p, c_p]
    lib.exactly_cuda_geglu.argtypes = [c_p, c_i64, c_int, c_p, c_p]
    lib.exactly_cuda_add_rmsnorm.argtypes = [c_p, c_p, c_i64, c_int, c_f, c_p, c_p]
    lib.exactly_cuda_argmax.argtypes = [c_p, c_i64, c_int, c_p, c_p]


def call(lib, name, *args):
    if getattr(lib, name)(*args) != 0:
        raise RuntimeError(f"{name}: {lib.exactly_last_error().decode()}")
    torch.cuda.synchronize()


def gemm(lib, x, w, out, accumulate=False, path=0):
    n, k = x.shape
    m = w.shape[0]
    call(lib, "exactly_cuda_gemm", ptr(x), ptr(w), ptr(out), n, m, k, int(out.dtype == torch.float32),
         int(accumulate), path, None)


def check_gemm(lib):
    torch.backends.cuda.matmul.allow_tf32 = False
    shapes = [(1, 4096, 4096), (3, 1000, 576), (8, 6144, 4096), (9, 512, 1536), (32, 4096, 14336),
              (128, 1024, 4096), (5, 49152, 576)]
    for n, m, k in shapes:
        x = torch.randn(n, k, device="cuda").bfloat16()
        w = (torch.randn(m, k, device="cuda") / math.sqrt(k)).bfloat16()
        ref = x.double() @ w.double().T
        scale = ref.abs().max().item()
        torch_err = (torch.matmul(x, w.T).double() - ref).abs().max().item()
        for path in (0, 1, 2):
            out = torch.full((n, m), float("nan"), device="cuda", dtype=torch.bfloat16)
            gemm(lib, x, w, out, path=path)
            err = (out.double() - ref).abs().max().item()
            ok = bool(torch.isfinite(out).all()) and err <= 2 * torch_err + scale * 2**-20
            record(f"gemm bf16 {n}x{m}x{k} path {path}", ok, max_err=f"{err:.3e}", torch_err=f"{torch_err:.3e}")
            init = torch.randn(n, m, device="cuda")
            acc = init.clone()
            gemm(lib, x, w, acc, accumulate=True, path=path)
            ref_acc = ref + init.double()
            bound = (k / 8 + 3) * 2**-24 * (x.double().abs() @ w.double().abs().T) + 2**-24 * ref_acc.abs()
            excess = ((acc.double() - ref_acc).abs() - bound).max().item()
            err = (acc.double() - ref_acc).abs().max().item()
            ok = bool(torch.isfinite(acc).all()) and excess <= 0
            record(f"gemm f32 += {n}x{m}x{k} path {path}", ok, max_err=f"{err:.3e}",
                   bound_at_worst=f"{(bound.max().item()):.3e}")


def check_gemm_invariance(lib):
    m, k = 2048, 4096
    w = (torch.randn(m, k, device="cuda") / math.sqrt(k)).bfloat16()
    x = torch.randn(256, k, device="cuda").bfloat16()
    for path, sizes in ((0, (1, 3, 8)), (2, (1, 8, 64, 256))):
        outs = {}
        for n in sizes:
            out = torch.empty(n, m, device="cuda", dtype=torch.float32)
            gemm(lib, x[:n].contiguous(), w, out, path=path)
            outs[n] = out
        same = all(torch.equal(outs[n][:1], outs[sizes[0]][:1]) for n in sizes)
        record(f"gemm row 0 bit-identical with {sizes} rows (path {path})", same)



# Every product of a layer and the head, (output rows, k), for both models.
MODEL_SHAPES = {
    "llama-3-8b": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
                   "head": (128256, 4096)},
    "smollm2-135m": {"qkv": (960, 576), "o": (576, 576), "gate_up": (3072, 576), "down": (576, 1536),
                     "head": (49152, 576)},
}
ROW_COUNTS = (1, 2, 3, 5, 8, 13, 31, 63, 64, 65, 100, 127, 128, 129, 257, 1000, 2049, 4095, 8192)


def check_gemm_canonical_rows(lib):
    """The canonical order (path 2): each row's bits are the same whether the
    product has 1 or 8,192 rows (every row of each count compared against the
    same row in the 8,192-row product), for every product of both models, and
    the 8,192-row product's first and last 32 rows are within the fp32
    accumulation bound of a float64 product."""
    most = max(ROW_COUNTS)
    for model, shapes in MODEL_SHAPES.items():
        for name, (m, k) in shapes.items():
            w = (torch.randn(m, k, device="cuda") / math.sqrt(k)).bfloat16()
            x = torch.randn(most, k, device="cuda").bfloat16()
            full = torch.empty(most, m, device="cuda", dtype=torch.float32)
            gemm(lib, x, w, full, path=2)
            differing = []
            for n in ROW_COUNTS[:-1]:
                out = torch.full((n, m), float("nan"), device="cuda", dtype=torch.float32)
                gemm(lib, x[:n].contiguous(), w, out, path=2)
                if not torch.equal(out, full[:n]):
                    differing.append(n)
            record(f"canonical {model} {name} {m}x{k}: rows bit-identical at {len(ROW_COUNTS)} row counts",
                   not differing, differing_counts=differing or None)
            rows = torch.cat([torch.arange(32), torch.arange(most - 32, most)]).cuda()
            xs, got = x[rows].double(), full[rows].double()
            ref = xs @ w.double().T
            bound = (k / 8 + 3) * 2**-24 * (xs.abs() @ w.double().abs().T)
            excess = ((got - ref).abs() - bound).max().item()
            record(f"canonical {model} {name}: within the fp32 accumulation bound of float64", excess <= 0,
                   max_err=f"{(got - ref).abs().max().item():.3e}")
            del w, x, full


def check_rmsnorm(lib):
    for n, dim in ((1, 576), (7, 4096), (64, 4096)):
        x = torch.randn(n, dim, device="cuda") * 3
        wt = torch.rand(dim, device="cuda") + 0.5
        eps = 1e-5
        ref = x.double() / torch.sqrt((x.double() ** 2).mean(1, keepdim=True) + eps) * wt.double()
        out = torch.full((n, dim), float("nan"), device="cuda", dtype=torch.bfloat16)
        call(lib, "exactly_cuda_rmsnorm", ptr(x), ptr(wt), None, n, dim, eps, ptr(out), None)
        rel = ((out.double() - ref).abs() / ref.abs().clamp_min(1e-30)).max().item()
        record(f"rmsnorm {n}x{dim}", rel <= 2**-8 + 1e-5, max_rel=f"{rel:.2e}")
    rows = torch.tensor([5, 0, 3], device="cuda", dtype=torch.int32)
    out = torch.full((3, 4096), float("nan"), device="cuda", dtype=torch.bfloat16)
    call(lib, "exactly_cuda_rmsnorm", ptr(x), ptr(wt), ptr(rows), 3, 4096, eps, ptr(out), None)
    full = torch.empty(64, 4096, device="cuda", dtype=torch.bfloat16)
    call(lib, "exactly_cuda_rmsnorm", ptr(x), ptr(wt), None, 64, 4096, eps, ptr(full), None)
    record("rmsnorm gathered rows == same rows of the full pass", torch.equal(out, full[rows.long()]))


def rope_reference(x, pos, rope_dims, base, layout):
    """x: [n, heads, hd] float64; rotate the leading rope_dims of each head."""
    out = x.clone()
    half = rope_dims // 2
    i = torch.arange(half, device=x.device, dtype=torch.float64)
    theta = pos.double()[:, None] * base ** (-2 * i / rope_dims)  # [n, half]
    c, s = torch.cos(theta)[:, None, :], torch.sin(theta)[:, None, :]
    if layout == 0:
        a, b = x[..., 0:rope_dims:2], x[..., 1:rope_dims:2]
        out[..., 0:rope_dims:2], out[..., 1:rope_dims:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., :half], x[..., half:rope_dims]
        out[..., :half], out[..., half:rope_dims] = a * c - b * s, a * s + b * c
    return out


def check_rope(lib):
    for layout in (0, 1):
        for bias_on in (False, True):
            for hd, rope_dims in ((64, 64), (128, 128), (128, 64)):
                n, nh, nkv, bs, nb = 37, 8, 2, 16, 16
                base = 500000.0
                width = (nh + 2 * nkv) * hd
                qkv = torch.randn(n, width, device="cuda").bfloat16()
                bias = torch.randn(width, device="cuda") if bias_on else None
                pos = torch.randint(0, 8000, (n,), device="cuda", dtype=torch.int32)
                slots = torch.randperm(nb * bs, device="cuda")[:n].long()
                slots[3] = -1
                kc = torch.full((nb, bs, nkv, hd), 7.0, device="cuda", dtype=torch.bfloat16)
                vc = kc.clone()
                q = torch.full((n, nh, hd), float("nan"), device="cuda", dtype=torch.bfloat16)
                call(lib, "exactly_cuda_rope_store", ptr(qkv), ptr(bias) if bias_on else None, ptr(pos), ptr(slots),
                     n, nh, nkv, hd, rope_dims, base, layout, ptr(q), ptr(kc), ptr(vc), nb, bs, None, None)
                # The engine's path: the angles from a table made once a pass.
                # Its outputs must be the kernel's own, bit for bit.
                angles = torch.full((n, rope_dims // 2, 2), float("nan"), device="cuda")
                call(lib, "exactly_cuda_rope_angles", ptr(pos), n, rope_dims, base, None, 1.0, ptr(angles), None)
                q2, kc2, vc2 = torch.full_like(q, float("nan")), torch.full_like(kc, 7.0), torch.full_like(vc, 7.0)
                call(lib, "exactly_cuda_rope_store", ptr(qkv), ptr(bias) if bias_on else None, ptr(pos), ptr(slots),
                     n, nh, nkv, hd, rope_dims, base, layout, ptr(q2), ptr(kc2), ptr(vc2), nb, bs, ptr(angles), None)
                same = (torch.equal(q.view(torch.int16), q2.view(torch.int16)) and torch.equal(kc, kc2)
                        and torch.equal(vc, vc2))
                record(f"rope+store with the angle table == without, layout {layout} bias {int(bias_on)} hd {hd} "
                       f"rope_dims {rope_dims}", same)
                x = qkv.double() + (bias.double() if bias_on else 0)
                qr = rope_reference(x[:, :nh * hd].view(n, nh, hd), pos, rope_dims, base, layout)
                kr = rope_reference(x[:, nh * hd:(nh + nkv) * hd].view(n, nkv, hd), pos, rope_dims, base, layout)
                vr = x[:, (nh + nkv) * hd:].view(n, nkv, hd)
                live = slots >= 0
                kflat, vflat = kc.view(nb * bs, nkv, hd), vc.view(nb * bs, nkv, hd)
                tol = lambda ref: 2**-8 * ref.abs() + 1e-5 * ref.abs().max()  # noqa: E731
                q_ok = bool(((q.double() - qr).abs() <= tol(qr)).all())
                k_ok = bool(((kflat[slots[live]].double() - kr[live]).abs() <= tol(kr[live])).all())
                if bias_on:
                    v_ok = bool(((vflat[slots[live]].double() - vr[live]).abs() <= tol(vr[live])).all())
                else:
                    v_ok = torch.equal(vflat[slots[live]], qkv[live][:, (nh + nkv) * hd:].view(-1, nkv, hd))
                untouched = torch.ones(nb * bs, dtype=torch.bool, device="cuda")
                untouched[slots[live]] = False
                rest_ok = bool((kflat[untouched] == 7).all() and (vflat[untouched] == 7).all())
                record(f"rope+store layout {layout} bias {int(bias_on)} hd {hd} rope_dims {rope_dims}",
                       q_ok and k_ok and v_ok and rest_ok, q=q_ok, k=k_ok, v=v_ok, other_slots_untouched=rest_ok)


def check_scaled_rope_angles(lib):
    """A scaled RoPE's angles (model/rope_scaling.h): each pair's frequency over
    its divisor in float64, cosine and sine rounded to fp32, then times the
    magnitude in fp32, as the CPU computes them. Against PyTorch in float64 with
    the same roundings: equal but where the two libraries' float64 sines
    round across an fp32 boundary (one fp32 ulp at most)."""
    n, rope_dims, base = 61, 128, 500000.0
    pos = torch.randint(0, 131072, (n,), device="cuda", dtype=torch.int32)
    for divisors_on, magnitude in ((True, 1.0), (False, 1.2079), (True, 1.2079)):
        divisors = (torch.rand(rope_dims // 2, device="cuda") * 31 + 1) if divisors_on else None
        angles = torch.full((n, rope_dims // 2, 2), float("nan"), device="cuda")
        call(lib, "exactly_cuda_rope_angles", ptr(pos), n, rope_dims, base, ptr(divisors) if divisors_on else None,
             magnitude, ptr(angles), None)
        i = torch.arange(rope_dims // 2, dtype=torch.float64)
        freq = base ** (-2.0 * i / rope_dims)
        if divisors_on:
            freq = freq / divisors.cpu().double()
        theta = pos.cpu().double()[:, None] * freq[None, :]
        m = torch.tensor(magnitude, dtype=torch.float32)
        want = torch.stack([theta.cos().float() * m, theta.sin().float() * m], dim=-1)
        got = angles.cpu()
        ulps = (got.view(torch.int32).long() - want.view(torch.int32).long()).abs()
        record(f"scaled rope angles, divisors {int(divisors_on)} magnitude {magnitude}: within one fp32 ulp of float64",
               bool(ulps.max() <= 1), max_ulps=int(ulps.max()), differing=int((ulps > 0).sum()))
    # The control: the same table without the divisors must differ.
    plain = torch.empty((n, rope_dims // 2, 2), device="cuda")
    call(lib, "exactly_cuda_rope_angles", ptr(pos), n, rope_dims, base, None, 1.0, ptr(plain), None)
    record("scaled rope angles control: the unscaled table differs", not torch.equal(plain, angles))


def check_swiglu(lib):
    # 16-byte accesses (ffn a multiple of 8), one element at a time (not),
    # and more tokens than one launch's rows of blocks (the loop over tokens).
    # The output is poisoned with NaN first, so a missed element fails.
    for n, ffn in ((33, 14336), (33, 1003), (70001, 64)):
        gu = (torch.randn(n, 2 * ffn, device="cuda") * 3).bfloat16()
        out = torch.full((n, ffn), float("nan"), device="cuda", dtype=torch.bfloat16)
        call(lib, "exactly_cuda_swiglu", ptr(gu), n, ffn, ptr(out), None)
        g, u = gu[:, :ffn].double(), gu[:, ffn:].double()
        ref = g / (1 + torch.exp(-g)) * u
        excess = (out.double() - ref).abs() - (2**-8 * ref.abs() + 1e-6)
        err = excess.max().item()
        record(f"swiglu {n} x {ffn}", bool((excess <= 0).all()), worst_excess=f"{err:.2e}")


def check_geglu(lib):
    """GELU's tanh form times up (Gemma 3's gate), within one bf16 rounding of float64."""
    for n, ffn in ((33, 10240), (5, 1003)):
        gu = (torch.randn(n, 2 * ffn, device="cuda") * 3).bfloat16()
        out = torch.full((n, ffn), float("nan"), device="cuda", dtype=torch.bfloat16)
        call(lib, "exactly_cuda_geglu", ptr(gu), n, ffn, ptr(out), None)
        g, u = gu[:, :ffn].double(), gu[:, ffn:].double()
        ref = 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3))) * u
        excess = (out.double() - ref).abs() - (2**-8 * ref.abs() + 1e-6)
        record(f"geglu {n} x {ffn}", bool((excess <= 0).all()), worst_excess=f"{excess.max().item():.2e}")
        silu = torch.full_like(out, float("nan"))
        call(lib, "exactly_cuda_swiglu", ptr(gu), n, ffn, ptr(silu), None)
        record(f"geglu {n} x {ffn} control: SwiGLU's output differs", not torch.equal(silu, out))


def check_add_rmsnorm(lib):
    """x += rmsnorm(y) * w in fp32 (the sandwich norms' add): within fp32's bound of float64, and a row's bits
    the same in a pass of one row as among others."""
    for n, dim in ((1, 576), (64, 2560), (3, 1001)):
        y = torch.randn(n, dim, device="cuda") * 3
        x0 = torch.randn(n, dim, device="cuda")
        wt = torch.rand(dim, device="cuda") + 0.5
        eps = 1e-6
        x = x0.clone()
        call(lib, "exactly_cuda_add_rmsnorm", ptr(y), ptr(wt), n, dim, eps, ptr(x), None)
        normed = y.double() / torch.sqrt((y.double() ** 2).mean(1, keepdim=True) + eps) * wt.double()
        ref = x0.double() + normed
        # fp32: the sum of squares within dim u (u = 2^-24), halved by the root; rsqrt, the two products and
        # the add a few u more.
        bound = (dim * 2**-25 + 2**-21) * normed.abs() + 2**-23 * ref.abs() + 1e-30
        record(f"add_rmsnorm {n}x{dim}", bool(((x.double() - ref).abs() <= bound).all()),
               max_abs=f"{(x.double() - ref).abs().max().item():.2e}")
        one = x0[-1:].clone()
        call(lib, "exactly_cuda_add_rmsnorm", ptr(y[-1:].contiguous()), ptr(wt), 1, dim, eps, ptr(one), None)
        record(f"add_rmsnorm {n}x{dim}: the last row alone has the same bits", torch.equal(one, x[-1:]))


def check_argmax(lib):
    rows, vocab = 64, 128256
    logits = torch.randn(rows, vocab, device="cuda")
    for r in range(0, rows, 4):  # plant ties: the lower index must win
        a, b = sorted(torch.randint(0, vocab, (2,)).tolist())
        logits[r, a] = logits[r, b] = 100.0
    logits[1] = float("-inf")
    out = torch.full((rows,), -1, device="cuda", dtype=torch.int32)
    call(lib, "exactly_cuda_argmax", ptr(logits), rows, vocab, ptr(out), None)
    ref = torch.tensor(logits.cpu().numpy().argmax(1), dtype=torch.int32)  # numpy: first index of the max
    record("argmax (ties to the lowest index)", torch.equal(out.cpu(), ref))


def timed(fn, reps=30) -> float:
    """Median seconds of fn() over reps, after a warm-up."""
    fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return sorted(times)[len(times) // 2]


def bench(lib):
    shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
              "lm_head": (128256, 4096)}
    print("product      rows   streaming us (GB/s)   cuBLASLt us (GB/s)")
    for name, (m, k) in shapes.items():
        copies = max(1, (512 << 20) // (m * k * 2))  # rotate through > L2
        ws = [torch.randn(m, k, device="cuda").bfloat16() for _ in range(copies)]
        for n in (1, 2, 4, 8):
            x = torch.randn(n, k, device="cuda").bfloat16()
            out = torch.empty(n, m, device="cuda", dtype=torch.bfloat16)
            row = []
            for variant in ("streaming", "cublaslt"):
                i = [0]

                def run():
                    i[0] = (i[0] + 1) % copies
                    if variant == "cublaslt":
                        lib.exactly_cuda_gemm(ptr(x), ptr(ws[i[0]]), ptr(out), n, m, k, 0, 0, 1, None)
                    else:
                        lib.exactly_cuda_gemv(ptr(x), ptr(ws[i[0]]), ptr(out), n, m, k, 0, 0, None)
                t = timed(run)
                row.append(f"{t * 1e6:9.1f} ({m * k * 2 / t / 1e9:6.0f})")
            print(f"{name:10s} {n:5d}   {row[0]}      {row[1]}", flush=True)
            TIMINGS.append({"bench": name, "rows": n, "streaming_us_gbs": row[0], "cublaslt_us_gbs": row[1]})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--bench", action="store_true")
    checks = {"gemm": check_gemm, "gemm-invariance": check_gemm_invariance,
              "gemm-canonical-rows": check_gemm_canonical_rows, "rmsnorm": check_rmsnorm,
              "rope": check_rope, "scaled-rope": check_scaled_rope_angles, "swiglu": check_swiglu,
              "geglu": check_geglu, "add-rmsnorm": check_add_rmsnorm, "argmax": check_argmax}
    ap.add_argument("--only", help="comma-separated checks to run (for compute-sanitizer): " + ",".join(checks))
    a = ap.parse_args()
    chosen = a.only.split(",") if a.only else list(checks)
    unknown = [c for c in chosen if c not in checks]
    if unknown:
        ap.error(f"unknown checks {unknown}; known: {', '.join(checks)}")
    torch.manual_seed(0)
    lib = load_library()
    bind(lib)
    for name in chosen:
        checks[name](lib)
    if a.bench:
        bench(lib)
    return REPORT.finish("layer-op checks", a.json, TIMINGS)


if __name__ == "__main__":
    sys.exit(main())
