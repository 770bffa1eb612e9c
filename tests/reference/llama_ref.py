"""Float64 reference forward pass of the llama architecture (and Qwen3, the
llama body with per-head q/k norms; and their mixture-of-experts forms,
Mixtral and Qwen3-MoE), read from a GGUF.

This file is the independent oracle for the engine's model-exactness tests:
it shares no code with the engine. Weights are read with the PyPI `gguf`
package and dequantised by that package (`gguf.quants.dequantize`); all
arithmetic after that is float64 numpy, so the reference's own rounding error
(~1e-15 relative) is negligible against the engine's fp32 error.

Layout facts this code relies on (from the GGUF format documentation and the
public HF -> GGUF conversion script):
  * A tensor of GGUF shape [ne0, ne1] is stored row-major with ne0 fastest,
    so as a numpy array it is [ne1, ne0]: rows are output features and
    `y = x @ W.T`.
  * The conversion script permutes the rows of attn_q / attn_k per head so
    that ggml's "normal" rope mode applies: it rotates ADJACENT pairs
    (x[2i], x[2i+1]) by angle pos * base^(-2i / rope_dims). (HF's original
    layout pairs x[i] with x[i + head_dim/2]; the permutation maps one onto
    the other.)
  * Qwen3's converter does not permute: its rope pairs x[i] with
    x[i + rope_dims/2] (ggml's "neox" mode). Before rope, each head of q and
    k is RMS-normalised over head_dim with the weights attn_q_norm /
    attn_k_norm ([head_dim], one per layer).
  * Llama 3.1's RoPE scaling is a tensor, rope_freqs.weight ([rope_dims/2]):
    pair i's frequency base^(-2i/rope_dims) is divided by its factor.
  * YaRN RoPE scaling (rope.scaling.type "yarn", from the YaRN paper): pair
    i's frequency goes from f_i / s (factor s) to the original f_i along a
    linear ramp over the pair index, between the pairs whose wavelength fits
    beta_fast (32) and beta_slow (1) turns into the original context (the
    ends floored and ceiled, as llama.cpp computes them), and every cos and
    sin is multiplied by attn_factor * (0.1 ln s + 1).
  * A sliding window on every layer (llama.attention.sliding_window, Mistral's
    window): a query at position p sees only keys p - window + 1 .. p.
  * SmolLM3's NoPE layers (config.json's no_rope_layers, 0 for such a layer;
    in its GGUF files, as llama.cpp reads them, every fourth layer) rotate
    neither q nor k: their attention sees no positions. Its converter
    permutes q and k as Llama's does.
  * Phi-3 (phi3): the llama body with q, k and v in one attn_qkv (rows in
    that order) and gate and up in one ffn_up (gate first); its converter
    does not permute, so RoPE pairs x[i] with x[i + rope_dims/2].
  * Mixture of experts (llama with llama.expert_count, qwen3moe): the MLP is
    replaced by experts stored as 3-D tensors ffn_{gate,up,down}_exps
    ([n_experts, out, in] as numpy arrays) and a router ffn_gate_inp; a
    token takes the experts of its k largest router logits (the lower index
    first among equal ones), weighted by the softmax of those k logits
    (Mixtral's rule; Qwen3-MoE's normalised top-k of the full softmax is the
    same number).

Library use:
    model = load(path)
    logits = model.logits([1, 2, 3])            # [n, vocab] float64
    cache = model.new_cache()
    model.forward([1, 2], cache); model.forward([3], cache)   # incremental
    ids, gaps = model.greedy([1, 2, 3], n_new=16)

Script use:
    python llama_ref.py MODEL --tokens 1,2,3 --out logits.npy
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    n_layers: int
    dim: int          # residual stream width
    ffn_dim: int      # hidden width of the SwiGLU MLP
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rope_base: float
    rope_dims: int    # leading dims of each head that are rotated
    norm_eps: float
    vocab: int
    rope_half: bool = False  # pairs (i, i + rope_dims/2) instead of (2i, 2i + 1)
    qk_norm: bool = False    # per-head RMSNorm of q and k before rope
    n_experts: int = 0       # mixture of experts (0: a dense MLP)
    n_experts_used: int = 0
    yarn: dict | None = None  # factor, original_context, beta_fast, beta_slow, attn_factor
    window: int = 0          # every layer's sliding window (0: full causal attention)
    nope_layers: tuple = ()  # layers that rotate neither q nor k (SmolLM3's NoPE layers)


def _field(reader: GGUFReader, key: str):
    field = reader.fields.get(key)
    if field is None:
        raise KeyError(f"GGUF metadata key {key!r} is missing")
    return field.contents()


def read_config(reader: GGUFReader) -> LlamaConfig:
    arch = _field(reader, "general.architecture")
    if arch not in ("llama", "qwen3", "qwen3moe", "smollm3", "phi3"):
        raise ValueError(f"general.architecture is {arch!r}, expected llama, qwen3, qwen3moe, smollm3 or phi3")
    p = arch + "."
    n_experts = int(_field(reader, p + "expert_count")) if p + "expert_count" in reader.fields else 0
    dim = int(_field(reader, p + "embedding_length"))
    n_heads = int(_field(reader, p + "attention.head_count"))
    # Heads may be narrower or wider than dim / n_heads when the file says so.
    key_len = p + "attention.key_length"
    head_dim = int(_field(reader, key_len)) if key_len in reader.fields else dim // n_heads
    rope_key = p + "rope.dimension_count"
    rope_dims = int(_field(reader, rope_key)) if rope_key in reader.fields else head_dim
    n_layers = int(_field(reader, p + "block_count"))
    return LlamaConfig(
        n_layers=n_layers,
        dim=dim,
        ffn_dim=int(_field(reader, p + "feed_forward_length")),
        n_heads=n_heads,
        n_kv_heads=int(_field(reader, p + "attention.head_count_kv")),
        head_dim=head_dim,
        rope_base=float(_field(reader, p + "rope.freq_base")),
        rope_dims=rope_dims,
        norm_eps=float(_field(reader, p + "attention.layer_norm_rms_epsilon")),
        vocab=len(_field(reader, "tokenizer.ggml.tokens")),
        rope_half=arch in ("qwen3", "qwen3moe", "phi3"),
        qk_norm=arch in ("qwen3", "qwen3moe"),
        n_experts=n_experts,
        n_experts_used=int(_field(reader, p + "expert_used_count")) if n_experts else 0,
        yarn=_read_yarn(reader, p),
        window=int(_field(reader, p + "attention.sliding_window")) if p + "attention.sliding_window" in reader.fields
        else 0,
        nope_layers=tuple(l for l in range(n_layers) if (l + 1) % 4 == 0) if arch == "smollm3" else (),
    )


def _read_yarn(reader: GGUFReader, p: str) -> dict | None:
    key = p + "rope.scaling.type"
    if key not in reader.fields or _field(reader, key) != "yarn":
        return None
    def opt(name, default):
        k = p + "rope.scaling." + name
        return float(_field(reader, k)) if k in reader.fields else default
    return dict(factor=float(_field(reader, p + "rope.scaling.factor")),
                original_context=float(_field(reader, p + "rope.scaling.original_context_length")),
                beta_fast=opt("yarn_beta_fast", 32.0), beta_slow=opt("yarn_beta_slow", 1.0),
                attn_factor=opt("attn_factor", 1.0))


def yarn_inv_freq(d: int, base: float, y: dict) -> tuple[np.ndarray, float]:
    """YaRN's per-pair frequencies and the magnitude of its cos and sin."""
    s, length = y["factor"], y["original_context"]
    extrapolation = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    interpolation = extrapolation / s
    def correction_dim(turns):
        return d * math.log(length / (turns * 2 * math.pi)) / (2 * math.log(base))
    low, high = correction_dim(y["beta_fast"]), correction_dim(y["beta_slow"])
    if y.get("truncate", True):  # llama.cpp always, transformers unless the config says "truncate": false
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    keep = 1.0 - ramp  # the share of the original frequency
    magnitude = y["attn_factor"] * (0.1 * math.log(s) + 1.0 if s > 1 else 1.0)
    return interpolation * (1.0 - keep) + extrapolation * keep, magnitude


def _dequant(tensor, dtype) -> np.ndarray:
    # GGUF shape [ne0, ne1] -> numpy [ne1, ne0]; the package already returns
    # this orientation, the reshape only guards 1-D tensors and the check
    # guards our understanding of the layout.
    w = dequantize(tensor.data, tensor.tensor_type).astype(dtype)
    expected = tuple(int(n) for n in reversed(tensor.shape))
    return w.reshape(expected)


class KVCache:
    """Rotated keys and values of every computed position, per layer."""

    def __init__(self, cfg: LlamaConfig, dtype=np.float64):
        empty = np.zeros((cfg.n_kv_heads, 0, cfg.head_dim), dtype=dtype)
        self.k = [empty] * cfg.n_layers  # per layer [n_kv_heads, T, head_dim]
        self.v = [empty] * cfg.n_layers  # per layer [n_kv_heads, T, head_dim]

    @property
    def length(self) -> int:
        return self.k[0].shape[1]


class LlamaRef:
    def __init__(self, cfg: LlamaConfig, weights: dict[str, np.ndarray]):
        self.cfg = cfg
        self.w = weights  # name -> array (float64 unless loaded otherwise), [out_features, in_features] for matrices
        self.dtype = weights["token_embd.weight"].dtype
        # Tied output head: models without output.weight reuse the embedding.
        self.out_head = weights.get("output.weight", weights["token_embd.weight"])  # [vocab, dim]

    # ---- building blocks -------------------------------------------------
    def rmsnorm(self, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        # x: [n, dim]
        ms = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(ms + self.cfg.norm_eps) * weight

    def rope(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Rotate pairs of the first rope_dims dims of every head (adjacent,
        or half a head apart with cfg.rope_half).

        x: [n_heads, n, head_dim]; positions: [n] absolute positions.
        """
        d = self.cfg.rope_dims
        inv_freq = self.cfg.rope_base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # [d/2]
        magnitude = 1.0
        if self.cfg.yarn is not None:
            inv_freq, magnitude = yarn_inv_freq(d, self.cfg.rope_base, self.cfg.yarn)
        if "rope_freqs.weight" in self.w:
            inv_freq = inv_freq / self.w["rope_freqs.weight"].astype(np.float64)
        angle = positions[:, None].astype(np.float64) * inv_freq[None, :]             # [n, d/2]
        cos, sin = (magnitude * np.cos(angle)).astype(x.dtype), (magnitude * np.sin(angle)).astype(x.dtype)
        out = x.copy()
        first, second = (slice(0, d // 2), slice(d // 2, d)) if self.cfg.rope_half else \
            (slice(0, d, 2), slice(1, d, 2))
        a, b = x[..., first], x[..., second]
        out[..., first] = a * cos - b * sin
        out[..., second] = a * sin + b * cos
        return out

    def attention(self, layer: int, h: np.ndarray, positions: np.ndarray, cache: KVCache) -> np.ndarray:
        cfg, w = self.cfg, self.w
        n = h.shape[0]
        pre = f"blk.{layer}."
        # Projections, split into heads: [heads, n, head_dim].
        def project(name, heads):  # with the projection's bias where the model has one (Qwen2)
            y = h @ w[pre + name + ".weight"].T
            if pre + name + ".bias" in w:
                y = y + w[pre + name + ".bias"]
            return y.reshape(n, heads, cfg.head_dim).transpose(1, 0, 2)
        q, k, v = project("attn_q", cfg.n_heads), project("attn_k", cfg.n_kv_heads), project("attn_v", cfg.n_kv_heads)
        if cfg.qk_norm:  # per head, over head_dim
            q = self.rmsnorm(q, w[pre + "attn_q_norm.weight"])
            k = self.rmsnorm(k, w[pre + "attn_k_norm.weight"])
        if layer not in cfg.nope_layers:
            q, k = self.rope(q, positions), self.rope(k, positions)
        cache.k[layer] = np.concatenate([cache.k[layer], k], axis=1)
        cache.v[layer] = np.concatenate([cache.v[layer], v], axis=1)
        keys, vals = cache.k[layer], cache.v[layer]  # [n_kv_heads, T, head_dim]
        # Grouped-query attention: query head h reads kv head h // group.
        group = cfg.n_heads // cfg.n_kv_heads
        keys = np.repeat(keys, group, axis=0)  # [n_heads, T, head_dim]
        vals = np.repeat(vals, group, axis=0)
        scores = q @ keys.transpose(0, 2, 1) / np.sqrt(cfg.head_dim)  # [n_heads, n, T]
        # Causal mask: a query at position p sees keys at positions <= p
        # (and, under a sliding window, > p - window).
        key_pos = np.arange(keys.shape[1])
        seen = key_pos[None, None, :] <= positions[None, :, None]
        if cfg.window > 0:
            seen &= key_pos[None, None, :] > positions[None, :, None] - cfg.window
        scores = np.where(seen, scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        out = (probs @ vals).transpose(1, 0, 2).reshape(n, cfg.n_heads * cfg.head_dim)
        return out @ w[pre + "attn_output.weight"].T

    def router_logits(self, layer: int, h: np.ndarray) -> np.ndarray:
        return h @ self.w[f"blk.{layer}.ffn_gate_inp.weight"].T  # [n, n_experts]

    def expert(self, layer: int, e: int, h: np.ndarray) -> np.ndarray:
        """One expert's SwiGLU MLP of one row."""
        w, pre = self.w, f"blk.{layer}."
        gate = h @ w[pre + "ffn_gate_exps.weight"][e].T
        up = h @ w[pre + "ffn_up_exps.weight"][e].T
        return (gate / (1.0 + np.exp(-gate)) * up) @ w[pre + "ffn_down_exps.weight"][e].T

    def moe(self, layer: int, h: np.ndarray) -> np.ndarray:
        k = self.cfg.n_experts_used
        logits = self.router_logits(layer, h)
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            chosen = np.argsort(-logits[t], kind="stable")[:k]
            weights = np.exp(logits[t, chosen] - logits[t, chosen].max())
            weights /= weights.sum()
            for e, wt in zip(chosen, weights):
                out[t] += wt * self.expert(layer, int(e), h[t])
        return out

    def mlp(self, layer: int, h: np.ndarray) -> np.ndarray:
        if self.cfg.n_experts:
            return self.moe(layer, h)
        w, pre = self.w, f"blk.{layer}."
        gate = h @ w[pre + "ffn_gate.weight"].T
        up = h @ w[pre + "ffn_up.weight"].T
        silu = gate / (1.0 + np.exp(-gate))
        return (silu * up) @ w[pre + "ffn_down.weight"].T

    # ---- public API ------------------------------------------------------
    def new_cache(self) -> KVCache:
        return KVCache(self.cfg, self.dtype)

    def forward(self, token_ids, cache: KVCache, trace: dict | None = None) -> np.ndarray:
        """Logits [n, vocab] for token_ids placed after the cache's tokens.

        With a dict as trace, intermediate activations ([n, dim] each) are
        stored in it under "embd", "blk.{i}.attn" (residual after attention),
        "blk.{i}.out" (residual after the MLP) and "output_norm", so that a
        disagreement with the engine can be located layer by layer.
        """
        record = (lambda key, value: trace.__setitem__(key, value)) if trace is not None else (lambda *_: None)
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("token_ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= self.cfg.vocab:
            raise ValueError(f"token id out of range [0, {self.cfg.vocab})")
        positions = np.arange(cache.length, cache.length + ids.size)
        x = self.w["token_embd.weight"][ids]  # [n, dim]
        record("embd", x)
        for layer in range(self.cfg.n_layers):
            pre = f"blk.{layer}."
            x = x + self.attention(layer, self.rmsnorm(x, self.w[pre + "attn_norm.weight"]), positions, cache)
            record(pre + "attn", x)
            x = x + self.mlp(layer, self.rmsnorm(x, self.w[pre + "ffn_norm.weight"]))
            record(pre + "out", x)
        x = self.rmsnorm(x, self.w["output_norm.weight"])
        record("output_norm", x)
        return x @ self.out_head.T

    def logits(self, token_ids) -> np.ndarray:
        """Logits [n, vocab] of every position of a fresh sequence."""
        return self.forward(token_ids, self.new_cache())

    def greedy(self, prompt_ids, n_new: int) -> tuple[list[int], list[float]]:
        """Greedy continuation and, per generated token, the top-2 logit gap
        that decided it (a small gap means fp32 rounding may flip the choice)."""
        cache = self.new_cache()
        last = self.forward(prompt_ids, cache)[-1]
        ids, gaps = [], []
        for step in range(n_new):
            top2 = np.partition(last, -2)[-2:]
            ids.append(int(np.argmax(last)))
            gaps.append(float(top2[1] - top2[0]))
            if step + 1 < n_new:
                last = self.forward([ids[-1]], cache)[-1]
        return ids, gaps


def top2_gap(logits: np.ndarray) -> np.ndarray:
    """Per row, largest minus second-largest logit. logits: [n, vocab] -> [n]."""
    top2 = np.partition(logits, -2, axis=-1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def load(path: str, dtype=np.float64) -> LlamaRef:
    """dtype float64 is the reference; float32 exists to measure what error
    a plain fp32 implementation of the same math makes (calibrating bounds)."""
    reader = GGUFReader(path)
    cfg = read_config(reader)
    weights = {t.name: _dequant(t, dtype) for t in reader.tensors}
    if _field(reader, "general.architecture") == "phi3":
        weights = _unfuse_phi3(weights, cfg)
    if cfg.n_heads % cfg.n_kv_heads != 0:
        raise ValueError("head_count must be a multiple of head_count_kv")
    return LlamaRef(cfg, weights)


def _unfuse_phi3(w: dict, cfg: LlamaConfig) -> dict:
    """Phi-3's attn_qkv (rows q | k | v) and ffn_up (rows gate | up) as the llama names."""
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    out = {}
    for name, v in w.items():
        if name.endswith("attn_qkv.weight"):
            p = name[:-len("attn_qkv.weight")]
            out[p + "attn_q.weight"], out[p + "attn_k.weight"], out[p + "attn_v.weight"] = v[:q], v[q:q + kv], v[q + kv:]
        elif name.endswith("ffn_up.weight"):
            p = name[:-len("ffn_up.weight")]
            out[p + "ffn_gate.weight"], out[p + "ffn_up.weight"] = v[:cfg.ffn_dim], v[cfg.ffn_dim:]
        else:
            out[name] = v
    return out


def _parse_ids(text: str) -> list[int]:
    return [int(t) for t in text.replace(",", " ").split()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="path to a llama GGUF")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--tokens-file", help="file of comma- or whitespace-separated token ids")
    ap.add_argument("--out", help="write float64 logits [n, vocab] as .npy")
    ap.add_argument("--greedy", type=int, default=0, help="also print N greedy tokens")
    args = ap.parse_args(argv)
    if (args.tokens is None) == (args.tokens_file is None):
        ap.error("give exactly one of --tokens, --tokens-file")
    ids = _parse_ids(args.tokens if args.tokens is not None else open(args.tokens_file).read())
    model = load(args.model)
    logits = model.logits(ids)
    if args.out:
        np.save(args.out, logits)
    print(f"n_tokens={len(ids)} last argmax={int(np.argmax(logits[-1]))} "
          f"min top-2 gap={top2_gap(logits).min():.3g}")
    if args.greedy:
        gen, gaps = model.greedy(ids, args.greedy)
        print("greedy:", ",".join(map(str, gen)))
        print(f"min greedy top-2 gap={min(gaps):.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
