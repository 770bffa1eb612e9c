// AVX2 decoders of the stored weight types: each turns one group of 32
// consecutive elements of a row into four 8-lane fp32 vectors (elements
// 0-7, 8-15, 16-23, 24-31).
//
// The values are bit-identical to exactly::dequantize_row: for Q4_0, Q4_1 and
// Q8_0 the product q * d of a small integer and an fp16 scale is exact in
// fp32, so fma(q, d, m) rounds once exactly like q * d + m does; F16 and BF16
// widen exactly. The tests check this equality directly.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/ggml_types.h"
#include "kernels/cpu/simd.h"

#if EXACTLY_KERNELS_AVX2
namespace exactly::kernels::cpu {

constexpr int kGroup = 32;  // elements per decoded group

inline __m128i load_8_bytes(const void* p) { return _mm_loadl_epi64(static_cast<const __m128i*>(p)); }

// [d, m, 0, 0] from two consecutive fp16 values.
inline __m128 load_two_halves(const void* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
}

struct DecodeQ4_1 {
  static constexpr GGMLType kType = GGMLType::Q4_1;
  static constexpr int64_t kGroupBytes = sizeof(BlockQ4_1);
  static void decode(const uint8_t* group, __m256* w) {  // w: [4] x 8 lanes
    const auto* b = reinterpret_cast<const BlockQ4_1*>(group);
    const __m128 dm = load_two_halves(&b->d);
    const __m256 d = _mm256_broadcastss_ps(dm);
    const __m256 m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
    // Byte j holds element j (low nibble) and element j+16 (high nibble);
    // widening bytes to 32 bits lets one shift extract the high nibble.
    const __m256i lo = _mm256_cvtepu8_epi32(load_8_bytes(b->qs));
    const __m256i hi = _mm256_cvtepu8_epi32(load_8_bytes(b->qs + 8));
    const __m256i nibble = _mm256_set1_epi32(0xF);
    w[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(lo, nibble)), d, m);
    w[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(hi, nibble)), d, m);
    w[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(lo, 4)), d, m);
    w[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(hi, 4)), d, m);
  }
};

struct DecodeQ4_0 {
  static constexpr GGMLType kType = GGMLType::Q4_0;
  static constexpr int64_t kGroupBytes = sizeof(BlockQ4_0);
  static void decode(const uint8_t* group, __m256* w) {  // w: [4] x 8 lanes
    const auto* b = reinterpret_cast<const BlockQ4_0*>(group);
    const __m256 d = _mm256_broadcastss_ps(load_two_halves(&b->d));  // lane 1 is garbage, unused
    const __m256i lo = _mm256_cvtepu8_epi32(load_8_bytes(b->qs));
    const __m256i hi = _mm256_cvtepu8_epi32(load_8_bytes(b->qs + 8));
    const __m256i nibble = _mm256_set1_epi32(0xF);
    const __m256i eight = _mm256_set1_epi32(8);
    auto scale = [&](__m256i q) { return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, eight)), d); };
    w[0] = scale(_mm256_and_si256(lo, nibble));
    w[1] = scale(_mm256_and_si256(hi, nibble));
    w[2] = scale(_mm256_srli_epi32(lo, 4));
    w[3] = scale(_mm256_srli_epi32(hi, 4));
  }
};

struct DecodeQ8_0 {
  static constexpr GGMLType kType = GGMLType::Q8_0;
  static constexpr int64_t kGroupBytes = sizeof(BlockQ8_0);
  static void decode(const uint8_t* group, __m256* w) {  // w: [4] x 8 lanes
    const auto* b = reinterpret_cast<const BlockQ8_0*>(group);
    const __m256 d = _mm256_broadcastss_ps(load_two_halves(&b->d));
    for (int j = 0; j < 4; ++j)
      w[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load_8_bytes(b->qs + 8 * j))), d);
  }
};

struct DecodeF32 {
  static constexpr GGMLType kType = GGMLType::F32;
  static constexpr int64_t kGroupBytes = kGroup * 4;
  static void decode(const uint8_t* group, __m256* w) {  // w: [4] x 8 lanes
    const auto* f = reinterpret_cast<const float*>(group);
    for (int j = 0; j < 4; ++j) w[j] = _mm256_loadu_ps(f + 8 * j);
  }
};

struct DecodeF16 {
  static constexpr GGMLType kType = GGMLType::F16;
  static constexpr int64_t kGroupBytes = kGroup * 2;
  static void decode(const uint8_t* group, __m256* w) {  // w: [4] x 8 lanes
    for (int j = 0; j < 4; ++j)
      w[j] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 16 * j)));
  }
};

struct DecodeBF16 {
  static constexpr GGMLType kType = GGMLType::BF16;
  static constexpr int64_t kGroupBytes = kGroup * 2;
  static void decode(const uint8_t* group, __m256* w) {  // w: [4] x 8 lanes
    for (int j = 0; j < 4; ++j) {
      const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 16 * j)));
      w[j] = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
  }
};

}  // namespace exactly::kernels::cpu
#endif
