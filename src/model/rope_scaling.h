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

// The same under c.rope_llama3: the values llama.cpp's converter writes to
// rope_freqs.weight for such a checkpoint.
std::vector<float> llama3_frequency_divisors(const ModelConfig& c);

// What divides each pair's frequency in the global layers ([rope_dims / 2];
// empty: nothing): YaRN's divisors, or llama3's, or the file's
// rope_freqs.weight (`file_factors`, null when it has none), times a linear
// scaling's factor. The CPU and GPU models both rotate by these. Throws
// FileFormatError for YaRN together with other scalings or local bases.
std::vector<float> global_rope_divisors(const ModelConfig& c, const float* file_factors);

// What multiplies every cosine and sine of the global layers' angles: YaRN's
// attention factor, else 1.
float global_rope_magnitude(const ModelConfig& c);

}  // namespace exactly
