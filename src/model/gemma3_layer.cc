#include "model/gemma3_layer.h"

namespace exactly {

void gemma3_layer(const LlamaLayerWeights& L, const ModelConfig& c, float* x, int64_t n, const LayerBuffers& b,
                  const LayerKV& kv, ThreadPool& pool) {
  kernels::rmsnorm(x, L.attn_norm, n, c.dim, c.rms_eps, b.h);
  attention_block(L, c, n, b, kv, pool);
  sum_over_ranks(b, n, c);  // the post-norm needs the whole block output
  kernels::rmsnorm(b.proj, L.post_attn_norm, n, c.dim, c.rms_eps, b.proj);
  kernels::add_inplace(x, b.proj, n * c.dim);

  kernels::rmsnorm(x, L.ffn_norm, n, c.dim, c.rms_eps, b.h);
  mlp_block(L, c, n, b, pool);
  sum_over_ranks(b, n, c);
  kernels::rmsnorm(b.proj, L.post_ffn_norm, n, c.dim, c.rms_eps, b.proj);
  kernels::add_inplace(x, b.proj, n * c.dim);
}

}  // namespace exactly
