"""Float64 reference forward pass of Gemma 3 (text), written from the
architecture's definition, over weights named as llama.cpp's GGUF files name
them (each RMSNorm's weight holding 1 + w, as its converter stores it):

  x = embed(ids) * embedding_scale
  per layer l (sliding when windows[l] > 0):
    h = rmsnorm(x, attn_norm)
    q, k, v = h Wq, h Wk, h Wv;  q, k = rmsnorm per head (attn_q_norm, attn_k_norm)
    q, k = rope(q, k), pairs half a head apart; base local_base on sliding layers,
           else rope_base with positions / linear_scale
    a = softmax(q k^T * attn_scale + mask) v;  mask: causal, and on sliding
        layers keys older than windows[l] - 1 positions are hidden
    x = x + rmsnorm(a Wo, post_attention_norm)
    h = rmsnorm(x, ffn_norm)
    x = x + rmsnorm((gelu_tanh(h Wgate) * h Wup) Wdown, post_ffw_norm)
  logits = rmsnorm(x, output_norm) E^T, then cap * tanh(logits / cap) with a cap.

Used as `gemma3_ref.load(path)` on a GGUF, or `Gemma3Ref(cfg, weights)`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

import llama_ref


@dataclasses.dataclass(frozen=True)
class Gemma3Config:
    n_layers: int
    dim: int
    ffn_dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rope_base: float
    local_base: float
    norm_eps: float
    vocab: int
    windows: tuple[int, ...]     # per layer: sliding window (0: global)
    attn_scale: float
    embedding_scale: float
    linear_scale: float = 1.0    # global layers' positions divided by this
    softcap: float = 0.0         # final logit soft-capping (0: none)
    activation: str = "gelu_tanh"  # "silu" builds a deliberately wrong model for controls
    sandwich: bool = True          # False: no post-norms, for controls


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    # 0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)): equal, and precise where tanh(u) is near -1
    u = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)
    return x / (1.0 + np.exp(-2.0 * u))


class Gemma3Ref:
    def __init__(self, cfg: Gemma3Config, weights: dict[str, np.ndarray]):
        self.cfg, self.w = cfg, weights

    def rmsnorm(self, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.cfg.norm_eps) * weight

    def rope(self, x: np.ndarray, positions: np.ndarray, sliding: bool) -> np.ndarray:
        d = self.cfg.head_dim
        base = self.cfg.local_base if sliding else self.cfg.rope_base
        scale = 1.0 if sliding else self.cfg.linear_scale
        inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d) / scale
        angle = positions[:, None].astype(np.float64) * inv_freq[None, :]
        cos, sin = np.cos(angle), np.sin(angle)
        a, b = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    def attention(self, layer: int, h: np.ndarray, positions: np.ndarray, cache: dict) -> np.ndarray:
        cfg, w, p = self.cfg, self.w, f"blk.{layer}."
        n, window = h.shape[0], cfg.windows[layer]

        def heads(name, count):
            return (h @ w[p + name + ".weight"].T).reshape(n, count, cfg.head_dim).transpose(1, 0, 2)
        q = self.rmsnorm(heads("attn_q", cfg.n_heads), w[p + "attn_q_norm.weight"])
        k = self.rmsnorm(heads("attn_k", cfg.n_kv_heads), w[p + "attn_k_norm.weight"])
        v = heads("attn_v", cfg.n_kv_heads)
        q, k = self.rope(q, positions, window > 0), self.rope(k, positions, window > 0)
        cache["k"][layer] = np.concatenate([cache["k"][layer], k], axis=1)
        cache["v"][layer] = np.concatenate([cache["v"][layer], v], axis=1)
        group = cfg.n_heads // cfg.n_kv_heads
        keys = np.repeat(cache["k"][layer], group, axis=0)
        vals = np.repeat(cache["v"][layer], group, axis=0)
        scores = q @ keys.transpose(0, 2, 1) * cfg.attn_scale
        key_pos = np.arange(keys.shape[1])[None, None, :]
        seen = key_pos <= positions[None, :, None]
        if window > 0:
            seen &= key_pos > positions[None, :, None] - window
        scores = np.where(seen, scores, -np.inf)
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        out = (probs @ vals).transpose(1, 0, 2).reshape(n, cfg.n_heads * cfg.head_dim)
        return out @ w[p + "attn_output.weight"].T

    def mlp(self, layer: int, h: np.ndarray) -> np.ndarray:
        w, p = self.w, f"blk.{layer}."
        gate, up = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
        act = gelu_tanh(gate) if self.cfg.activation == "gelu_tanh" else gate / (1.0 + np.exp(-gate))
        return (act * up) @ w[p + "ffn_down.weight"].T

    def new_cache(self) -> dict:
        empty = np.zeros((self.cfg.n_kv_heads, 0, self.cfg.head_dim))
        return {"k": [empty] * self.cfg.n_layers, "v": [empty] * self.cfg.n_layers, "length": 0}

    def forward(self, token_ids, cache: dict) -> np.ndarray:
        cfg, w = self.cfg, self.w
        ids = np.asarray(token_ids, dtype=np.int64)
        positions = np.arange(cache["length"], cache["length"] + ids.size)
        cache["length"] += ids.size
        x = w["token_embd.weight"][ids] * cfg.embedding_scale
        post = (lambda y, name: self.rmsnorm(y, w[name])) if cfg.sandwich else (lambda y, name: y)
        for layer in range(cfg.n_layers):
            p = f"blk.{layer}."
            a = self.attention(layer, self.rmsnorm(x, w[p + "attn_norm.weight"]), positions, cache)
            x = x + post(a, p + "post_attention_norm.weight")
            m = self.mlp(layer, self.rmsnorm(x, w[p + "ffn_norm.weight"]))
            x = x + post(m, p + "post_ffw_norm.weight")
        logits = self.rmsnorm(x, w["output_norm.weight"]) @ w.get("output.weight", w["token_embd.weight"]).T
        return cfg.softcap * np.tanh(logits / cfg.softcap) if cfg.softcap > 0 else logits

    def logits(self, token_ids) -> np.ndarray:
        return self.forward(token_ids, self.new_cache())

    greedy = llama_ref.LlamaRef.greedy  # the same rule over this model's forward and cache


def _field(reader: GGUFReader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise KeyError(f"GGUF metadata key {key!r} is missing")
        return default
    return field.contents()


def read_config(reader: GGUFReader) -> Gemma3Config:
    if _field(reader, "general.architecture") != "gemma3":
        raise ValueError("not a gemma3 file")
    p = "gemma3."
    n_layers = int(_field(reader, p + "block_count"))
    dim, n_heads = int(_field(reader, p + "embedding_length")), int(_field(reader, p + "attention.head_count"))
    head_dim = int(_field(reader, p + "attention.key_length"))
    window = int(_field(reader, p + "attention.sliding_window"))
    pattern = int(_field(reader, p + "attention.sliding_window_pattern", 6))
    linear = _field(reader, p + "rope.scaling.type", "none") == "linear"
    return Gemma3Config(
        n_layers=n_layers, dim=dim, ffn_dim=int(_field(reader, p + "feed_forward_length")), n_heads=n_heads,
        n_kv_heads=int(_field(reader, p + "attention.head_count_kv")), head_dim=head_dim,
        rope_base=float(_field(reader, p + "rope.freq_base")),
        local_base=float(_field(reader, p + "rope.freq_base_swa", 10000.0)),
        norm_eps=float(_field(reader, p + "attention.layer_norm_rms_epsilon")),
        vocab=len(_field(reader, "tokenizer.ggml.tokens")),
        windows=tuple(window if (i + 1) % pattern else 0 for i in range(n_layers)),
        attn_scale=(dim // n_heads if n_layers == 62 else head_dim) ** -0.5,
        embedding_scale=float(np.float32(np.sqrt(np.float32(dim)))),
        linear_scale=float(_field(reader, p + "rope.scaling.factor")) if linear else 1.0,
        softcap=float(_field(reader, p + "final_logit_softcapping", 0.0)),
    )


def load(path: str) -> Gemma3Ref:
    reader = GGUFReader(path)
    weights = {}
    for t in reader.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        weights[t.name] = a.reshape(tuple(int(n) for n in reversed(t.shape)))
    return Gemma3Ref(read_config(reader), weights)
