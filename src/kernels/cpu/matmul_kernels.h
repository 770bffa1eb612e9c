// The per-type matmul entry points behind kernels::matmul (internal).
#pragma once

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace exactly::kernels::cpu {

// Each: x: [n_tokens, w.cols], y: [n_tokens, w.rows]; shapes already checked.
void matmul_q4_0(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
void matmul_q4_1(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
void matmul_q8_0(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
void matmul_f32(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
void matmul_f16(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
void matmul_bf16(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
// Any type dequantize_row knows (the K-quants): dequantises 256-element chunks.
void matmul_generic(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace exactly::kernels::cpu
