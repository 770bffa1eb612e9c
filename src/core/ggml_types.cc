#include "core/ggml_types.h"

#include <array>

#include "core/check.h"
#include "core/half.h"

namespace exactly {

namespace {

struct Entry {
  uint32_t id;
  GGMLTypeTraits traits;
};

// The K-quant and legacy types we can read; others are known by name so that
// errors can say "unsupported type Q2_K" rather than "unknown type 10".
constexpr std::array<Entry, 16> kTypes = {{
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},
    {6, {"Q5_0", 32, 22, false}},
    {7, {"Q5_1", 32, 24, false}},
    {8, {"Q8_0", 32, 34, true}},
    {9, {"Q8_1", 32, 36, false}},
    {10, {"Q2_K", 256, 84, false}},
    {11, {"Q3_K", 256, 110, false}},
    {12, {"Q4_K", 256, 144, true}},
    {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},
    {15, {"Q8_K", 256, 292, false}},
    {30, {"BF16", 1, 2, true}},
    {39, {"MXFP4", 32, 17, true}},
}};

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = half_to_float(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = half_to_float(b[i].d);
    const float m = half_to_float(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0xF) * d + m;
      y[j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = half_to_float(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequant_mxfp4(const BlockMXFP4* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = mxfp4_half_scale(b[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[b[i].qs[j] & 0xF]) * d;
      y[j + kQK / 2] = static_cast<float>(kMxfp4Values[b[i].qs[j] >> 4]) * d;
    }
  }
}

void dequant_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = half_to_float(b[i].d);
    const float dmin = half_to_float(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, q += 32) {
      uint8_t sc, m;
      k_scale_min(is, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      k_scale_min(is + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequant_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = half_to_float(b[i].d);
    const float dmin = half_to_float(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    const uint8_t* qh = b[i].qh;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      k_scale_min(is, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      k_scale_min(is + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = half_to_float(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < kQK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        int q1 = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

std::optional<GGMLTypeTraits> ggml_type_traits(uint32_t type_id) {
  for (const auto& e : kTypes)
    if (e.id == type_id) return e.traits;
  return std::nullopt;
}

const GGMLTypeTraits& ggml_traits(GGMLType type) {
  for (const auto& e : kTypes)
    if (e.id == static_cast<uint32_t>(type)) return e.traits;
  EXACTLY_CHECK(false, "unknown GGML type id %u", static_cast<unsigned>(type));
  __builtin_unreachable();
}

std::string_view ggml_type_name(GGMLType type) { return ggml_traits(type).name; }

void dequantize_row(GGMLType type, const void* src, float* dst, int64_t n) {
  const auto& t = ggml_traits(type);
  EXACTLY_CHECK(n % t.block_elems == 0, "%lld elements is not a multiple of the %s block size",
                static_cast<long long>(n), t.name.data());
  const int64_t nb = n / t.block_elems;
  switch (type) {
    case GGMLType::F32: {
      const auto* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case GGMLType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(s[i]);
      return;
    }
    case GGMLType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
      return;
    }
    case GGMLType::Q4_0: return dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case GGMLType::Q4_1: return dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case GGMLType::Q8_0: return dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case GGMLType::Q4_K: return dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case GGMLType::Q5_K: return dequant_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case GGMLType::Q6_K: return dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
    case GGMLType::MXFP4: return dequant_mxfp4(static_cast<const BlockMXFP4*>(src), dst, nb);
    default:
      EXACTLY_CHECK(false, "dequantisation of %s is not supported", t.name.data());
  }
}

}  // namespace exactly
