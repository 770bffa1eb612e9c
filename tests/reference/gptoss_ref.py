"""Float64 reference forward pass of gpt-oss, written from the architecture's
definition, over weights named as llama.cpp's GGUF files name them:

  per layer l (sliding when windows[l] > 0: a query sees the last windows[l]
  keys, itself included; the even layers of gpt-oss):
    h = rmsnorm(x, attn_norm)
    q, k, v = h Wq + bq, h Wk + bk, h Wv + bv
    q, k = rope(q, k), pairs half a head apart (YaRN as llama_ref computes it)
    a_h = softmax([q k^T / sqrt(head_dim) + mask, sink_h]) without the sink's
          column, times v: each head's learned sink logit joins the
          denominator and carries no value
    x = x + a Wo + bo
    h = rmsnorm(x, post_attention_norm)
    router = h Wr + br; the 4 (k) largest, weighted by the softmax of those k
    expert e: g = min(h Wg_e + bg_e, limit), u = clamp(h Wu_e + bu_e, +-limit)
              y_e = ((u + 1) g sigmoid(alpha g)) Wd_e + bd_e
    x = x + sum of weight_e y_e
  logits = rmsnorm(x, output_norm) Wout^T

Used as `gptoss_ref.load(path)`; `GptOssRef(cfg, weights)` with a changed
config builds the deliberately wrong models of the tests' controls.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from gguf import GGUFReader

import llama_ref


@dataclasses.dataclass(frozen=True)
class GptOssConfig(llama_ref.LlamaConfig):
    windows: tuple[int, ...] = ()  # per layer: sliding window (0: global)
    sinks: bool = True             # False: no sinks, for controls
    alpha: float = 1.702
    limit: float = 7.0             # inf: no clamps, for controls
    activation: str = "clamped"    # "silu" builds plain SwiGLU for controls


def read_config(reader: GGUFReader) -> GptOssConfig:
    if llama_ref._field(reader, "general.architecture") != "gpt-oss":
        raise ValueError("general.architecture is not 'gpt-oss'")
    p = "gpt-oss."
    f = lambda key: llama_ref._field(reader, p + key)  # noqa: E731
    n_layers, window = int(f("block_count")), int(f("attention.sliding_window"))
    return GptOssConfig(
        n_layers=n_layers, dim=int(f("embedding_length")), ffn_dim=int(f("expert_feed_forward_length")),
        n_heads=int(f("attention.head_count")), n_kv_heads=int(f("attention.head_count_kv")),
        head_dim=int(f("attention.key_length")), rope_base=float(f("rope.freq_base")),
        rope_dims=int(f("attention.key_length")), norm_eps=float(f("attention.layer_norm_rms_epsilon")),
        vocab=len(llama_ref._field(reader, "tokenizer.ggml.tokens")), rope_half=True,
        n_experts=int(f("expert_count")), n_experts_used=int(f("expert_used_count")),
        yarn=llama_ref._read_yarn(reader, p),
        windows=tuple(window if layer % 2 == 0 else 0 for layer in range(n_layers)))


class GptOssRef(llama_ref.LlamaRef):
    def attention(self, layer: int, h: np.ndarray, positions: np.ndarray, cache: llama_ref.KVCache) -> np.ndarray:
        cfg, w, pre = self.cfg, self.w, f"blk.{layer}."
        n = h.shape[0]

        def project(name, heads):
            y = h @ w[pre + name + ".weight"].T + w[pre + name + ".bias"]
            return y.reshape(n, heads, cfg.head_dim).transpose(1, 0, 2)

        q, k, v = project("attn_q", cfg.n_heads), project("attn_k", cfg.n_kv_heads), project("attn_v", cfg.n_kv_heads)
        q, k = self.rope(q, positions), self.rope(k, positions)
        cache.k[layer] = np.concatenate([cache.k[layer], k], axis=1)
        cache.v[layer] = np.concatenate([cache.v[layer], v], axis=1)
        group = cfg.n_heads // cfg.n_kv_heads
        keys = np.repeat(cache.k[layer], group, axis=0)
        vals = np.repeat(cache.v[layer], group, axis=0)
        scores = q @ keys.transpose(0, 2, 1) / np.sqrt(cfg.head_dim)  # [n_heads, n, T]
        key_pos = np.arange(keys.shape[1])[None, None, :]
        seen = key_pos <= positions[None, :, None]
        if cfg.windows[layer] > 0:
            seen &= key_pos > positions[None, :, None] - cfg.windows[layer]
        scores = np.where(seen, scores, -np.inf)
        if cfg.sinks:
            sink = np.broadcast_to(w[pre + "attn_sinks.weight"][:, None, None], (cfg.n_heads, n, 1))
        else:
            sink = np.full((cfg.n_heads, n, 1), -np.inf)
        both = np.concatenate([scores, sink], axis=-1)
        both = np.exp(both - both.max(axis=-1, keepdims=True))
        probs = both[..., :-1] / both.sum(axis=-1, keepdims=True)
        out = (probs @ vals).transpose(1, 0, 2).reshape(n, cfg.n_heads * cfg.head_dim)
        return out @ w[pre + "attn_output.weight"].T + w[pre + "attn_output.bias"]

    def expert(self, layer: int, e: int, h: np.ndarray) -> np.ndarray:
        """One expert of one row: its biases and the clamped SwiGLU."""
        cfg, w, pre = self.cfg, self.w, f"blk.{layer}."
        gate = h @ w[pre + "ffn_gate_exps.weight"][e].T + w[pre + "ffn_gate_exps.bias"][e]
        up = h @ w[pre + "ffn_up_exps.weight"][e].T + w[pre + "ffn_up_exps.bias"][e]
        if cfg.activation == "silu":
            act = gate / (1.0 + np.exp(-gate)) * up
        else:
            gate, up = np.minimum(gate, cfg.limit), np.clip(up, -cfg.limit, cfg.limit)
            act = (up + 1.0) * gate / (1.0 + np.exp(-cfg.alpha * gate))
        return act @ w[pre + "ffn_down_exps.weight"][e].T + w[pre + "ffn_down_exps.bias"][e]

    def router_logits(self, layer: int, h: np.ndarray) -> np.ndarray:
        return super().router_logits(layer, h) + self.w[f"blk.{layer}.ffn_gate_inp.bias"]


def load(path: str) -> GptOssRef:
    reader = GGUFReader(path)
    cfg = read_config(reader)
    weights = {t.name: llama_ref._dequant(t, np.float64) for t in reader.tensors}
    for layer in range(cfg.n_layers):  # the norm before the MLP, under the name LlamaRef.forward reads
        weights[f"blk.{layer}.ffn_norm.weight"] = weights[f"blk.{layer}.post_attention_norm.weight"]
    return GptOssRef(cfg, weights)
