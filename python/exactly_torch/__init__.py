"""The engine's training attention as a PyTorch op: `exactly_attention(q, k,
v, causal=..., scale=...)` is a `torch.autograd.Function` whose forward saves
each query row's log-sum-exp and whose backward recomputes the probabilities
tile by tile from it (kernels/cuda/flash_train.h, through the C interface
kernels/capi/kernels_capi.h). Deterministic: two backward passes on the same
inputs give the same bits.

CUDA tensors (bf16 or fp16, head dims 64 and 128) run the CUDA kernels;
CPU tensors (fp32, head dims up to 512) run their CPU twin, the oracle the
CUDA kernels are tested against. The library is libexactly_kernels_capi.so
(`scripts/build-torch-op` builds one with CUDA for the machine it runs on;
a CPU build's serves CPU tensors), found through EXACTLY_KERNELS_LIB or
given to `load(path)`.

    from exactly_torch import exactly_attention
    out = exactly_attention(q, k, v, causal=True)  # [batch, heads, length, head_dim]

Grouped-query heads: k and v may have fewer heads than q (a divisor of
q's). For variable-length batches use `exactly_varlen_attention` with
FlashAttention's packed layout and cumulative offsets.
"""
from __future__ import annotations

import ctypes
import math
import os

import torch

__all__ = ["exactly_attention", "exactly_varlen_attention", "load"]

_DTYPES = {torch.bfloat16: 0, torch.float16: 1}
_lib: ctypes.CDLL | None = None


def load(path: str | None = None) -> ctypes.CDLL:
    """Loads the kernels' C library (once); path defaults to EXACTLY_KERNELS_LIB."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    path = path or os.environ.get("EXACTLY_KERNELS_LIB")
    if not path:
        raise RuntimeError("exactly_torch: set EXACTLY_KERNELS_LIB to libexactly_kernels_capi.so "
                           "(scripts/build-torch-op builds it) or call exactly_torch.load(path)")
    lib = ctypes.CDLL(path)
    lib.exactly_last_error.restype = ctypes.c_char_p
    declare_training_entries(lib)
    _lib = lib
    return lib


def declare_training_entries(lib: ctypes.CDLL) -> None:
    """The C types of the training attention's entries (kernels_capi.h)."""
    c_int, c_i64, c_f, c_p = ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
    lib.exactly_cpu_flash_forward.argtypes = [c_p, c_p, c_p, c_int, c_p, c_p, c_int, c_int, c_int, c_f, c_int, c_p,
                                              c_p, c_int]
    lib.exactly_cpu_flash_backward.argtypes = [c_p] * 6 + [c_int, c_p, c_p, c_int, c_int, c_int, c_f, c_int, c_p, c_p,
                                                           c_p, c_int]
    lib.exactly_cuda_flash_forward.argtypes = [c_p, c_p, c_p, c_int, c_p, c_p, c_int, c_int, c_int, c_int, c_int,
                                               c_int, c_f, c_int, c_p, c_p, c_p]
    lib.exactly_cuda_flash_backward_workspace_bytes.restype = c_i64
    lib.exactly_cuda_flash_backward_workspace_bytes.argtypes = [c_i64, c_int]
    lib.exactly_cuda_flash_backward.argtypes = [c_p, c_p, c_p, c_p, c_p, c_p, c_int, c_p, c_p, c_int, c_int, c_int,
                                                c_int, c_int, c_int, c_f, c_int, c_p, c_p, c_p, c_p, c_i64, c_p]


def _check(lib: ctypes.CDLL, rc: int) -> None:
    if rc != 0:
        raise RuntimeError(f"exactly_torch: {lib.exactly_last_error().decode()}")


def _validate(q, k, v, cu_q, cu_k) -> None:
    if not (q.device == k.device == v.device) or q.device.type not in ("cuda", "cpu"):
        raise ValueError(f"exactly_attention: q, k and v must share one CUDA device or the CPU "
                         f"(got {q.device}, {k.device}, {v.device})")
    wanted = "bf16 or fp16" if q.is_cuda else "fp32 (the CPU kernels' type)"
    if (q.dtype not in _DTYPES if q.is_cuda else q.dtype != torch.float32) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"exactly_attention: q, k, v must share {wanted} (got {q.dtype}, {k.dtype}, {v.dtype})")
    if q.dim() != 3 or k.dim() != 3 or v.shape != k.shape:
        raise ValueError(f"exactly_attention: packed q [tokens, heads, d] and k, v [tokens, kv_heads, d] expected "
                         f"(got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)})")
    dims = (64, 128) if q.is_cuda else range(1, 513)
    if q.shape[2] not in dims or k.shape[2] != q.shape[2]:
        raise ValueError(f"exactly_attention: head dim {'64 or 128' if q.is_cuda else '1 to 512'}, the same for q "
                         f"and k (got {q.shape[2]}, {k.shape[2]})")
    if q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"exactly_attention: {q.shape[1]} query heads are not a multiple of {k.shape[1]} KV heads")
    for name, cu in (("cu_q", cu_q), ("cu_k", cu_k)):
        if cu.dtype != torch.int32 or cu.dim() != 1 or cu.device != q.device:
            raise ValueError(f"exactly_attention: {name} must be int32 offsets on q's device")
    if cu_q.numel() != cu_k.numel() or cu_q.numel() < 2:
        raise ValueError("exactly_attention: cu_q and cu_k need n_seqs + 1 entries each, n_seqs >= 1")


def _check_offsets(cu_q, cu_k, q_rows: int, k_rows: int, max_q: int, max_k: int) -> None:
    """The offsets start at 0, never decrease, end at the tensors' rows and
    keep every length within its bound: the kernels index by them."""
    lq, lk = cu_q[1:] - cu_q[:-1], cu_k[1:] - cu_k[:-1]
    facts = torch.stack([cu_q[0], cu_k[0], cu_q[-1], cu_k[-1], lq.min(), lk.min(), lq.max(), lk.max()]).tolist()
    if facts[:4] != [0, 0, q_rows, k_rows] or min(facts[4:6]) < 0 or facts[6] > max_q or facts[7] > max_k:
        raise ValueError(f"exactly_attention: offsets (first 0/0, last {facts[2]}/{facts[3]}, lengths "
                         f"{facts[4]}..{facts[6]} / {facts[5]}..{facts[7]}) do not fit {q_rows} query and {k_rows} "
                         f"key rows with max lengths {max_q} / {max_k}")


class _VarlenAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, max_q, max_k, causal, scale):
        lib = load()
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)
        ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), cu_q.numel() - 1, cu_q.data_ptr(), cu_k.data_ptr())
        heads = (q.shape[1], k.shape[1], q.shape[2])
        if q.is_cuda:
            _check(lib, lib.exactly_cuda_flash_forward(
                *ptrs, max_q, max_k, *heads, _DTYPES[q.dtype], scale, int(causal), out.data_ptr(), lse.data_ptr(),
                torch.cuda.current_stream(q.device).cuda_stream))
        else:
            _check(lib, lib.exactly_cpu_flash_forward(*ptrs, *heads, scale, int(causal), out.data_ptr(),
                                                      lse.data_ptr(), torch.get_num_threads()))
        ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
        ctx.args = (max_q, max_k, causal, scale)
        return out

    @staticmethod
    def backward(ctx, d_out):
        lib = load()
        q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
        max_q, max_k, causal, scale = ctx.args
        d_out = d_out.contiguous()
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), d_out.data_ptr(), lse.data_ptr(),
                cu_q.numel() - 1, cu_q.data_ptr(), cu_k.data_ptr())
        heads, grads = (q.shape[1], k.shape[1], q.shape[2]), (dq.data_ptr(), dk.data_ptr(), dv.data_ptr())
        if q.is_cuda:
            ws_bytes = lib.exactly_cuda_flash_backward_workspace_bytes((cu_q.numel() - 1) * max_q, q.shape[1])
            workspace = torch.empty(max(ws_bytes, 16), dtype=torch.uint8, device=q.device)
            _check(lib, lib.exactly_cuda_flash_backward(
                *ptrs, max_q, max_k, *heads, _DTYPES[q.dtype], scale, int(causal), *grads, workspace.data_ptr(),
                workspace.numel(), torch.cuda.current_stream(q.device).cuda_stream))
        else:
            _check(lib, lib.exactly_cpu_flash_backward(*ptrs, *heads, scale, int(causal), *grads,
                                                       torch.get_num_threads()))
        return dq, dk, dv, None, None, None, None, None, None


def exactly_varlen_attention(q, k, v, cu_q, cu_k, max_q: int, max_k: int, causal: bool = True,
                             scale: float | None = None):
    """Packed variable-length attention: q [cu_q[-1], heads, d], k and v
    [cu_k[-1], kv_heads, d], cu_q and cu_k int32 cumulative offsets on the
    device; max_q and max_k bound every sequence's lengths. The causal mask
    aligns the ends (query i of Lq sees keys j <= i + Lk - Lq)."""
    return _attend(q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, check_offsets=True)


def _attend(q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, check_offsets: bool):
    _validate(q, k, v, cu_q, cu_k)
    if check_offsets:  # one read back from the device
        _check_offsets(cu_q, cu_k, q.shape[0], k.shape[0], max_q, max_k)
    scale = 1.0 / math.sqrt(q.shape[2]) if scale is None else float(scale)
    return _VarlenAttention.apply(q, k, v, cu_q, cu_k, int(max_q), int(max_k), bool(causal), scale)


def exactly_attention(q, k, v, causal: bool = False, scale: float | None = None):
    """SDPA's layout: q [batch, heads, L, d], k and v [batch, kv_heads, S, d];
    returns [batch, heads, L, d]. causal aligns the ends, as
    FlashAttention does (for L == S, torch's is_causal)."""
    if q.dim() != 4 or k.dim() != 4 or v.shape != k.shape or k.shape[0] != q.shape[0]:
        raise ValueError(f"exactly_attention: q [batch, heads, L, d] and k, v [batch, kv_heads, S, d] expected "
                         f"(got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)})")
    b, h, lq, d = q.shape
    lk = k.shape[2]
    packed = lambda t: t.transpose(1, 2).reshape(-1, t.shape[1], d)
    cu_q = torch.arange(b + 1, dtype=torch.int32, device=q.device) * lq
    cu_k = torch.arange(b + 1, dtype=torch.int32, device=q.device) * lk
    # offsets made here fit by construction: no check, which would wait for the device
    out = _attend(packed(q), packed(k), packed(v), cu_q, cu_k, lq, lk, causal, scale, check_offsets=False)
    return out.view(b, lq, h, d).transpose(1, 2)
