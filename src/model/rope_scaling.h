// RoPE scalings that change each pair's frequency (ModelConfig::rope_yarn):
// the divisors rope_angles applies, computed once per model.
#pragma once

#include <vector>

#include "model/config.h"

namespace exactly {

// 0.1 ln(factor) + 1 for factor > 1, else 1: YaRN's default magnitude of the
// cosines and sines (the paper's sqrt(1/t)).
double yarn_default_attention_factor(double factor);

// Pair i's frequency divisor under c.rope_yarn ([rope_dims / 2]): the
// original frequency base^(-2i/d) over it is the YaRN frequency.
std::vector<float> yarn_frequency_divisors(const ModelConfig& c);

}  // namespace exactly
