// CudaLlamaModel: the target on the GPU; its loaders are in
// llama_cuda_weights.cc and llama_cuda_hf.cc, what it shares with a draft
// head in cuda_model.cc.
#include "model/cuda/llama_cuda.h"

namespace exactly {

bool CudaLlamaModel::samples_rows() const { return runner_->samples_rows(); }

int64_t CudaLlamaModel::verified_draft_entries() const { return runner_->verified_draft_entries(); }

}  // namespace exactly
