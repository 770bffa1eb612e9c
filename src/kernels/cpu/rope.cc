// Rotary position embedding, adjacent-pair ("normal") and half-split ("neox")
// layouts. Angles are
// computed in float64 (pos * base^(-2i/rope_dims)) and their cosine and sine
// rounded once to fp32, identically in the kernel (once per token, shared by
// all heads) and in the reference (per head).
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/ops.h"

namespace exactly::kernels {

namespace {

constexpr int kMaxRopePairs = 512;

void token_angles(int32_t pos, int rope_dims, float freq_base, float* cos_out, float* sin_out,
                  const float* freq_factors = nullptr) {  // [rope_dims/2]
  for (int i = 0; i < rope_dims / 2; ++i) {
    double freq = std::pow(static_cast<double>(freq_base), -2.0 * i / rope_dims);
    if (freq_factors != nullptr) freq /= static_cast<double>(freq_factors[i]);
    const double theta = static_cast<double>(pos) * freq;
    cos_out[i] = static_cast<float>(std::cos(theta));
    sin_out[i] = static_cast<float>(std::sin(theta));
  }
}

void rotate_head(float* x, int rope_dims, const float* c, const float* s) {  // x: [head_dim]
  for (int i = 0; i < rope_dims / 2; ++i) {
    const float x0 = x[2 * i];
    const float x1 = x[2 * i + 1];
    x[2 * i] = x0 * c[i] - x1 * s[i];
    x[2 * i + 1] = x0 * s[i] + x1 * c[i];
  }
}

void rotate_head_half(float* x, int rope_dims, const float* c, const float* s) {  // x: [head_dim]
  const int half = rope_dims / 2;
  for (int i = 0; i < half; ++i) {
    const float x0 = x[i];
    const float x1 = x[i + half];
    x[i] = x0 * c[i] - x1 * s[i];
    x[i + half] = x0 * s[i] + x1 * c[i];
  }
}

void check_rope(int head_dim, int rope_dims) {
  EXACTLY_CHECK(rope_dims % 2 == 0 && rope_dims <= head_dim && rope_dims / 2 <= kMaxRopePairs,
                "rope: rope_dims %d must be even and <= head_dim %d", rope_dims, head_dim);
}

}  // namespace

void rope_angles(const int32_t* positions, int64_t n_tokens, int rope_dims, float freq_base, float* cos_out,
                 float* sin_out, const float* freq_factors) {
  check_rope(rope_dims, rope_dims);
  const int pairs = rope_dims / 2;
  for (int64_t t = 0; t < n_tokens; ++t)
    token_angles(positions[t], rope_dims, freq_base, cos_out + t * pairs, sin_out + t * pairs, freq_factors);
}

namespace {

// Every head of every token rotated by `rotate` with the token's angles.
template <class Rotate>
void rotate_heads(float* x, int64_t n_tokens, int n_heads, int head_dim, int rope_dims, const float* cos_in,
                  const float* sin_in, Rotate rotate) {
  check_rope(head_dim, rope_dims);
  const int pairs = rope_dims / 2;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_heads; ++h)
      rotate(x + (t * n_heads + h) * head_dim, rope_dims, cos_in + t * pairs, sin_in + t * pairs);
}

}  // namespace

void rope_adjacent_with(float* x, int64_t n_tokens, int n_heads, int head_dim, int rope_dims, const float* cos_in,
                        const float* sin_in) {
  rotate_heads(x, n_tokens, n_heads, head_dim, rope_dims, cos_in, sin_in, rotate_head);
}

void rope_half_with(float* x, int64_t n_tokens, int n_heads, int head_dim, int rope_dims, const float* cos_in,
                    const float* sin_in) {
  rotate_heads(x, n_tokens, n_heads, head_dim, rope_dims, cos_in, sin_in, rotate_head_half);
}

void rope_adjacent(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                   int rope_dims, float freq_base) {
  check_rope(head_dim, rope_dims);
  float c[kMaxRopePairs], s[kMaxRopePairs];
  for (int64_t t = 0; t < n_tokens; ++t) {
    rope_angles(positions + t, 1, rope_dims, freq_base, c, s);
    rope_adjacent_with(x + t * n_heads * head_dim, 1, n_heads, head_dim, rope_dims, c, s);
  }
}

namespace reference {
void rope_adjacent(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                   int rope_dims, float freq_base) {
  check_rope(head_dim, rope_dims);
  std::vector<float> c(static_cast<size_t>(rope_dims / 2)), s(c.size());
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_heads; ++h) {
      token_angles(positions[t], rope_dims, freq_base, c.data(), s.data());
      rotate_head(x + (t * n_heads + h) * head_dim, rope_dims, c.data(), s.data());
    }
}
}  // namespace reference

}  // namespace exactly::kernels
