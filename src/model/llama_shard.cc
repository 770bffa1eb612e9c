// A rank's share of the CPU model for tensor parallelism (model/tensor_parallel.h):
// the slicing of LlamaModel::shard.
#include <cstring>

#include "core/ggml_types.h"
#include "model/llama.h"

namespace exactly {

namespace {

// Columns [first, first + count) of every row, copied into `owned` (first and
// count are whole blocks of the matrix's type).
kernels::WeightMatrix column_slice(const kernels::WeightMatrix& w, int64_t first, int64_t count,
                                   std::vector<std::vector<uint8_t>>& owned) {
  const int64_t row_bytes = ggml_row_bytes(w.type, w.cols), skip = ggml_row_bytes(w.type, first);
  const int64_t slice_bytes = ggml_row_bytes(w.type, count);
  std::vector<uint8_t>& out = owned.emplace_back(static_cast<size_t>(w.rows * slice_bytes));
  for (int64_t r = 0; r < w.rows; ++r)
    std::memcpy(out.data() + r * slice_bytes, static_cast<const uint8_t*>(w.data) + r * row_bytes + skip,
                static_cast<size_t>(slice_bytes));
  return {w.type, out.data(), w.rows, count};
}

}  // namespace

std::unique_ptr<LlamaModel> LlamaModel::shard(int rank, int size, Collective& collective) const {
  return std::unique_ptr<LlamaModel>(new LlamaModel(*this, rank, size, collective));
}

LlamaModel::LlamaModel(const LlamaModel& full, int rank, int size, Collective& collective) : config_(full.config_) {
  const ModelConfig& f = full.config_;
  config_.n_heads = f.n_heads / size;
  config_.n_kv_heads = f.n_kv_heads / size;
  config_.ffn_dim = f.ffn_dim / size;
  config_.expert_ffn_dim = f.expert_ffn_dim / size;
  shard_ = {rank, size, &collective};
  vocab_begin_ = f.vocab_size * rank / size;
  vocab_end_ = f.vocab_size * (rank + 1) / size;
  const int64_t q_rows = int64_t{config_.n_heads} * f.head_dim, kv_rows = int64_t{config_.n_kv_heads} * f.head_dim;
  const int64_t ffn = config_.ffn_dim, expert_ffn = config_.expert_ffn_dim;
  weights_ = full.weights_;
  weights_.output = kernels::row_slice(full.weights_.output, vocab_begin_, vocab_end_ - vocab_begin_);
  for (LlamaLayerWeights& L : weights_.layers) {
    L.wq = kernels::row_slice(L.wq, rank * q_rows, q_rows);
    L.wk = kernels::row_slice(L.wk, rank * kv_rows, kv_rows);
    L.wv = kernels::row_slice(L.wv, rank * kv_rows, kv_rows);
    L.wo = column_slice(L.wo, rank * q_rows, q_rows, shard_columns_);
    if (L.q_bias != nullptr) L.q_bias += rank * q_rows, L.k_bias += rank * kv_rows, L.v_bias += rank * kv_rows;
    if (rank != 0) L.o_bias = nullptr;  // added once, to rank 0's partial sum
    if (L.sinks != nullptr) L.sinks += rank * config_.n_heads;
    if (L.moe.experts.empty()) {
      L.w_gate = kernels::row_slice(L.w_gate, rank * ffn, ffn);
      L.w_up = kernels::row_slice(L.w_up, rank * ffn, ffn);
      L.w_down = column_slice(L.w_down, rank * ffn, ffn, shard_columns_);
      continue;
    }
    for (ExpertWeights& x : L.moe.experts) {  // every expert's width split alike; the router whole
      x.gate = kernels::row_slice(x.gate, rank * expert_ffn, expert_ffn);
      x.up = kernels::row_slice(x.up, rank * expert_ffn, expert_ffn);
      x.down = column_slice(x.down, rank * expert_ffn, expert_ffn, shard_columns_);
      if (x.gate_bias != nullptr) x.gate_bias += rank * expert_ffn, x.up_bias += rank * expert_ffn;
      if (rank != 0) x.down_bias = nullptr;
    }
  }
  init_rope_factors();
}

}  // namespace exactly
