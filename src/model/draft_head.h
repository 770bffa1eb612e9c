// A draft head (`--spec head:PATH`, EAGLE family): a small network attached
// to a target model that drafts tokens from the target's hidden states.
//
// Position s of a sequence reads its token x_s and the hidden state h_{s-1}
// the target computed at position s - 1 (a zero vector at s = 0), the vector
// the target's output head multiplies (Model::hidden()):
//   g_s = norm(layer(fc · [embed(x_s); h_{s-1}]))
//   logits of x_{s+1} = head · g_s
// `embed` and `head` are the target's token embedding and output head (or
// the rows of its head listed in exactly.output_token_ids), `layer` one llama
// decoder layer with a KV cache of its own, `norm` the head's RMSNorm. While
// drafting, g_s stands in for the target's h_s at the next position. Each
// position depends on the tokens up to it and no further, as in the target,
// so the head's cache takes prefix caching over the request's own tokens.
//
// The file and its checks: model/draft_head_file.h. This is the CPU head;
// model/cuda/draft_head_cuda.h is the GPU's, the same math.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "loader/gguf.h"
#include "model/kv_storage.h"
#include "model/llama.h"
#include "model/model.h"

namespace exactly {

class DraftHead final : public Model {
 public:
  // Reads and checks the file against the target. Throws FileFormatError
  // (exit code 2) naming the file and what is wrong: an unreadable or
  // truncated file, a missing or unexpected tensor, a wrong shape or type, a
  // hidden size or vocabulary other than the target's.
  static std::unique_ptr<DraftHead> load(const std::string& path, const LlamaModel& target);

  const ModelConfig& config() const override { return config_; }
  const char* device() const override { return "cpu"; }
  int64_t weight_bytes() const override;
  int64_t kv_bytes_per_slot() const override { return KVStorage::bytes_per_slot(config_); }
  void reserve(const ModelLimits&) override {}
  int64_t default_kv_cache_memory(double) const override { return int64_t{256} << 20; }
  std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) override;

  // batch.input.hidden_in ([n_tokens, dim]) holds each token's h_{s-1}; hidden()
  // returns g_s of batch.input.hidden_rows.
  void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers = -1,
               int32_t* argmax = nullptr) override;
  bool returns_hidden() const override { return true; }
  std::span<const float> hidden() const override { return {hidden_out_.data(), hidden_size_}; }

 private:
  DraftHead(std::unique_ptr<GGUFFile> file, const LlamaModel& target);
  void ensure_scratch(int64_t n);

  std::unique_ptr<GGUFFile> file_;  // the weights point into its mapping
  ModelConfig config_;              // one layer; dim and vocabulary the target's
  const LlamaWeights& target_;      // its token_embd and output
  kernels::WeightMatrix fc_;        // [dim, 2 * dim]
  LlamaLayerWeights layer_;
  const float* norm_;               // [dim]
  kernels::WeightMatrix head_;      // [vocab or output_token_ids.size(), dim]
  std::vector<uint8_t> head_rows_;  // a partial head's rows, copied from the target's head
  AlignedVector<float> cat_;        // [n_tokens, 2 * dim] [embed(x_s); h_{s-1}]
  AlignedVector<float> emb_;        // [n_tokens, dim]
  AlignedVector<float> x_, h_, q_, k_, v_, attn_, proj_, gate_, up_;  // as LlamaModel's
  AlignedVector<float> rope_cos_, rope_sin_;
  AlignedVector<float> last_;        // [n_logits, dim]
  AlignedVector<float> part_;        // [n_logits, output_token_ids.size()]
  AlignedVector<float> hidden_out_;  // [hidden_rows, dim]
  size_t hidden_size_ = 0;
};

}  // namespace exactly
