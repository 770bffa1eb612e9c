"""Exactness checks of the CUDA attention kernels on the GPU (run by
scripts/gpu-check). Each case compares the kernel with a float64 reference
computed by PyTorch on upcast inputs, and with PyTorch's own
scaled_dot_product_attention in the same 16-bit dtype against that same
reference: the kernel's max error must be at most twice SDPA's. Outputs are
poisoned with NaN before every run (NaN never passes, so an unwritten
element fails). The CPU engine's fp32 kernel, run on the same inputs, must
agree with the GPU within the same bound. KV store and block copy must be
bit-exact.

    python3 tests/cuda/check_attention.py [--small] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

from kernels_lib import (DTYPE_CODE, check, load_library, make_batch, ptr, run_cpu, run_decode,
                         run_prefill)

RESULTS: list[dict] = []


def reference(b, s, causal):
    """float64 attention of sequence s: [q_len, H, D]."""
    q = b.queries(s).double()
    k, v = (t.double() for t in b.keys(s))
    g = b.n_heads // b.n_kv
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    ql, ctx = q.shape[0], k.shape[0]
    prefix = ctx - ql
    out = torch.empty_like(q)
    rows = max(1, (1 << 28) // max(1, ctx * b.n_heads))
    for a in range(0, ql, rows):
        qc = q[a:a + rows]
        sc = torch.einsum("qhd,khd->hqk", qc, k) * b.head_dim ** -0.5
        if causal:
            pos = prefix + a + torch.arange(qc.shape[0], device=q.device)
            sc = sc.masked_fill(torch.arange(ctx, device=q.device)[None, None, :] > pos[None, :, None], float("-inf"))
        out[a:a + rows] = torch.einsum("hqk,khd->qhd", torch.softmax(sc, dim=-1), v)
    return out


def sdpa(b, s, causal):
    """PyTorch's SDPA in the inputs' dtype on the contiguous keys of sequence s."""
    q = b.queries(s).transpose(0, 1)[None]
    k, v = b.keys(s)
    g = b.n_heads // b.n_kv
    k = k.repeat_interleave(g, dim=1).transpose(0, 1)[None]
    v = v.repeat_interleave(g, dim=1).transpose(0, 1)[None]
    ql, ctx = q.shape[2], k.shape[2]
    if not causal:
        o = F.scaled_dot_product_attention(q, k, v)
    elif causal and ql == ctx:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        pos = ctx - ql + torch.arange(ql, device=q.device)
        mask = torch.arange(ctx, device=q.device)[None, :] <= pos[:, None]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return o[0].transpose(0, 1)


def record(name, ok, **fields):
    RESULTS.append({"case": name, "ok": bool(ok), **fields})
    detail = " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items())
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)


def attention_case(lib, name, q_lens, ctx_lens, n_heads, n_kv, d, dtype, causal=True, block_size=16,
                   decode=False, cpu=False, seed=0):
    b = make_batch(q_lens, ctx_lens, n_heads, n_kv, d, dtype, block_size=block_size, seed=seed)
    out = torch.full_like(b.q, float("nan"))
    (run_decode(lib, b, out=out) if decode else run_prefill(lib, b, causal=causal, out=out))
    torch.cuda.synchronize()
    written = bool(torch.isfinite(out).all())
    # Max error is dominated by the final rounding to 16 bits, which both share;
    # the RMS error also sees what happens before it (the softmax, P in 16 bits).
    kernel, base, kernel_sq, base_sq, count = 0.0, 0.0, 0.0, 0.0, 0
    for s in range(len(q_lens)):
        ref = reference(b, s, causal)
        mine, theirs = b_rows(out, b, s).double() - ref, sdpa(b, s, causal).double() - ref
        kernel, base = max(kernel, mine.abs().max().item()), max(base, theirs.abs().max().item())
        kernel_sq += mine.square().sum().item()
        base_sq += theirs.square().sum().item()
        count += ref.numel()
    kernel_rms, base_rms = (kernel_sq / count) ** 0.5, (base_sq / count) ** 0.5
    bound = 2 * base + 1e-6
    ok = written and kernel <= bound and kernel_rms <= 2 * base_rms + 1e-9
    fields = dict(kernel_err=kernel, sdpa_err=base, kernel_rms=kernel_rms, sdpa_rms=base_rms, written=written)
    if cpu:
        cpu_out = run_cpu(lib, b, causal=causal).to(out.device)
        cpu_diff = (out.double() - cpu_out.double()).abs().max().item()
        fields["cpu_diff"] = cpu_diff
        ok = ok and cpu_diff <= bound
    record(name, ok, **fields)


def b_rows(out, b, s):
    a, e = int(b.query_start[s]), int(b.query_start[s + 1])
    return out[a:e]


def kv_store_case(lib, dtype):
    g = torch.Generator(device="cpu").manual_seed(5)
    num_blocks, bs, n_kv, d, n_tok = 40, 16, 4, 128, 300
    kc = torch.randn((num_blocks, bs, n_kv, d), generator=g).to(dtype).cuda()
    vc = torch.randn((num_blocks, bs, n_kv, d), generator=g).to(dtype).cuda()
    k = torch.randn((n_tok, n_kv, d), generator=g).to(dtype).cuda()
    v = torch.randn((n_tok, n_kv, d), generator=g).to(dtype).cuda()
    slots = torch.randperm(num_blocks * bs, generator=g)[:n_tok]
    slots[::7] = -1  # padding tokens are skipped
    slots = slots.cuda()
    ek, ev = kc.clone().view(-1, n_kv, d), vc.clone().view(-1, n_kv, d)
    keep = slots >= 0
    ek[slots[keep]] = k[keep]
    ev[slots[keep]] = v[keep]
    check(lib, lib.exactly_cuda_kv_store(ptr(kc), ptr(vc), num_blocks, bs, n_kv, d, DTYPE_CODE[dtype], ptr(k),
                                         ptr(v), ptr(slots), n_tok, None))
    torch.cuda.synchronize()
    ok = torch.equal(kc.view(-1, n_kv, d).view(torch.int16), ek.view(torch.int16)) and \
        torch.equal(vc.view(-1, n_kv, d).view(torch.int16), ev.view(torch.int16))
    record(f"kv_store {dtype}", ok)


def copy_blocks_case(lib, dtype):
    g = torch.Generator(device="cpu").manual_seed(6)
    layers, num_blocks, bs, n_kv, d = 3, 64, 32, 2, 64
    ks = [torch.randn((num_blocks, bs, n_kv, d), generator=g).to(dtype).cuda() for _ in range(layers)]
    vs = [torch.randn((num_blocks, bs, n_kv, d), generator=g).to(dtype).cuda() for _ in range(layers)]
    perm = torch.randperm(num_blocks, generator=g)
    pairs = torch.stack([perm[:10], perm[10:20]], dim=1).contiguous()  # distinct sources and targets
    ek, ev = [t.clone() for t in ks], [t.clone() for t in vs]
    for t in ek + ev:
        t[pairs[:, 1]] = t[pairs[:, 0]]
    kp = torch.tensor([t.data_ptr() for t in ks], dtype=torch.int64).cuda()
    vp = torch.tensor([t.data_ptr() for t in vs], dtype=torch.int64).cuda()
    dev_pairs = pairs.cuda()
    check(lib, lib.exactly_cuda_copy_blocks(ptr(kp), ptr(vp), layers, ptr(dev_pairs), pairs.shape[0], bs, n_kv, d,
                                            DTYPE_CODE[dtype], None))
    torch.cuda.synchronize()
    ok = all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(ks + vs, ek + ev))
    record(f"copy_blocks {dtype}", ok)


def bad_arguments_case(lib):
    b = make_batch([4], [4], 4, 4, 64, torch.bfloat16)
    out = torch.empty_like(b.q)
    rc = lib.exactly_cuda_prefill(ptr(b.k_cache), ptr(b.v_cache), b.k_cache.shape[0], 8, 4, 64, 0, 1,
                                  ptr(b.query_start), ptr(b.seq_lens), ptr(b.block_tables), 1, 4, 4, ptr(b.q), 4, 4,
                                  0.125, 1, ptr(out), None)
    msg = lib.exactly_last_error().decode()
    record("bad block size is refused by name", rc == -1 and "block_size 8" in msg, message=msg)
    rc = lib.exactly_cuda_prefill(ptr(b.k_cache), ptr(b.v_cache), b.k_cache.shape[0], 16, 4, 96, 0, 1,
                                  ptr(b.query_start), ptr(b.seq_lens), ptr(b.block_tables), 1, 4, 4, ptr(b.q), 4, 4,
                                  0.125, 1, ptr(out), None)
    msg = lib.exactly_last_error().decode()
    record("bad head_dim is refused by name", rc == -1 and "head_dim 96" in msg, message=msg)
    rc = lib.exactly_cuda_prefill(ptr(b.k_cache), ptr(b.v_cache), b.k_cache.shape[0], 16, 4, 64, 0, 1,
                                  ptr(b.query_start), ptr(b.seq_lens), ptr(b.block_tables), 1, 4, 4, ptr(b.q), 0, 4,
                                  0.125, 1, ptr(out), None)
    msg = lib.exactly_last_error().decode()
    record("q without its row count is refused by name", rc == -1 and "q_rows 0" in msg, message=msg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="a few small cases (for compute-sanitizer)")
    ap.add_argument("--json", help="write every case's figures here")
    args = ap.parse_args()
    lib = load_library()
    torch.backends.cuda.matmul.allow_tf32 = False
    start = time.time()
    bf, fp = torch.bfloat16, torch.float16
    if args.small:
        attention_case(lib, "small prefill mixed", [1, 17, 40], [1, 17, 100], 8, 2, 128, bf)
        attention_case(lib, "small prefill mixed d64", [1, 17, 40], [1, 17, 100], 9, 3, 64, bf)
        # More query blocks than the GPU has SMs: persistent CTAs run several
        # items each, passing them through the shared-memory ring.
        attention_case(lib, "small prefill many items", [1, 300, 129], [1, 300, 200], 32, 8, 128, bf)
        attention_case(lib, "small prefill many items d64", [1, 300, 129], [1, 300, 200], 32, 8, 64, bf)
        attention_case(lib, "small prefill many items non-causal", [1, 300, 129], [1, 300, 200], 32, 8, 128, bf,
                       causal=False)
        # A context past 4096 keys runs in clusters of two at head dim 128,
        # causal or not; a short row beside it leaves CTAs without rows.
        attention_case(lib, "small prefill clusters", [300, 129, 1], [4500, 129, 10], 8, 2, 128, bf)
        attention_case(lib, "small prefill clusters non-causal", [300, 129, 1], [4500, 129, 10], 8, 2, 128, bf,
                       causal=False)
        # Without a mask the Hopper kernel splits the items left for a last
        # round over their keys and merges the pieces: 2 x 16 heads x 9 query
        # blocks are 288 items for 132 SMs (24 left, two pieces each; the
        # short row's 3 tiles as 1 + 2); at d 64 (192-row blocks) 2 x 12 heads
        # x 6 blocks are 144 items (12 left, two pieces each).
        attention_case(lib, "small prefill non-causal, last round split", [1100, 40], [1100, 300], 16, 4, 128, bf,
                       causal=False)
        attention_case(lib, "small prefill non-causal, last round split d64", [1100, 40], [1100, 300], 12, 4, 64, bf,
                       causal=False)
        attention_case(lib, "small decode", [1, 1, 1], [1, 600, 1100], 8, 2, 64, fp, decode=True)
        kv_store_case(lib, bf)
        copy_blocks_case(lib, bf)
    else:
        for d in (64, 128):
            for n in (1, 17, 113, 1023, 4097, 16384):
                attention_case(lib, f"prefill L={n} bf16 d{d} gqa4 causal", [n], [n], 8, 2, d, bf)
        # Non-causal at head dim 128 (past 4096 keys, in clusters of two).
        for n in (1, 17, 113, 1023, 4097, 16384):
            attention_case(lib, f"prefill L={n} bf16 d128 gqa4 non-causal", [n], [n], 8, 2, 128, bf, causal=False)
        attention_case(lib, "prefill mixed non-causal bf16 d128 gqa8", [1, 17, 1023, 113, 300, 129],
                       [1, 17, 1023, 113, 400, 2000], 8, 1, 128, bf, causal=False, seed=7)
        # The last round's items split over their keys (no mask), in clusters
        # (4097 keys): 272 items for 66 clusters leave 8, each in 8 pieces;
        # the last ones belong to a 300-key row of 3 tiles, so 5 of their
        # pieces are empty. At d 64 (192-row blocks: 2 x 10 heads x 22 blocks,
        # 132 SMs) 44 items are left, in three pieces.
        attention_case(lib, "prefill non-causal, last round split, pieces of a short row empty", [4097, 200],
                       [4097, 300], 8, 2, 128, bf, causal=False, seed=11)
        attention_case(lib, "prefill non-causal, last round split d64", [4097, 200], [4097, 300], 10, 2, 64, bf,
                       causal=False, seed=12)
        for d in (64, 128):
            for dtype in (bf, fp):
                for n_heads, n_kv in ((8, 8), (8, 2), (8, 1)):
                    attention_case(lib, f"prefill mixed {dtype} d{d} gqa{n_heads // n_kv}",
                                   [1, 17, 1023, 113, 300], [1, 17, 1023, 113, 300], n_heads, n_kv, d, dtype,
                                   seed=d + n_kv)
        for d in (64, 128):
            for causal in (True, False):
                attention_case(lib, f"prefill batch causal={causal} bf16 d{d}", [113, 1023, 4097], [113, 1023, 4097],
                               8, 2, d, bf, causal=causal)
            for bs in (16, 32, 64):
                attention_case(lib, f"prefix+chunk bs={bs} bf16 d{d}", [300, 1, 64, 17, 129],
                               [1500, 4097, 764, 50, 129], 8, 2, d, bf, block_size=bs, seed=bs)
        attention_case(lib, "prefix+chunk fp16 d64 gqa8", [77, 5, 1], [1000, 2000, 3], 16, 2, 64, fp)
        attention_case(lib, "prefix+chunk non-causal", [77, 5], [1000, 2000], 8, 2, 128, bf, causal=False)
        decode_lens = [1, 17, 511, 512, 513, 2048, 8192]
        for d in (64, 128):
            for dtype in (bf, fp):
                for n_heads, n_kv in ((32, 8), (8, 8), (16, 2), (64, 2)):
                    attention_case(lib, f"decode {dtype} d{d} {n_heads}/{n_kv} heads", [1] * len(decode_lens),
                                   decode_lens, n_heads, n_kv, d, dtype, decode=True, seed=n_heads + d)
        attention_case(lib, "decode 128k bf16 d128 32/8", [1], [131072], 32, 8, 128, bf, decode=True)
        # A long row (its merge split over groups) beside rows with fewer
        # partitions than groups and with a single partition; enough work
        # for the batch to take 1024-key partitions, so the long row has 79.
        attention_case(lib, "decode 80k + short rows, merge in groups", [1, 1, 1, 1], [80000, 5000, 700, 3], 32, 8,
                       128, bf, decode=True)
        attention_case(lib, "decode bs=32 bf16", [1, 1, 1], [100, 1000, 5000], 32, 8, 128, bf, block_size=32,
                       decode=True)
        attention_case(lib, "GPU vs CPU engine: prefill mixed", [1, 17, 300, 64], [1, 17, 300, 700], 8, 2, 128, bf,
                       cpu=True)
        attention_case(lib, "GPU vs CPU engine: prefill non-causal", [33, 64], [33, 64], 8, 8, 64, fp, causal=False,
                       cpu=True)
        attention_case(lib, "GPU vs CPU engine: prefill non-causal bf16 d128", [33, 300, 129], [33, 300, 500], 8, 2,
                       128, bf, causal=False, cpu=True)
        attention_case(lib, "GPU vs CPU engine: prefill 9/3 heads d64 (the default model's)", [1, 17, 300, 64],
                       [1, 17, 300, 700], 9, 3, 64, bf, cpu=True)
        attention_case(lib, "GPU vs CPU engine: decode", [1] * 5, [1, 100, 513, 1500, 3000], 32, 8, 128, bf,
                       decode=True, cpu=True)
        for dtype in (bf, fp):
            kv_store_case(lib, dtype)
            copy_blocks_case(lib, dtype)
        bad_arguments_case(lib)
    failed = [r for r in RESULTS if not r["ok"]]
    print(f"\n{len(RESULTS) - len(failed)}/{len(RESULTS)} CUDA kernel checks passed in {time.time() - start:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(RESULTS, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
