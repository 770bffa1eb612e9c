// gpt-oss's fused Hugging Face experts (HfFusedExperts, model/hf_weights.h)
// as one gate, up and down matrix per expert with their biases, in memory the
// caller keeps: float stacks transposed into rows of outputs in their own
// dtype (values copied, never rounded), MXFP4 blocks repacked into GGUF's
// block layout (kernels' BlockMXFP4) with their scales unchanged.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/hf_weights.h"
#include "model/moe_mlp.h"

namespace exactly {

// Owns the converted matrices and biases that the returned weights point into.
struct HfExpertStore {
  std::vector<std::vector<uint8_t>> matrices;
  std::vector<std::vector<float>> biases;
};

std::vector<ExpertWeights> convert_fused_experts(const HfFusedExperts& f, const ModelConfig& c, HfExpertStore& store);

}  // namespace exactly
