// A draft head on the GPU (`--spec head:PATH` with --device cuda): the math
// of model/draft_head.h, run by the GPU model's pieces. Its layers are a
// one-layer CudaLlamaLayers whose input is fc · [embed(x_s); h_{s-1}] and
// whose token embedding and output head are its target's (borrowed, not
// copied), driven by a CudaRunner of its own, which uploads each pass's
// hidden states beside its tokens (graph steps included). Weights are bf16,
// as the target's; the hidden states it reads and returns are bf16 values.
#pragma once

#include <memory>
#include <string>

#include "model/cuda/cuda_model.h"

namespace exactly {

class CudaLlamaModel;

class CudaDraftHead final : public CudaModel {
 public:
  // Reads and checks the file as the CPU head does (model/draft_head_file.h:
  // FileFormatError, exit code 2, naming what is wrong) and uploads it. A
  // partial head (exactly.output_token_ids) runs on the CPU only (a usage
  // error here).
  // batch.input.hidden_in ([n_tokens, dim]) holds each token's h_{s-1};
  // hidden() returns g_s of batch.input.hidden_rows.
  static std::unique_ptr<CudaDraftHead> load(const std::string& path, const CudaLlamaModel& target);
  std::string memory_report() const override { return "draft head: " + CudaModel::memory_report(); }

 private:
  using CudaModel::CudaModel;
};

}  // namespace exactly
