#include "model/hf_experts.h"

#include <cstring>

#include "core/error.h"
#include "core/ggml_types.h"

namespace exactly {
namespace {

GGMLType ggml_type(SafetensorsDType d) {
  return d == SafetensorsDType::F32 ? GGMLType::F32 : d == SafetensorsDType::F16 ? GGMLType::F16 : GGMLType::BF16;
}

// Output columns first, first + step, ... (`count` of them) of expert e's
// [in, out] matrix, as rows of `in` values.
std::vector<uint8_t> transposed_columns(const SafetensorsTensor& t, int64_t e, int64_t in, int64_t out, int64_t first,
                                        int64_t step, int64_t count) {
  const auto size = static_cast<size_t>(safetensors_dtype_size(t.dtype));
  std::vector<uint8_t> rows(static_cast<size_t>(count * in) * size);
  const uint8_t* src = t.data + static_cast<size_t>(e * in * out) * size;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t col = first + r * step;
    for (int64_t i = 0; i < in; ++i)
      std::memcpy(rows.data() + static_cast<size_t>(r * in + i) * size, src + static_cast<size_t>(i * out + col) * size,
                  size);
  }
  return rows;
}

// Rows first, first + step, ... of expert e's MXFP4 [out, in] matrix as
// BlockMXFP4 rows: element i of a block sits in byte i / 2 of the checkpoint's
// block (low nibble for even i), and in byte i % 16 of GGUF's (low nibble for
// i < 16).
std::vector<uint8_t> mxfp4_rows(const SafetensorsTensor& blocks, const SafetensorsTensor& scales, int64_t e,
                                int64_t out, int64_t in, int64_t first, int64_t step, int64_t count) {
  const int64_t per_row = in / kQK;
  std::vector<uint8_t> rows(static_cast<size_t>(count * per_row) * sizeof(BlockMXFP4));
  auto* dst = reinterpret_cast<BlockMXFP4*>(rows.data());
  for (int64_t r = 0; r < count; ++r) {
    const int64_t row = e * out + first + r * step;
    for (int64_t k = 0; k < per_row; ++k) {
      const uint8_t* q = blocks.data + static_cast<size_t>((row * per_row + k) * (kQK / 2));
      auto nibble = [q](int i) { return static_cast<uint8_t>(i % 2 ? q[i / 2] >> 4 : q[i / 2] & 15); };
      BlockMXFP4& b = dst[r * per_row + k];
      b.e = scales.data[row * per_row + k];
      for (int j = 0; j < kQK / 2; ++j) b.qs[j] = static_cast<uint8_t>(nibble(j) | nibble(j + kQK / 2) << 4);
    }
  }
  return rows;
}

// Entries first, first + step, ... (`count`) of row e of a [n, width] table.
std::vector<float> bias_entries(const std::vector<float>& table, int64_t e, int64_t width, int64_t first, int64_t step,
                                int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = table[static_cast<size_t>(e * width + first + i * step)];
  return out;
}

}  // namespace

std::vector<ExpertWeights> convert_fused_experts(const HfFusedExperts& f, const ModelConfig& c, HfExpertStore& store) {
  const int64_t dim = c.dim, ffn = c.expert_ffn_dim;
  auto keep = [&](std::vector<uint8_t> bytes) { return store.matrices.emplace_back(std::move(bytes)).data(); };
  auto keep_bias = [&](std::vector<float> v) { return store.biases.emplace_back(std::move(v)).data(); };
  std::vector<float> gate_up_bias, down_bias;
  append_as_f32(*f.gate_up_bias, gate_up_bias);
  append_as_f32(*f.down_bias, down_bias);
  std::vector<ExpertWeights> experts;
  for (int64_t e = 0; e < c.n_experts; ++e) {
    ExpertWeights x;
    if (f.mxfp4()) {  // gate: even outputs, up: odd ones
      x.gate = {GGMLType::MXFP4, keep(mxfp4_rows(*f.gate_up_blocks, *f.gate_up_scales, e, 2 * ffn, dim, 0, 2, ffn)),
                ffn, dim};
      x.up = {GGMLType::MXFP4, keep(mxfp4_rows(*f.gate_up_blocks, *f.gate_up_scales, e, 2 * ffn, dim, 1, 2, ffn)),
              ffn, dim};
      x.down = {GGMLType::MXFP4, keep(mxfp4_rows(*f.down_blocks, *f.down_scales, e, dim, ffn, 0, 1, dim)), dim, ffn};
    } else {
      x.gate = {ggml_type(f.gate_up->dtype), keep(transposed_columns(*f.gate_up, e, dim, 2 * ffn, 0, 2, ffn)), ffn, dim};
      x.up = {ggml_type(f.gate_up->dtype), keep(transposed_columns(*f.gate_up, e, dim, 2 * ffn, 1, 2, ffn)), ffn, dim};
      x.down = {ggml_type(f.down->dtype), keep(transposed_columns(*f.down, e, ffn, dim, 0, 1, dim)), dim, ffn};
    }
    x.gate_bias = keep_bias(bias_entries(gate_up_bias, e, 2 * ffn, 0, 2, ffn));
    x.up_bias = keep_bias(bias_entries(gate_up_bias, e, 2 * ffn, 1, 2, ffn));
    x.down_bias = keep_bias(bias_entries(down_bias, e, dim, 0, 1, dim));
    experts.push_back(x);
  }
  return experts;
}

}  // namespace exactly
