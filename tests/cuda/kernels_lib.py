"""ctypes binding of libexactly_kernels_capi (src/kernels/capi/kernels_capi.h)
for PyTorch tensors, plus the paged-cache fixtures the checks and benchmarks
share: random caches, random non-contiguous block tables, and gathering a
sequence's keys back into a contiguous tensor."""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from exactly_torch import declare_training_entries  # noqa: E402  (the training entries' C types, declared once)

ROOT = Path(__file__).resolve().parents[2]
DTYPE_CODE = {torch.bfloat16: 0, torch.float16: 1}


def load_library(path: str | None = None) -> ctypes.CDLL:
    path = path or os.environ.get("EXACTLY_KERNELS_LIB") or str(
        ROOT / "build-gpu" / "src" / "kernels" / "capi" / "libexactly_kernels_capi.so")
    lib = ctypes.CDLL(path)
    c_int, c_i64, c_f, c_p = ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
    lib.exactly_last_error.restype = ctypes.c_char_p
    lib.exactly_cuda_decode_workspace_bytes.restype = c_i64
    lib.exactly_cuda_decode_workspace_bytes.argtypes = [c_int, c_int, c_int, c_int]
    lib.exactly_cpu_attention.argtypes = [c_p, c_p, c_i64, c_int, c_int, c_int, c_int, c_p, c_p, c_p, c_int,
                                          c_p, c_int, c_f, c_int, c_p, c_int]
    lib.exactly_cuda_prefill.argtypes = [c_p, c_p, c_i64, c_int, c_int, c_int, c_int, c_int, c_p, c_p, c_p, c_int,
                                         c_int, c_int, c_p, c_i64, c_int, c_f, c_int, c_p, c_p]
    lib.exactly_cuda_decode.argtypes = [c_p, c_p, c_i64, c_int, c_int, c_int, c_int, c_int, c_p, c_p, c_p, c_int,
                                        c_int, c_p, c_int, c_f, c_p, c_p, c_i64, c_p]
    lib.exactly_cuda_kv_store.argtypes = [c_p, c_p, c_i64, c_int, c_int, c_int, c_int, c_p, c_p, c_p, c_i64, c_p]
    lib.exactly_cuda_copy_blocks.argtypes = [c_p, c_p, c_int, c_p, c_i64, c_int, c_int, c_int, c_int, c_p]
    declare_training_entries(lib)
    return lib


def check(lib, rc: int):
    if rc != 0:
        raise RuntimeError(lib.exactly_last_error().decode())


def ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


@dataclass
class PagedBatch:
    """A batch of sequences over a paged cache. k_cache, v_cache:
    [num_blocks, block_size, n_kv, d]; q: [n_tokens, n_heads, d]."""
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    q: torch.Tensor
    query_start: torch.Tensor  # int32 [n_seqs + 1], on the device
    seq_lens: torch.Tensor  # int32 [n_seqs]
    block_tables: torch.Tensor  # int32 [n_seqs, max_blocks]
    q_lens: list[int]
    ctx_lens: list[int]
    n_heads: int

    @property
    def block_size(self) -> int:
        return self.k_cache.shape[1]

    @property
    def n_kv(self) -> int:
        return self.k_cache.shape[2]

    @property
    def head_dim(self) -> int:
        return self.k_cache.shape[3]

    def keys(self, s: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequence s's keys and values, contiguous: [ctx, n_kv, d]."""
        n = self.ctx_lens[s]
        blocks = self.block_tables[s, : (n + self.block_size - 1) // self.block_size].long()
        k = self.k_cache[blocks].reshape(-1, self.n_kv, self.head_dim)[:n]
        v = self.v_cache[blocks].reshape(-1, self.n_kv, self.head_dim)[:n]
        return k, v

    def queries(self, s: int) -> torch.Tensor:
        a, b = int(self.query_start[s]), int(self.query_start[s + 1])
        return self.q[a:b]


def make_batch(q_lens, ctx_lens, n_heads, n_kv, head_dim, dtype, block_size=16, seed=0, spare_blocks=7,
               device="cuda") -> PagedBatch:
    """Random q/K/V (unit normal) and a random permutation of the pool's
    blocks as block tables, with spare blocks left unused."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    blocks_per_seq = [(c + block_size - 1) // block_size for c in ctx_lens]
    num_blocks = sum(blocks_per_seq) + spare_blocks
    perm = torch.randperm(num_blocks, generator=g)
    max_blocks = max(1, max(blocks_per_seq))
    tables = torch.zeros(len(ctx_lens), max_blocks, dtype=torch.int32)
    at = 0
    for s, nb in enumerate(blocks_per_seq):
        tables[s, :nb] = perm[at:at + nb].to(torch.int32)
        at += nb
    shape = (num_blocks, block_size, n_kv, head_dim)
    k = torch.randn(shape, generator=g).to(dtype)
    v = torch.randn(shape, generator=g).to(dtype)
    n_tokens = sum(q_lens)
    q = torch.randn((n_tokens, n_heads, head_dim), generator=g).to(dtype)
    qs = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0).tolist()), dtype=torch.int32)
    return PagedBatch(k.to(device), v.to(device), q.to(device), qs.to(device),
                      torch.tensor(ctx_lens, dtype=torch.int32, device=device), tables.to(device),
                      list(q_lens), list(ctx_lens), n_heads)


def run_prefill(lib, b: PagedBatch, causal=True, out=None, scale=None):
    scale = scale if scale is not None else b.head_dim ** -0.5
    out = out if out is not None else torch.empty_like(b.q)
    check(lib, lib.exactly_cuda_prefill(
        ptr(b.k_cache), ptr(b.v_cache), b.k_cache.shape[0], b.block_size, b.n_kv, b.head_dim,
        DTYPE_CODE[b.q.dtype], len(b.q_lens), ptr(b.query_start), ptr(b.seq_lens), ptr(b.block_tables),
        b.block_tables.shape[1], max(b.q_lens), max(b.ctx_lens), ptr(b.q), b.q.shape[0], b.n_heads, scale,
        int(causal), ptr(out), None))
    return out


def decode_workspace(lib, b: PagedBatch):
    n = lib.exactly_cuda_decode_workspace_bytes(len(b.q_lens), b.n_heads, max(b.ctx_lens), b.head_dim)
    return torch.empty(max(n, 16), dtype=torch.uint8, device=b.q.device)


def run_decode(lib, b: PagedBatch, out=None, workspace=None, scale=None):
    scale = scale if scale is not None else b.head_dim ** -0.5
    out = out if out is not None else torch.empty_like(b.q)
    workspace = workspace if workspace is not None else decode_workspace(lib, b)
    check(lib, lib.exactly_cuda_decode(
        ptr(b.k_cache), ptr(b.v_cache), b.k_cache.shape[0], b.block_size, b.n_kv, b.head_dim,
        DTYPE_CODE[b.q.dtype], len(b.q_lens), ptr(b.query_start), ptr(b.seq_lens), ptr(b.block_tables),
        b.block_tables.shape[1], max(b.ctx_lens), ptr(b.q), b.n_heads, scale, ptr(out), ptr(workspace),
        workspace.numel(), None))
    return out


def run_cpu(lib, b: PagedBatch, causal=True, n_threads=8):
    """The CPU engine's fp32 FlashAttention on the same (upcast) inputs."""
    k = b.k_cache.float().cpu().contiguous()
    v = b.v_cache.float().cpu().contiguous()
    q = b.q.float().cpu().contiguous()
    out = torch.empty_like(q)
    qs, sl, bt = b.query_start.cpu(), b.seq_lens.cpu(), b.block_tables.cpu().contiguous()
    check(lib, lib.exactly_cpu_attention(
        ptr(k), ptr(v), k.shape[0], b.block_size, b.n_kv, b.head_dim, len(b.q_lens), ptr(qs), ptr(sl), ptr(bt),
        bt.shape[1], ptr(q), b.n_heads, b.head_dim ** -0.5, int(causal), ptr(out), n_threads))
    return out
