#include "model/cuda/draft_head_cuda.h"

#include "core/error.h"
#include "core/format.h"
#include "loader/gguf.h"
#include "model/cuda/llama_cuda.h"
#include "model/cuda/llama_cuda_layers.h"
#include "model/cuda/weight_layout.h"
#include "model/cuda/weight_upload.h"
#include "model/draft_head_file.h"

namespace exactly {

std::unique_ptr<CudaDraftHead> CudaDraftHead::load(const std::string& path, const CudaLlamaModel& target) {
  const std::unique_ptr<GGUFFile> file = GGUFFile::open(path);
  const DraftHeadFile read = DraftHeadFile::read(*file, target.config());
  if (!read.config.output_token_ids.empty())
    throw Error(strformat("%s: a head over some of the tokens (exactly.output_token_ids) runs on the CPU only",
                          path.c_str()),
                ExitCode::kUsage);
  std::unique_ptr<CudaDraftHead> head(new CudaDraftHead(read.config, target.options()));
  const ModelConfig& c = head->config_;
  const WeightLayout layout = WeightLayout::draft_head(c);
  WeightUploader put(head->layers_->allocate_weights(layout));
  put.matrices(layout.fc, {read.fc});
  put.vector(layout.output_norm, read.norm, c.dim);
  upload_layer(put, layout.layers.front(), read.layer, c);
  head->layers_->borrow_vocab_tables(target.layers());
  return head;
}

}  // namespace exactly
