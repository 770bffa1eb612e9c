// The tensor storage types of the GGUF format: ids, block geometry and the
// exact byte layout of each quantised block. Both the loader (validation,
// dequantisation) and the CPU kernels (dequantisation fused into matmul) read
// these, so they live in core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace exactly {

// Numeric ids as stored in GGUF tensor infos.
enum class GGMLType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
  MXFP4 = 39,
};

struct GGMLTypeTraits {
  std::string_view name;
  int64_t block_elems;  // elements per block (1 for float types)
  int64_t block_bytes;  // bytes per block
  bool supported;       // whether this engine can compute with it
};

// Traits of a type id read from a file; nullopt for ids we do not know at all.
std::optional<GGMLTypeTraits> ggml_type_traits(uint32_t type_id);
const GGMLTypeTraits& ggml_traits(GGMLType type);  // type must be known
std::string_view ggml_type_name(GGMLType type);

// Bytes occupied by one row of `n` elements; n must be a multiple of the block size.
inline int64_t ggml_row_bytes(GGMLType type, int64_t n) {
  const auto& t = ggml_traits(type);
  return n / t.block_elems * t.block_bytes;
}

constexpr int kQK = 32;     // elements per block of the 32-element formats
constexpr int kQK_K = 256;  // elements per super-block of the K formats
constexpr int kKScaleBytes = 12;

#pragma pack(push, 1)
struct BlockQ4_0 {  // x = (q - 8) * d
  uint16_t d;                 // fp16 scale
  uint8_t qs[kQK / 2];        // element j in low nibble of qs[j], element j+16 in high nibble
};
struct BlockQ4_1 {  // x = q * d + m
  uint16_t d;                 // fp16 scale
  uint16_t m;                 // fp16 minimum
  uint8_t qs[kQK / 2];        // same nibble order as Q4_0
};
struct BlockQ8_0 {  // x = q * d
  uint16_t d;                 // fp16 scale
  int8_t qs[kQK];
};
struct BlockQ4_K {  // 8 sub-blocks of 32: x = d*sc*q - dmin*m
  uint16_t d;                 // fp16 super-block scale for the 6-bit scales
  uint16_t dmin;              // fp16 super-block scale for the 6-bit mins
  uint8_t scales[kKScaleBytes];  // 8 scales and 8 mins, 6 bits each, packed
  uint8_t qs[kQK_K / 2];      // 4-bit quants
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];      // high (5th) bits
  uint8_t qs[kQK_K / 2];      // low 4 bits
};
struct BlockQ6_K {  // 16 sub-blocks of 16: x = d * scale * (q - 32)
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit sub-block scales
  uint16_t d;                 // fp16 super-block scale
};
struct BlockMXFP4 {  // x = kMxfp4Values[q] * 2^(e - 128): OCP microscaling FP4 (E2M1) with an E8M0 scale
  uint8_t e;                  // the shared exponent
  uint8_t qs[kQK / 2];        // same nibble order as Q4_0
};
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockMXFP4) == 17);

// The E2M1 values of MXFP4's nibbles, doubled so that they are integers (the
// scale is halved to match): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// Half of the E8M0 scale 2^(e - 127), exactly: 2^(e - 128) as an fp32 bit
// pattern (subnormal for e < 2).
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

// Scalar reference dequantisation of `n` elements (a multiple of the block
// size) starting at `src`. This is the definition the SIMD kernels are tested
// against; it follows the format exactly, with fp32 arithmetic in the same
// order as the reference implementation of the format.
void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n);

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block.
inline void k_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace exactly
