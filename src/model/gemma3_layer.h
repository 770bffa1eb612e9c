// Gemma 3's decoder layer: the llama blocks (attention with per-head q/k
// norms, a gated MLP with GELU's tanh form) between sandwich norms, each
// sub-layer's output normed again before it joins the residual stream.
#pragma once

#include "model/llama_layer.h"

namespace exactly {

// x += post_attn_norm(attention(attn_norm(x))), then
// x += post_ffn_norm(mlp(ffn_norm(x))). kv.window is the layer's sliding
// window (0 on the global layers).
void gemma3_layer(const LlamaLayerWeights& L, const ModelConfig& c, float* x, int64_t n, const LayerBuffers& buf,
                  const LayerKV& kv, ThreadPool& pool);

}  // namespace exactly
