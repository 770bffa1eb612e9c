"""The CPU training attention through the kernels' C interface (fp32): the
forward's output and log-sum-exp and the backward's dQ, dK, dV against float64
numpy, within twice the error of the same naive math done in float32 at the
same inputs (the rule the GPU kernels follow against PyTorch's own math path),
over the lengths, head groupings, head dims and masks the backward serves;
the bits are the same on 1 and 3 threads; bad shapes are refused by name."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
P = ctypes.c_void_p
I = ctypes.c_int


@pytest.fixture(scope="module")
def lib():
    build = Path(os.environ.get("EXACTLY_BUILD_DIR", REPO_ROOT / "build"))
    path = build / "src" / "kernels" / "capi" / "libexactly_kernels_capi.so"
    if not path.exists():
        pytest.fail(f"{path} not built")
    lib = ctypes.CDLL(str(path))
    lib.exactly_last_error.restype = ctypes.c_char_p
    lib.exactly_cpu_flash_forward.argtypes = [P, P, P, I, P, P, I, I, I, ctypes.c_float, I, P, P, I]
    lib.exactly_cpu_flash_backward.argtypes = [P] * 6 + [I, P, P, I, I, I, ctypes.c_float, I, P, P, P, I]
    return lib


def ptr(a: np.ndarray) -> int:
    assert a.flags.c_contiguous
    return a.ctypes.data


class Batch:
    """A varlen batch: q [Tq, H, d], k and v [Tk, Hkv, d], d_out like q."""

    def __init__(self, q_lens, k_lens, n_heads, n_kv, d, causal, seed=0):
        rng = np.random.default_rng(seed)
        self.cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
        self.cu_k = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
        self.n_heads, self.n_kv, self.d, self.causal = n_heads, n_kv, d, causal
        self.scale = np.float32(d ** -0.5)
        self.q = rng.standard_normal((self.cu_q[-1], n_heads, d)).astype(np.float32)
        self.k = rng.standard_normal((self.cu_k[-1], n_kv, d)).astype(np.float32)
        self.v = rng.standard_normal((self.cu_k[-1], n_kv, d)).astype(np.float32)
        self.d_out = rng.standard_normal(self.q.shape).astype(np.float32)

    def shape_args(self):
        return [len(self.cu_q) - 1, ptr(self.cu_q), ptr(self.cu_k), self.n_heads, self.n_kv, self.d,
                float(self.scale), int(self.causal)]


def run_cpu(lib, b: Batch, threads=2):
    out = np.full(b.q.shape, np.nan, dtype=np.float32)
    lse = np.full(b.q.shape[:2], np.nan, dtype=np.float32)
    rc = lib.exactly_cpu_flash_forward(ptr(b.q), ptr(b.k), ptr(b.v), *b.shape_args(), ptr(out), ptr(lse), threads)
    assert rc == 0, lib.exactly_last_error()
    grads = [np.full(x.shape, np.nan, dtype=np.float32) for x in (b.q, b.k, b.v)]
    rc = lib.exactly_cpu_flash_backward(ptr(b.q), ptr(b.k), ptr(b.v), ptr(out), ptr(b.d_out), ptr(lse),
                                        *b.shape_args(), *(ptr(g) for g in grads), threads)
    assert rc == 0, lib.exactly_last_error()
    return out, lse, *grads


def naive(b: Batch, dtype):
    """Materialised attention and its gradients, computed in `dtype`."""
    q, k, v, g = (x.astype(dtype) for x in (b.q, b.k, b.v, b.d_out))
    scale = dtype(b.scale)
    out, lse = np.zeros_like(q), np.full(q.shape[:2], -np.inf, dtype=dtype)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    group = b.n_heads // b.n_kv
    for s in range(len(b.cu_q) - 1):
        qs, ks = slice(b.cu_q[s], b.cu_q[s + 1]), slice(b.cu_k[s], b.cu_k[s + 1])
        lq, lk = qs.stop - qs.start, ks.stop - ks.start
        seen = np.arange(lk)[None, :] <= (np.arange(lq)[:, None] + lk - lq) if b.causal else np.ones((lq, lk), bool)
        any_key = seen.any(axis=1)
        for h in range(b.n_heads):
            Q, K, V, G = q[qs, h], k[ks, h // group], v[ks, h // group], g[qs, h]
            S = np.where(seen, (Q @ K.T) * scale, -np.inf)
            m = np.where(any_key, S.max(axis=1, initial=-np.inf), 0)
            E = np.exp(S - m[:, None])
            L = np.where(any_key, m + np.log(E.sum(axis=1)), -np.inf)
            Pm = np.where(seen, np.exp(S - np.where(any_key, L, 0)[:, None]), 0)
            O = Pm @ V
            D = (G * O).sum(axis=1)
            dS = Pm * (G @ V.T - D[:, None])
            out[qs, h], lse[qs, h] = O, L
            dq[qs, h] = (dS @ K) * scale
            dk[ks, h // group] += (dS.T @ Q) * scale
            dv[ks, h // group] += Pm.T @ G
    return out, lse, dq, dk, dv


CASES = [
    # (query lengths, key lengths, heads, KV heads, head dim, causal)
    ([1], [1], 2, 2, 64, True),
    ([17], [17], 4, 1, 128, False),
    ([128], [128], 8, 1, 64, True),
    ([1000], [1000], 4, 1, 128, True),
    ([4096], [4096], 1, 1, 64, True),
    ([1, 17, 128, 300], [1, 40, 128, 1000], 8, 2, 64, True),
    ([5, 200], [9, 70], 4, 4, 128, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"q{sum(c[0])}-k{sum(c[1])}-h{c[2]}/{c[3]}-d{c[4]}-"
                                                         f"{'causal' if c[5] else 'full'}")
def test_forward_and_backward_match_float64_within_twice_float32_math(lib, case):
    b = Batch(*case, seed=len(case[0]) * 7 + case[4])
    got = run_cpu(lib, b)
    exact = naive(b, np.float64)
    f32 = naive(b, np.float32)
    for name, g, e, n in zip(("out", "lse", "dq", "dk", "dv"), got, exact, f32):
        assert np.isfinite(g[np.isfinite(e)]).all(), name
        finite = np.isfinite(e)
        assert (np.isfinite(g) == finite).all(), f"{name}: -inf where the reference has none, or the reverse"
        ours = float(np.abs(g[finite] - e[finite]).max(initial=0))
        theirs = float(np.abs(n[finite] - e[finite]).max(initial=0))
        floor = 1e-6 * max(1.0, float(np.abs(e[finite]).max(initial=0)))
        print(f"{name}: max |ours - float64| = {ours:.2e}, float32 math {theirs:.2e}")
        assert ours <= 2 * theirs + floor, name


def test_bits_do_not_depend_on_threads_or_runs(lib):
    b = Batch([70, 1, 33], [90, 50, 33], 8, 2, 64, True, seed=5)
    first = run_cpu(lib, b, threads=1)
    for again in (run_cpu(lib, b, threads=3), run_cpu(lib, b, threads=1)):
        for x, y in zip(first, again):
            assert np.array_equal(x, y, equal_nan=True)


def test_queries_that_see_no_key_get_zero_and_minus_infinity(lib):
    b = Batch([6], [2], 2, 1, 64, True, seed=9)  # queries 0..3 see nothing
    out, lse, dq, dk, dv = run_cpu(lib, b)
    assert (out[:4] == 0).all() and (dq[:4] == 0).all() and np.isneginf(lse[:4]).all()
    assert np.isfinite(lse[4:]).all() and np.isfinite(dk).all() and np.isfinite(dv).all()


@pytest.mark.parametrize("change, message", [
    (dict(n_heads=3, n_kv=2), "n_heads (3) must be a positive multiple of n_kv_heads (2)"),
    (dict(d=0), "head_dim must be in [1, 512], got 0"),
    (dict(cu_q=[0, 5, 3]), "cu_q decreases at sequence 1"),
    (dict(threads=0), "n_threads must be in [1, 1024], got 0"),
])
def test_bad_shapes_are_refused_by_name(lib, change, message):
    b = Batch([5, 1], [5, 1], 2, 1, 16, True)
    if "cu_q" in change:
        b.cu_q = np.array(change["cu_q"], dtype=np.int32)
    b.n_heads, b.n_kv = change.get("n_heads", b.n_heads), change.get("n_kv", b.n_kv)
    b.d = change.get("d", b.d)
    out = np.zeros((16, 3, 16), dtype=np.float32)
    lse = np.zeros((16, 3), dtype=np.float32)
    rc = lib.exactly_cpu_flash_forward(ptr(b.q), ptr(b.k), ptr(b.v), *b.shape_args(), ptr(out), ptr(lse),
                                       change.get("threads", 1))
    assert rc == -1
    assert message in lib.exactly_last_error().decode()


# --- the CUDA entries refuse bad shapes before touching a device -----------------

def cuda_entries(lib):
    if not lib.exactly_has_cuda():
        pytest.skip("built without CUDA")
    f, i64 = ctypes.c_float, ctypes.c_int64
    lib.exactly_cuda_flash_backward_workspace_bytes.restype = i64
    lib.exactly_cuda_flash_backward_workspace_bytes.argtypes = [i64, I]
    lib.exactly_cuda_flash_forward.argtypes = [P, P, P, I, P, P, I, I, I, I, I, I, f, I, P, P, P]
    lib.exactly_cuda_flash_backward.argtypes = [P] * 6 + [I, P, P, I, I, I, I, I, I, f, I, P, P, P, P, i64, P]
    return lib


BAD_CUDA_SHAPES = [
    (dict(head_dim=96), "head_dim 96 (supported: 64, 128)"),
    (dict(n_heads=6, n_kv_heads=4), "6 query heads over 4 KV heads"),
    (dict(n_kv_heads=0), "8 query heads over 0 KV heads"),
    (dict(n_seqs=70000), "70000 sequences (at most 65535 per launch)"),
    (dict(max_q_len=-1), "max_q_len -1"),
    (dict(dtype=7), "unknown dtype 7"),
    (dict(scale=float("inf")), "scale inf is not finite"),
    (dict(cu=False), "cu_q and cu_k are required"),
]


@pytest.mark.parametrize("change, message", BAD_CUDA_SHAPES)
def test_cuda_training_entries_refuse_bad_shapes_by_name(lib, change, message):
    lib = cuda_entries(lib)
    a = dict(n_seqs=1, max_q_len=4, max_k_len=4, n_heads=8, n_kv_heads=2, head_dim=64, dtype=0, scale=0.125,
             cu=True) | change
    fake = 1 << 20  # never dereferenced: the shape is checked first
    cu = fake if a["cu"] else None
    shape = [a["n_seqs"], cu, cu, a["max_q_len"], a["max_k_len"], a["n_heads"], a["n_kv_heads"], a["head_dim"],
             a["dtype"], a["scale"], 1]
    assert lib.exactly_cuda_flash_forward(fake, fake, fake, *shape, fake, fake, None) == -1
    assert message in lib.exactly_last_error().decode()
    assert lib.exactly_cuda_flash_backward(*[fake] * 6, *shape, fake, fake, fake, fake, 1 << 20, None) == -1
    assert message in lib.exactly_last_error().decode()


def test_cuda_backward_refuses_a_workspace_short_of_the_host_known_bound(lib):
    """3 sequences of up to 10 queries, 4 heads: 3 * 10 * 4 floats, whatever cu_q holds."""
    lib = cuda_entries(lib)
    assert lib.exactly_cuda_flash_backward_workspace_bytes(30, 4) == 480
    fake = 1 << 20
    shape = [3, fake, fake, 10, 10, 4, 2, 64, 0, 0.125, 1]
    assert lib.exactly_cuda_flash_backward(*[fake] * 6, *shape, fake, fake, fake, fake, 479, None) == -1
    assert "workspace of 479 bytes, 480 needed (3 sequences of up to 10 queries, 4 heads)" in \
        lib.exactly_last_error().decode()
