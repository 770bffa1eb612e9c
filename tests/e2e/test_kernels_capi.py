"""The kernels' C interface (src/kernels/capi), which the GPU checks drive
from PyTorch: here its CPU half against a float64 numpy attention over a
paged cache with a shuffled block table, and its error path. Whether the
library was built with CUDA is reported, not assumed (CI compiles the CUDA
kernels but has no GPU to run them; scripts/gpu-check does that)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lib():
    build = Path(os.environ.get("EXACTLY_BUILD_DIR", REPO_ROOT / "build"))
    path = build / "src" / "kernels" / "capi" / "libexactly_kernels_capi.so"
    if not path.exists():
        pytest.fail(f"{path} not built")
    lib = ctypes.CDLL(str(path))
    lib.exactly_last_error.restype = ctypes.c_char_p
    lib.exactly_cpu_attention.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64] + \
        [ctypes.c_int] * 4 + [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_float,
                                                       ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    return lib


def p(a: np.ndarray) -> int:
    return a.ctypes.data


def call(lib, k, v, tables, q_lens, ctx_lens, q, n_heads, causal=True, threads=2):
    qs = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    sl = np.array(ctx_lens, dtype=np.int32)
    out = np.full(q.shape, np.nan, dtype=np.float32)
    rc = lib.exactly_cpu_attention(p(k), p(v), k.shape[0], k.shape[1], k.shape[2], k.shape[3], len(q_lens), p(qs),
                                   p(sl), p(tables), tables.shape[1], p(q), n_heads, k.shape[3] ** -0.5, int(causal),
                                   p(out), threads)
    return rc, out


def test_cpu_attention_matches_float64_through_a_shuffled_block_table(lib):
    rng = np.random.default_rng(3)
    bs, n_kv, n_heads, d = 16, 2, 8, 64
    q_lens, ctx_lens = [1, 37, 5], [300, 37, 70]
    blocks = [(c + bs - 1) // bs for c in ctx_lens]
    perm = rng.permutation(sum(blocks) + 5).astype(np.int32)
    tables = np.zeros((len(blocks), max(blocks)), dtype=np.int32)
    at = 0
    for s, nb in enumerate(blocks):
        tables[s, :nb] = perm[at:at + nb]
        at += nb
    k = rng.standard_normal((len(perm), bs, n_kv, d)).astype(np.float32)
    v = rng.standard_normal((len(perm), bs, n_kv, d)).astype(np.float32)
    q = rng.standard_normal((sum(q_lens), n_heads, d)).astype(np.float32)
    for causal in (True, False):
        rc, out = call(lib, k, v, tables, q_lens, ctx_lens, q, n_heads, causal)
        assert rc == 0, lib.exactly_last_error()
        row = 0
        worst = 0.0
        for s, (ql, ctx) in enumerate(zip(q_lens, ctx_lens)):
            slots = (tables[s, np.arange(ctx) // bs].astype(np.int64) * bs + np.arange(ctx) % bs)
            ks = k.reshape(-1, n_kv, d)[slots].astype(np.float64)
            vs = v.reshape(-1, n_kv, d)[slots].astype(np.float64)
            for t in range(ql):
                pos = ctx - ql + t
                last = pos if causal else ctx - 1
                for h in range(n_heads):
                    sc = ks[: last + 1, h // (n_heads // n_kv)] @ q[row + t, h].astype(np.float64) / np.sqrt(d)
                    w = np.exp(sc - sc.max())
                    ref = (w / w.sum()) @ vs[: last + 1, h // (n_heads // n_kv)]
                    worst = max(worst, float(np.abs(out[row + t, h] - ref).max()))
            row += ql
        print(f"causal={causal}: max |cpu - float64| = {worst:.2e}")
        assert np.isfinite(out).all()
        assert worst < 1e-5


def test_bad_arguments_return_an_error_with_a_message(lib):
    k = np.zeros((2, 16, 3, 64), dtype=np.float32)
    q = np.zeros((1, 4, 64), dtype=np.float32)  # 4 heads over 3 KV heads
    rc, _ = call(lib, k, k, np.zeros((1, 1), dtype=np.int32), [1], [1], q, 4)
    assert rc == -1
    assert b"4 heads over 3 KV heads" in lib.exactly_last_error()


def test_reports_whether_cuda_was_built(lib):
    print("built with CUDA:", bool(lib.exactly_has_cuda()))
    assert lib.exactly_has_cuda() in (0, 1)
