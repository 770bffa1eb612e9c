// Random inputs for the kernel tests: activations and weight matrices in every
// stored type, with scales in a realistic range so that no value overflows.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/ggml_types.h"
#include "core/half.h"
#include "kernels/ops.h"

namespace exactly::testing {

inline std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// Owns the bytes of a random weight matrix.
struct RandomWeights {
  std::vector<uint8_t> bytes;  // [rows, row_bytes(cols)]
  kernels::WeightMatrix matrix;
};

inline void put_half(uint8_t* p, float f) {
  const uint16_t h = float_to_half(f);
  std::memcpy(p, &h, sizeof h);
}

inline RandomWeights random_weights(std::mt19937& rng, GGMLType type, int64_t rows, int64_t cols) {
  RandomWeights w;
  const int64_t row_bytes = ggml_row_bytes(type, cols);
  w.bytes.resize(static_cast<size_t>(rows * row_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : w.bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  const auto& t = ggml_traits(type);
  const int64_t n_blocks = rows * cols / t.block_elems;
  uint8_t* p = w.bytes.data();
  switch (type) {
    case GGMLType::F32:
      for (int64_t i = 0; i < rows * cols; ++i) {
        const float f = scale(rng) * (byte(rng) < 128 ? -10.0f : 10.0f);
        std::memcpy(p + 4 * i, &f, 4);
      }
      break;
    case GGMLType::F16:
      for (int64_t i = 0; i < rows * cols; ++i) put_half(p + 2 * i, scale(rng) * (byte(rng) < 128 ? -10.0f : 10.0f));
      break;
    case GGMLType::BF16:
      for (int64_t i = 0; i < rows * cols; ++i) {
        const uint16_t h = float_to_bf16(scale(rng) * (byte(rng) < 128 ? -10.0f : 10.0f));
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    default:
      for (int64_t i = 0; i < n_blocks; ++i) {
        uint8_t* b = p + i * t.block_bytes;
        switch (type) {
          case GGMLType::Q4_1:
            put_half(b, scale(rng));
            put_half(b + 2, -8.0f * scale(rng));
            break;
          case GGMLType::Q4_K:
          case GGMLType::Q5_K:
            put_half(b, scale(rng) / 16.0f);
            put_half(b + 2, scale(rng) / 16.0f);
            break;
          case GGMLType::Q6_K: put_half(b + offsetof(BlockQ6_K, d), scale(rng) / 32.0f); break;
          default: put_half(b, scale(rng)); break;  // Q4_0, Q8_0: d first
        }
      }
  }
  w.matrix = {type, w.bytes.data(), rows, cols};
  return w;
}

inline std::vector<float> dequantized_row(const kernels::WeightMatrix& w, int64_t r) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * ggml_row_bytes(w.type, w.cols), row.data(),
                 w.cols);
  return row;
}

}  // namespace exactly::testing
