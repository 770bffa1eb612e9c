#include "model/cuda/llama_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "core/ggml_types.h"
#include "core/half.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/sampling.h"
#include "loader/gguf.h"
#include "model/cuda/kv_pool_cuda.h"
#include "model/cuda/weight_layout.h"
#include "model/llama.h"

namespace exactly {

namespace kc = kernels::cuda;

namespace {

// GGUF tensor (any stored type) -> bf16 rows appended to `out`.
void append_bf16(const kernels::WeightMatrix& w, std::vector<uint16_t>& out) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  const size_t row_bytes = static_cast<size_t>(ggml_row_bytes(w.type, w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * row_bytes, row.data(),
                   w.cols);
    for (float v : row) out.push_back(float_to_bf16(v));
  }
}

void upload(void* dst, const void* src, size_t bytes) {
  kc::check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "uploading weights");
}

// Rows sampled per launch: the kernel's scratch is 8 bytes per logit, so
// it is sized for this many rows rather than for the whole logits buffer.
constexpr int64_t kSampleRowsPerLaunch = 256;

// A verify on the GPU takes draft distributions of at most this many tokens
// per position (its arrays are sized for them with the workspace).
static_assert(CudaLlamaModel::kSparseDraftEntries > 0 && CudaLlamaModel::kDenseDraftRows > 0);

// The batch's sampling rows go to the kernel as they are.
static_assert(sizeof(RowSampling) == sizeof(kc::SampleRowParams) &&
              offsetof(RowSampling, uniform) == offsetof(kc::SampleRowParams, uniform) &&
              offsetof(RowSampling, penalty_begin) == offsetof(kc::SampleRowParams, penalty_begin));
static_assert(sizeof(PenaltyToken) == sizeof(kc::PenaltyEntry) &&
              offsetof(PenaltyToken, in_window) == offsetof(kc::PenaltyEntry, in_window));
static_assert(sizeof(RowVerify) == sizeof(kc::VerifyJob) &&
              offsetof(RowVerify, uniform_begin) == offsetof(kc::VerifyJob, uniform_begin));
static_assert(sizeof(DraftProb) == sizeof(kc::DraftProb) && offsetof(DraftProb, p) == offsetof(kc::DraftProb, p));
static_assert(sizeof(LogitBiasEntry) == sizeof(kc::LogitBiasEntry) &&
              offsetof(LogitBiasEntry, bias) == offsetof(kc::LogitBiasEntry, bias));

size_t align8(size_t bytes) { return (bytes + 7) / 8 * 8; }

// Most drafts per verify (the engine's limit on --num-speculative-tokens).
constexpr int64_t kMaxDrafts = 16;

}  // namespace

// Device arrays of one pass, grown (never shrunk) to the largest batch seen;
// reserve() sizes them for the engine's limits up front.
struct CudaLlamaModel::Workspace {
  int64_t tokens = 0;
  int32_t seqs = 0, blocks = 0, max_seq_len = 0, logits_rows = 0;
  kc::DeviceBuffer x, h, qkv, q, attn, gate_up, act, angles, last, logits, argmax, decode;
  kc::DeviceBuffer index;   // tokens, positions, slots, query_start, seq_lens, block tables, logits rows
  kc::PinnedBuffer staging;  // host side of `index`
  // Sampling on the GPU: per-row parameters, penalty tokens (grown on
  // demand) and the kernel's scratch.
  kc::DeviceBuffer sampling, penalties, sampling_scratch;
  kc::PinnedBuffer sampling_staging, penalties_staging;
  // Rows processed before sampling: jobs | biases | masks (grown on demand).
  kc::DeviceBuffer processing;
  kc::PinnedBuffer processing_staging;
  size_t off_biases = 0, off_masks = 0;
  // Verifies on the GPU: their rows' parameters, then jobs | drafts |
  // q offsets | q entries | uniforms | accepted | tokens, for `seqs` jobs.
  kc::DeviceBuffer verify_params, verify;
  kc::PinnedBuffer verify_params_staging, verify_staging;
  size_t off_jobs = 0, off_drafts = 0, off_q_offsets = 0, off_q_entries = 0, off_uniforms = 0, off_accepted = 0,
         off_final = 0, verify_bytes = 0;
  int64_t q_capacity = 0;  // draft-distribution entries a step's verifies may carry
  size_t decode_bytes = 0;
  // Offsets of the index arrays (bytes).
  size_t off_tokens = 0, off_positions = 0, off_slots = 0, off_query_start = 0, off_seq_lens = 0, off_tables = 0,
         off_rows = 0, index_bytes = 0;
};

CudaLlamaModel::CudaLlamaModel(ModelConfig config, const CudaModelOptions& options)
    : config_(std::move(config)), options_(options) {
  const ModelConfig& c = config_;
  if (c.head_dim != 64 && c.head_dim != 128)
    throw Error(strformat("the CUDA backend supports head dims 64 and 128, not %d", c.head_dim), ExitCode::kUsage);
  if (c.n_heads % c.n_kv_heads != 0)
    throw Error(strformat("%d query heads over %d KV heads", c.n_heads, c.n_kv_heads), ExitCode::kUsage);
  int devices = 0;
  if (const cudaError_t st = cudaGetDeviceCount(&devices); st != cudaSuccess || devices == 0)
    throw Error(strformat("--device cuda: no CUDA device is visible (%s)",
                          st != cudaSuccess ? cudaGetErrorString(st) : "the driver reports none"),
                ExitCode::kUsage);
  // Before the stream: a throw here leaks nothing.
  gemm_ = std::make_unique<kc::Gemm>(options_.deterministic ? kc::GemmOrder::kCanonical : kc::GemmOrder::kFastest);
  kc::check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
  rope_layout_ = c.rope_layout == RopeLayout::kHalfSplit ? kc::RopeLayout::kHalfSplit : kc::RopeLayout::kAdjacentPairs;
  ws_ = std::make_unique<Workspace>();
}

CudaLlamaModel::~CudaLlamaModel() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

std::unique_ptr<CudaLlamaModel> CudaLlamaModel::from_gguf(const GGUFFile& file, ModelConfig config,
                                                          const CudaModelOptions& options) {
  if (!config.output_token_ids.empty())
    throw Error(strformat("%s: a head over some of the tokens (exactly.output_token_ids, a draft model's) runs on "
                          "the CPU only", file.path().c_str()),
                ExitCode::kUsage);
  const LlamaWeights w = LlamaWeights::from_gguf(file, config);  // validates shapes and types
  const bool tied = w.output.data == w.token_embd.data;
  std::unique_ptr<CudaLlamaModel> m(new CudaLlamaModel(std::move(config), options));
  const ModelConfig& c = m->config_;
  const WeightLayout layout(c, tied, false);
  uint8_t* base = m->allocate_weights(layout);
  std::vector<uint16_t> staged;
  auto put_matrices = [&](size_t offset, std::initializer_list<kernels::WeightMatrix> parts) {
    staged.clear();
    for (const auto& part : parts) append_bf16(part, staged);
    upload(base + offset, staged.data(), staged.size() * 2);
  };
  auto put_vector = [&](size_t offset, const float* v, int64_t n) { upload(base + offset, v, static_cast<size_t>(n) * 4); };
  put_matrices(layout.token_embd, {w.token_embd});
  if (!tied) put_matrices(layout.output, {w.output});
  put_vector(layout.output_norm, w.output_norm, c.dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
    const auto& o = layout.layers[static_cast<size_t>(l)];
    put_vector(o.attn_norm, L.attn_norm, c.dim);
    put_matrices(o.wqkv, {L.wq, L.wk, L.wv});
    if (c.qk_norm) {
      put_vector(o.q_norm, L.q_norm, c.head_dim);
      put_vector(o.k_norm, L.k_norm, c.head_dim);
    }
    put_matrices(o.wo, {L.wo});
    put_vector(o.ffn_norm, L.ffn_norm, c.dim);
    put_matrices(o.w_gate_up, {L.w_gate, L.w_up});
    put_matrices(o.w_down, {L.w_down});
  }
  return m;
}

std::unique_ptr<CudaLlamaModel> CudaLlamaModel::with_random_weights(ModelConfig config, uint64_t seed,
                                                                    const CudaModelOptions& options) {
  std::unique_ptr<CudaLlamaModel> m(new CudaLlamaModel(std::move(config), options));
  const ModelConfig& c = m->config_;
  const WeightLayout layout(c, false, false);
  uint8_t* base = m->allocate_weights(layout);
  uint64_t stream_id = seed * 0x9e3779b97f4a7c15ull;
  auto random = [&](size_t offset, int64_t rows, int64_t cols) {
    kc::fill_uniform_bf16(base + offset, rows * cols, 1.0f / std::sqrt(static_cast<float>(cols)), ++stream_id << 40,
                          m->stream_);
  };
  auto ones = [&](size_t offset, int64_t n) { kc::fill_f32(reinterpret_cast<float*>(base + offset), n, 1.0f, m->stream_); };
  random(layout.token_embd, c.vocab_size, c.dim);
  random(layout.output, c.vocab_size, c.dim);
  ones(layout.output_norm, c.dim);
  for (const auto& o : layout.layers) {
    ones(o.attn_norm, c.dim);
    random(o.wqkv, qkv_rows(c), c.dim);
    if (c.qk_norm) {
      ones(o.q_norm, c.head_dim);
      ones(o.k_norm, c.head_dim);
    }
    random(o.wo, c.dim, q_width(c));
    ones(o.ffn_norm, c.dim);
    random(o.w_gate_up, 2 * int64_t{c.ffn_dim}, c.dim);
    random(o.w_down, c.dim, c.ffn_dim);
  }
  kc::check_cuda(cudaStreamSynchronize(m->stream_), "initialising random weights");
  return m;
}

uint8_t* CudaLlamaModel::allocate_weights(const WeightLayout& layout) {
  weights_ = kc::DeviceBuffer(layout.total, "the weights");
  // A pass reads every weight once, but of the embedding table (when the head
  // has its own) only one row per token.
  const bool tied = layout.output == layout.token_embd;
  weight_bytes_ = static_cast<int64_t>(layout.total) - (tied ? 0 : int64_t{config_.vocab_size} * config_.dim * 2);
  auto* base = weights_.as<uint8_t>();
  auto f32 = [&](size_t offset) { return reinterpret_cast<float*>(base + offset); };
  auto optional_f32 = [&](size_t offset) { return offset == SIZE_MAX ? nullptr : f32(offset); };
  token_embd_ = base + layout.token_embd;
  output_ = base + layout.output;
  output_norm_ = f32(layout.output_norm);
  layers_.clear();
  for (const auto& o : layout.layers)
    layers_.push_back({f32(o.attn_norm), base + o.wqkv, optional_f32(o.qkv_bias), optional_f32(o.q_norm),
                       optional_f32(o.k_norm), base + o.wo, f32(o.ffn_norm), base + o.w_gate_up, base + o.w_down});
  return base;
}

int64_t CudaLlamaModel::kv_bytes_per_slot() const {
  return int64_t{2} * config_.n_layers * config_.n_kv_heads * config_.head_dim * 2;  // bf16 K and V
}

void CudaLlamaModel::reserve(const ModelLimits& limits) {
  limits_ = limits;
  const int32_t blocks = (limits.max_model_len + limits.block_size - 1) / std::max(1, limits.block_size);
  ensure_workspace(limits.max_batch_tokens, limits.max_seqs, blocks, limits.max_model_len);
  prepare_products(limits.max_batch_tokens);
}

// Planning a product takes a cuBLASLt query, and in the canonical order
// timing the candidates of its row bucket: about a millisecond a shape.
// Done here, at load, for the row counts that come first, the first steps
// of a run or a server's first requests do not pay it; other row counts
// take a plan on first use (their bucket already timed up to kTunedRows).
void CudaLlamaModel::prepare_products(int64_t max_rows) {
  const ModelConfig& c = config_;
  Workspace& w = *ws_;
  if (layers_.empty()) return;
  const Layer& L = layers_.front();  // every layer's products have its shapes
  for (int64_t n = 1;; n = std::min(2 * n, max_rows)) {
    gemm_->prepare(w.h.get(), L.wqkv, n, qkv_rows(c), c.dim, kc::GemmOut::bf16, false, stream_);
    gemm_->prepare(w.attn.get(), L.wo, n, c.dim, q_width(c), kc::GemmOut::f32, true, stream_);
    gemm_->prepare(w.h.get(), L.w_gate_up, n, 2 * int64_t{c.ffn_dim}, c.dim, kc::GemmOut::bf16, false, stream_);
    gemm_->prepare(w.act.get(), L.w_down, n, c.dim, c.ffn_dim, kc::GemmOut::f32, true, stream_);
    if (n <= w.logits_rows)
      gemm_->prepare(w.last.get(), output_, n, c.vocab_size, c.dim, kc::GemmOut::f32, false, stream_);
    if (n >= max_rows) break;
  }
  kc::check_cuda(cudaStreamSynchronize(stream_), "planning the products");
}

int64_t CudaLlamaModel::default_kv_cache_memory(double utilization) const {
  size_t free_bytes = 0, total_bytes = 0;
  kc::check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "reading free GPU memory");
  // What this process may hold in all, minus what is held already (weights,
  // workspace, cuBLASLt's workspace, the CUDA context, other processes).
  // Step graphs are made later, as shapes appear: their share is kept now.
  const double allowed = utilization * static_cast<double>(total_bytes);
  const double in_use = static_cast<double>(total_bytes - free_bytes);
  const double graphs = options_.cuda_graphs ? static_cast<double>(kMaxStepGraphs * kGraphReserveBytes) : 0.0;
  return std::max<int64_t>(0, static_cast<int64_t>(allowed - in_use - graphs));
}

std::unique_ptr<KVPool> CudaLlamaModel::make_kv_pool(int64_t num_blocks, int block_size) {
  if (block_size % 16 != 0)
    throw Error(strformat("--block-size %d: the CUDA backend needs a multiple of 16", block_size), ExitCode::kUsage);
  return std::make_unique<CudaKVPool>(config_, num_blocks, block_size);
}

void CudaLlamaModel::ensure_workspace(int64_t tokens, int32_t seqs, int32_t blocks, int32_t max_seq_len) {
  Workspace& w = *ws_;
  const ModelConfig& c = config_;
  tokens = std::max<int64_t>(tokens, 1);
  seqs = std::max(seqs, 1);
  blocks = std::max(blocks, 1);
  if (tokens > w.tokens || seqs > w.seqs || blocks > w.blocks) {
    kc::check_cuda(cudaStreamSynchronize(stream_), "workspace");
    graphs_.clear();  // they hold the old buffers' addresses
    w.tokens = std::max(w.tokens, tokens);
    w.seqs = std::max(w.seqs, seqs);
    w.blocks = std::max(w.blocks, blocks);
    const auto T = static_cast<size_t>(w.tokens);
    w.x = kc::DeviceBuffer(T * static_cast<size_t>(c.dim) * 4, "activations");
    w.h = kc::DeviceBuffer(T * static_cast<size_t>(c.dim) * 2, "activations");
    w.qkv = kc::DeviceBuffer(T * static_cast<size_t>(qkv_rows(c)) * 2, "activations");
    w.q = kc::DeviceBuffer(T * static_cast<size_t>(q_width(c)) * 2, "activations");
    w.attn = kc::DeviceBuffer(T * static_cast<size_t>(q_width(c)) * 2, "activations");
    w.gate_up = kc::DeviceBuffer(T * 2 * static_cast<size_t>(c.ffn_dim) * 2, "activations");
    w.act = kc::DeviceBuffer(T * static_cast<size_t>(c.ffn_dim) * 2, "activations");
    w.angles = kc::DeviceBuffer(T * static_cast<size_t>(c.rope_dims / 2) * 8, "rotary angles");
    // Logits are computed in chunks of at most this many rows: enough for
    // every sequence's verify of up to 16 drafts, without a [tokens, vocab]
    // buffer for long prompts.
    w.logits_rows = static_cast<int32_t>(std::min<int64_t>(w.tokens, std::max<int64_t>(256, int64_t{w.seqs} * 17)));
    w.last = kc::DeviceBuffer(static_cast<size_t>(w.logits_rows) * static_cast<size_t>(c.dim) * 2, "activations");
    w.logits = kc::DeviceBuffer(static_cast<size_t>(w.logits_rows) * static_cast<size_t>(c.vocab_size) * 4, "logits");
    w.argmax = kc::DeviceBuffer(T * 4, "argmax");
    size_t off = 0;
    auto take = [&](size_t bytes) {
      const size_t at = off;
      off += (bytes + 15) / 16 * 16;
      return at;
    };
    w.off_tokens = take(T * 4);
    w.off_positions = take(T * 4);
    w.off_slots = take(T * 8);
    w.off_query_start = take((static_cast<size_t>(w.seqs) + 1) * 4);
    w.off_seq_lens = take(static_cast<size_t>(w.seqs) * 4);
    w.off_tables = take(static_cast<size_t>(w.seqs) * static_cast<size_t>(w.blocks) * 4);
    w.off_rows = take(T * 4);
    w.index_bytes = off;
    w.index = kc::DeviceBuffer(off, "batch indices");
    w.staging = kc::PinnedBuffer(off, "batch indices (host)");
    w.sampling = kc::DeviceBuffer(T * sizeof(RowSampling), "sampling parameters");
    w.sampling_staging = kc::PinnedBuffer(T * sizeof(RowSampling), "sampling parameters (host)");
    const int64_t scratch_rows = std::min<int64_t>(w.logits_rows, kSampleRowsPerLaunch);
    w.sampling_scratch = kc::DeviceBuffer(std::max(kc::sampling_workspace_bytes(scratch_rows, c.vocab_size),
                                                   kc::verify_workspace_bytes(scratch_rows, c.vocab_size)),
                                          "sampling");
    w.verify_params = kc::DeviceBuffer(T * sizeof(RowSampling), "verify parameters");
    w.verify_params_staging = kc::PinnedBuffer(T * sizeof(RowSampling), "verify parameters (host)");
    {
      const auto S = static_cast<size_t>(w.seqs);
      size_t v = 0;
      auto take_v = [&](size_t bytes) {
        const size_t at = v;
        v += (bytes + 15) / 16 * 16;
        return at;
      };
      w.off_jobs = take_v(S * sizeof(RowVerify));
      w.off_drafts = take_v(S * kMaxDrafts * 4);
      w.off_q_offsets = take_v(S * (kMaxDrafts + 1) * 4);
      w.q_capacity = std::max<int64_t>(static_cast<int64_t>(S) * kMaxDrafts * kSparseDraftEntries,
                                       kDenseDraftRows * int64_t{c.vocab_size});
      w.off_q_entries = take_v(static_cast<size_t>(w.q_capacity) * sizeof(DraftProb));
      w.off_uniforms = take_v(S * (kMaxDrafts + 1) * 8);
      w.off_accepted = take_v(S * 4);
      w.off_final = take_v(S * 4);
      w.verify_bytes = v;
      w.verify = kc::DeviceBuffer(v, "verify arrays");
      w.verify_staging = kc::PinnedBuffer(v, "verify arrays (host)");
    }
  }
  // The decode workspace (split-KV partials) follows the largest batch and
  // context seen (the sequence count may have grown above without the
  // context growing).
  w.max_seq_len = std::max(w.max_seq_len, max_seq_len);
  {
    const int64_t bytes = kc::decode_workspace_bytes(w.seqs, c.n_heads, w.max_seq_len, c.head_dim);
    if (static_cast<size_t>(bytes) > w.decode_bytes) {
      kc::check_cuda(cudaStreamSynchronize(stream_), "workspace");
      graphs_.clear();
      w.decode = kc::DeviceBuffer(static_cast<size_t>(bytes), "decode attention");
      w.decode_bytes = static_cast<size_t>(bytes);
    }
  }
}

// Packs the batch into the pinned staging buffer in `shape`'s layout and
// uploads it in one copy. Block tables are laid out with the workspace's
// fixed row stride. In a padded layout sequence s starts at token s * query;
// a padding token after a sequence's own continues its positions with no KV
// slot (its context grows with it, so the real tokens keep their positions:
// a token's position is its context length minus its query length plus its
// index), and a padding sequence is `query` tokens at positions 0.. with no
// slot and block 0: the shapes a captured graph was made for. A real row's
// bits do not change: in the canonical order a row's products and attention
// depend on the row alone, and the keys past its position that its query
// block walks are masked (zeroed pool slots, finite).
void CudaLlamaModel::upload_batch(const ForwardBatch& b, StepShape shape) {
  Workspace& w = *ws_;
  auto* host = w.staging.as<uint8_t>();
  const auto n = static_cast<size_t>(b.input.num_tokens());
  const auto seqs = static_cast<size_t>(b.input.num_seqs());
  auto at = [&](size_t off) { return host + off; };
  auto* tokens = reinterpret_cast<int32_t*>(at(w.off_tokens));
  auto* positions = reinterpret_cast<int32_t*>(at(w.off_positions));
  auto* slots = reinterpret_cast<int64_t*>(at(w.off_slots));
  auto* query_start = reinterpret_cast<int32_t*>(at(w.off_query_start));
  auto* seq_lens = reinterpret_cast<int32_t*>(at(w.off_seq_lens));
  auto* rows = reinterpret_cast<int32_t*>(at(w.off_rows));
  const auto padded = static_cast<size_t>(std::max<int32_t>(shape.seqs, b.input.num_seqs()));
  if (shape.query == 0) {
    std::memcpy(tokens, b.input.tokens.data(), n * 4);
    std::memcpy(positions, b.input.positions.data(), n * 4);
    std::memcpy(slots, b.input.slot_mapping.data(), n * 8);
    std::memcpy(query_start, b.input.query_start.data(), (seqs + 1) * 4);
    std::memcpy(seq_lens, b.input.seq_lens.data(), seqs * 4);
    std::memcpy(rows, b.input.logits_rows.data(), b.input.logits_rows.size() * 4);
  } else {
    const auto q = static_cast<size_t>(shape.query);
    padded_index_.resize(n);
    for (size_t s = 0; s < padded; ++s) {
      const size_t base = s * q;
      query_start[s] = static_cast<int32_t>(base);
      size_t len = 0;
      int32_t next_position = 0;
      if (s < seqs) {
        const auto begin = static_cast<size_t>(b.input.query_start[s]);
        len = static_cast<size_t>(b.input.query_start[s + 1]) - begin;
        std::memcpy(tokens + base, b.input.tokens.data() + begin, len * 4);
        std::memcpy(positions + base, b.input.positions.data() + begin, len * 4);
        std::memcpy(slots + base, b.input.slot_mapping.data() + begin, len * 8);
        for (size_t t = 0; t < len; ++t) padded_index_[begin + t] = static_cast<int32_t>(base + t);
        next_position = b.input.positions[begin + len - 1] + 1;
        seq_lens[s] = b.input.seq_lens[s] + static_cast<int32_t>(q - len);
      } else {
        seq_lens[s] = static_cast<int32_t>(q);
      }
      for (size_t j = len; j < q; ++j) {
        tokens[base + j] = 0;
        positions[base + j] = next_position++;
        slots[base + j] = -1;
      }
    }
    query_start[padded] = static_cast<int32_t>(padded * q);
    for (size_t r = 0; r < b.input.logits_rows.size(); ++r)
      rows[r] = padded_index_[static_cast<size_t>(b.input.logits_rows[r])];
  }
  auto* tables = reinterpret_cast<int32_t*>(at(w.off_tables));
  const auto stride = static_cast<size_t>(w.blocks), given = static_cast<size_t>(b.input.max_blocks_per_seq);
  for (size_t s = 0; s < seqs; ++s) {
    std::memcpy(tables + s * stride, b.input.block_tables.data() + s * given, given * 4);
    std::memset(tables + s * stride + given, 0, (stride - given) * 4);
  }
  std::memset(tables + seqs * stride, 0, (padded - seqs) * stride * 4);
  // Only the used part of each array travels: everything up to the end of
  // the block tables in use, then the logits rows.
  const size_t head = w.off_tables + padded * stride * 4;
  kc::check_cuda(cudaMemcpyAsync(w.index.get(), host, head, cudaMemcpyHostToDevice, stream_), "batch upload");
  kc::check_cuda(cudaMemcpyAsync(w.index.as<uint8_t>() + w.off_rows, rows, b.input.logits_rows.size() * 4,
                                 cudaMemcpyHostToDevice, stream_),
                 "batch upload");
}

// The decoder layers over n tokens of `attn` sequences, all on the stream.
void CudaLlamaModel::run_layers(CudaKVPool& kv, int64_t n, int num_layers) {
  const ModelConfig& c = config_;
  Workspace& w = *ws_;
  auto* idx = w.index.as<uint8_t>();
  const auto* d_tokens = reinterpret_cast<const int32_t*>(idx + w.off_tokens);
  const auto* d_positions = reinterpret_cast<const int32_t*>(idx + w.off_positions);
  const auto* d_slots = reinterpret_cast<const int64_t*>(idx + w.off_slots);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  auto* x = w.x.as<float>();
  kc::embedding_lookup(token_embd_, d_tokens, n, c.dim, c.vocab_size, x, stream_);
  kc::rope_angles(d_positions, n, c.rope_dims, c.rope_freq_base, w.angles.get(), stream_);  // once for all layers
  for (int l = 0; l < num_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    const kc::PagedKVDevice cache = kv.layer(l);
    // Attention block: x += wo · attention(rope(wq·norm(x)), rope(wk·norm(x)), wv·norm(x))
    kc::rmsnorm_bf16(x, L.attn_norm, nullptr, n, c.dim, c.rms_eps, w.h.get(), stream_);
    gemm_->run(w.h.get(), L.wqkv, w.qkv.get(), n, qkv_rows(c), c.dim, kc::GemmOut::bf16, false, stream_);
    const float* rope_bias = L.qkv_bias;
    if (L.q_norm != nullptr) {  // the bias goes in with the norm
      kc::head_rmsnorm({w.qkv.get(), L.qkv_bias, L.q_norm, L.k_norm, n, c.n_heads, c.n_kv_heads, c.head_dim,
                        c.rms_eps},
                       stream_);
      rope_bias = nullptr;
    }
    kc::RopeStoreArgs rope{w.qkv.get(), rope_bias, d_positions, d_slots, n, c.n_heads, c.rope_dims,
                           c.rope_freq_base, rope_layout_, w.q.get(), w.angles.get()};
    kc::rope_and_store(rope, cache, stream_);
    for (const AttentionLaunch& a : attention_launches_) {
      switch (a.kernel) {
        case AttentionKernel::kSplitDecode:
          kc::paged_decode_attention(cache, a.batch, w.q.get(), c.n_heads, scale, w.attn.get(), w.decode.get(),
                                     static_cast<int64_t>(w.decode_bytes), stream_);
          break;
        case AttentionKernel::kExactRows:
          kc::exact_rows_attention(cache, a.batch, w.q.get(), c.n_heads, scale, w.attn.get(), stream_);
          break;
        case AttentionKernel::kPrefill:
          kc::flash_attention_prefill(cache, a.batch, w.q.get(), c.n_heads, scale, true, w.attn.get(), stream_);
          break;
      }
    }
    gemm_->run(w.attn.get(), L.wo, x, n, c.dim, q_width(c), kc::GemmOut::f32, true, stream_);
    // MLP block: x += w_down · (silu(w_gate·norm(x)) * w_up·norm(x))
    kc::rmsnorm_bf16(x, L.ffn_norm, nullptr, n, c.dim, c.rms_eps, w.h.get(), stream_);
    gemm_->run(w.h.get(), L.w_gate_up, w.gate_up.get(), n, 2 * int64_t{c.ffn_dim}, c.dim, kc::GemmOut::bf16, false,
               stream_);
    kc::swiglu(w.gate_up.get(), n, c.ffn_dim, w.act.get(), stream_);
    gemm_->run(w.act.get(), L.w_down, x, n, c.dim, c.ffn_dim, kc::GemmOut::f32, true, stream_);
  }
}

// A decode step is one launch of the decode kernel. A step with prompt work
// launches the prefill kernel for its runs of prompt chunks and verifies and
// the decode kernel for its runs of decode rows: in the prefill kernel a
// decode row fills one row of a query block of 64-128 per head, and every key
// tile costs the whole block's products (docs/journal/benchmarks-record.md
// §6, "Decode rows in prompt steps"). In the canonical order (the default) a
// row must have the prefill kernel's bits whatever run it lands in, so decode
// rows go to exact_rows_attention, which computes them with the same bits
// (checked element by element in dev/cuda/exact_rows_lab.cu) in whichever of
// its paths or the prefill kernel is fastest for the run (dev/cuda/NOTES.md,
// "Exact rows in windows"); --no-deterministic sends them to the split-KV
// kernel.
CudaLlamaModel::AttentionKernel CudaLlamaModel::decode_kernel() const {
  return options_.deterministic ? AttentionKernel::kExactRows : AttentionKernel::kSplitDecode;
}

void CudaLlamaModel::plan_uniform_attention(const kc::AttentionBatchDevice& attn, int32_t query) {
  attention_launches_.clear();
  attention_launches_.push_back({attn, query == 1 ? decode_kernel() : AttentionKernel::kPrefill});
}

void CudaLlamaModel::plan_attention(const ForwardBatch& b, const kc::AttentionBatchDevice& attn, bool decode) {
  if (decode) return plan_uniform_attention(attn, 1);
  attention_launches_.clear();
  constexpr int kMaxAttentionLaunches = 4;
  split_attention_runs(b.input.query_start, b.input.seq_lens, kMaxAttentionLaunches, attention_runs_);
  for (const AttentionRun& run : attention_runs_) {
    kc::AttentionBatchDevice part = attn;
    part.n_seqs = run.num_seqs;
    part.query_start = attn.query_start + run.first_seq;
    part.seq_lens = attn.seq_lens + run.first_seq;
    part.block_tables = attn.block_tables + int64_t{run.first_seq} * attn.max_blocks_per_seq;
    part.max_query_len = run.max_query_len;
    part.max_seq_len = run.max_seq_len;
    attention_launches_.push_back({part, run.single_token ? decode_kernel() : AttentionKernel::kPrefill});
  }
}

namespace {

// kMaxGraphQuery, or EXACTLY_GRAPH_MAX_QUERY (1 replays decode steps alone:
// what verifies cost when launched from the host, for benchmarks).
int32_t graph_max_query() {
  static const int32_t bound = [] {
    const char* env = std::getenv("EXACTLY_GRAPH_MAX_QUERY");
    const int32_t v = env == nullptr ? CudaLlamaModel::kMaxGraphQuery : std::atoi(env);
    return std::clamp<int32_t>(v, 1, CudaLlamaModel::kMaxGraphQuery);
  }();
  return bound;
}

// Decode batches are padded up to one of these sizes, each with a graph of
// its own: 1, 2, 4, 8, then multiples of 8 up to 64 and of 32 beyond.
int32_t graph_batch_size(int32_t n) {
  if (n <= 8) return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8;
  if (n <= 64) return (n + 7) / 8 * 8;
  return (n + 31) / 32 * 32;
}

// A step's tokens per sequence are padded up to one of these: each count up
// to 9 (a verify of up to 8 drafts), then multiples of 4.
int32_t graph_query_len(int32_t q) { return q <= 9 ? q : (q + 3) / 4 * 4; }

}  // namespace

// A step replays a graph when its sequences bring at most kMaxGraphQuery
// tokens each and padding them to one shape at most doubles its tokens (or
// keeps them within 128), every padded context staying within a block-table
// row; other steps (prompt chunks) launch their kernels from the host.
std::optional<CudaLlamaModel::StepShape> CudaLlamaModel::graph_shape(const ForwardBatch& b, int32_t max_query,
                                                                    int block_size) const {
  const Workspace& w = *ws_;
  if (!options_.cuda_graphs || max_query > graph_max_query()) return std::nullopt;
  const StepShape shape{std::min(graph_batch_size(b.input.num_seqs()), w.seqs), graph_query_len(max_query)};
  const int64_t tokens = int64_t{shape.seqs} * shape.query;
  if (shape.seqs < b.input.num_seqs() || tokens > w.tokens || tokens > std::max<int64_t>(2 * b.input.num_tokens(), 128))
    return std::nullopt;
  const int64_t table_slots = int64_t{w.blocks} * block_size;
  for (int32_t s = 0; s < b.input.num_seqs(); ++s) {
    const auto i = static_cast<size_t>(s);
    const int32_t query = b.input.query_start[i + 1] - b.input.query_start[i];
    if (query < 1 || int64_t{b.input.seq_lens[i]} + (shape.query - query) > table_slots) return std::nullopt;
  }
  return shape;
}

bool CudaLlamaModel::samples_rows() const {
  static const bool on = [] {
    const char* env = std::getenv("EXACTLY_CUDA_SAMPLING");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

int64_t CudaLlamaModel::verified_draft_entries() const {
  return samples_rows() && ws_ != nullptr ? ws_->q_capacity : 0;
}

void CudaLlamaModel::forward(const ForwardBatch& b, KVPool& kv_pool, float* logits, ThreadPool&, int num_layers,
                             int32_t* tokens) {
  num_layers = check_forward_batch(b, *this, num_layers);
  auto* kv = dynamic_cast<CudaKVPool*>(&kv_pool);
  EXACTLY_CHECK(kv != nullptr, "the CUDA model was given a KV pool of another device");
  const int64_t n = b.input.num_tokens();
  int32_t max_q = 0, max_len = 0;
  for (int32_t s = 0; s < b.input.num_seqs(); ++s) {
    max_q = std::max(max_q, b.input.query_start[static_cast<size_t>(s) + 1] - b.input.query_start[static_cast<size_t>(s)]);
    max_len = std::max(max_len, b.input.seq_lens[static_cast<size_t>(s)]);
  }
  ensure_workspace(n, b.input.num_seqs(), b.input.max_blocks_per_seq, max_len);
  Workspace& w = *ws_;
  EXACTLY_CHECK(static_cast<int64_t>(b.input.logits_rows.size()) <= w.tokens, "%zu logits rows for %lld tokens",
                b.input.logits_rows.size(), static_cast<long long>(w.tokens));

  auto* idx = w.index.as<uint8_t>();
  const kc::AttentionBatchDevice attn{b.input.num_seqs(),
                                      reinterpret_cast<const int32_t*>(idx + w.off_query_start),
                                      reinterpret_cast<const int32_t*>(idx + w.off_seq_lens),
                                      reinterpret_cast<const int32_t*>(idx + w.off_tables),
                                      w.blocks,
                                      max_q,
                                      max_len,
                                      w.tokens};
  last_forward_was_setup_ = false;
  if (const auto shape = graph_shape(b, max_q, kv->block_size())) {
    run_graph(b, *kv, attn, *shape, num_layers);
  } else {
    upload_batch(b, StepShape{b.input.num_seqs(), 0});
    plan_attention(b, attn, max_q == 1 && n == b.input.num_seqs());
    run_layers(*kv, n, num_layers);
  }
  compute_logits(b, logits, tokens);
}

void CudaLlamaModel::run_graph(const ForwardBatch& b, CudaKVPool& kv, kc::AttentionBatchDevice attn, StepShape shape,
                               int num_layers) {
  Workspace& w = *ws_;
  upload_batch(b, shape);
  // The graph is made for a bound on the padded contexts: a multiple of
  // kDecodeContextGranule.
  int32_t max_len = shape.query;
  for (int32_t s = 0; s < b.input.num_seqs(); ++s) {
    const auto i = static_cast<size_t>(s);
    max_len = std::max(max_len, b.input.seq_lens[i] + shape.query - (b.input.query_start[i + 1] - b.input.query_start[i]));
  }
  const int32_t granules = (max_len + kc::kDecodeContextGranule - 1) / kc::kDecodeContextGranule;
  attn.n_seqs = shape.seqs;
  attn.max_query_len = shape.query;
  attn.max_seq_len = std::max(std::min(granules * kc::kDecodeContextGranule, w.blocks * kv.block_size()), max_len);
  const int64_t tokens = int64_t{shape.seqs} * shape.query;
  // The pool's address and size are baked into the graph with everything else.
  const GraphKey key{shape.seqs, shape.query, attn.max_seq_len, num_layers, kv.layer(0).k, kv.num_blocks()};
  auto it = graphs_.find(key);
  if (it == graphs_.end() && graph_shapes_seen_.insert(key).second) {
    // The first step of a shape runs eagerly: kernels get their one-time
    // set-up (shared-memory limits, product plans and timings) outside any capture.
    plan_uniform_attention(attn, shape.query);
    run_layers(kv, tokens, num_layers);
    last_forward_was_setup_ = true;
    return;
  }
  if (it == graphs_.end()) {
    last_forward_was_setup_ = true;
    cudaGraph_t graph = nullptr;
    kc::check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "graph capture");
    try {
      plan_uniform_attention(attn, shape.query);  // a replay needs no plan: the graph holds its launches
      run_layers(kv, tokens, num_layers);
    } catch (...) {  // leave the stream usable: end the capture, drop its graph
      if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    kc::check_cuda(cudaStreamEndCapture(stream_, &graph), "graph capture");
    if (graphs_.size() >= kMaxStepGraphs) {
      auto oldest = graphs_.begin();
      for (auto g = graphs_.begin(); g != graphs_.end(); ++g)
        if (g->second.last_use < oldest->second.last_use) oldest = g;
      kc::check_cuda(cudaStreamSynchronize(stream_), "graph eviction");
      graphs_.erase(oldest);
    }
    size_t free_before = 0, free_after = 0, total = 0;
    kc::check_cuda(cudaMemGetInfo(&free_before, &total), "reading free GPU memory");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t st = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    kc::check_cuda(st, "graph instantiation");
    it = graphs_.emplace(key, CapturedGraph{GraphExec(exec), 0}).first;
    kc::check_cuda(cudaGraphUpload(exec, stream_), "graph upload");
    kc::check_cuda(cudaMemGetInfo(&free_after, &total), "reading free GPU memory");
    graph_bytes_ += free_before > free_after ? static_cast<int64_t>(free_before - free_after) : 0;
    ++graphs_made_;
  }
  it->second.last_use = ++graph_clock_;
  kc::check_cuda(cudaGraphLaunch(it->second.exec.get(), stream_), "graph launch");
}

void CudaLlamaModel::upload_sampling(const ForwardBatch& b) {
  Workspace& w = *ws_;
  const size_t rows = b.input.logits_rows.size();
  auto* params = w.sampling_staging.as<RowSampling>();
  for (size_t i = 0; i < rows; ++i) params[i] = b.jobs.row_use[i] == RowUse::kSample ? b.jobs.row_sampling[i] : RowSampling{};
  kc::check_cuda(cudaMemcpyAsync(w.sampling.get(), params, rows * sizeof(RowSampling), cudaMemcpyHostToDevice, stream_),
                 "sampling upload");
  const size_t penalty_bytes = b.jobs.penalty_tokens.size() * sizeof(PenaltyToken);
  if (penalty_bytes == 0) return;
  if (penalty_bytes > w.penalties.bytes()) {  // the previous step's copies are done: forward() synchronises
    const size_t grown = std::max(penalty_bytes, 2 * w.penalties.bytes());
    w.penalties = kc::DeviceBuffer(grown, "penalty tokens");
    w.penalties_staging = kc::PinnedBuffer(grown, "penalty tokens (host)");
  }
  std::memcpy(w.penalties_staging.get(), b.jobs.penalty_tokens.data(), penalty_bytes);
  kc::check_cuda(cudaMemcpyAsync(w.penalties.get(), w.penalties_staging.get(), penalty_bytes, cudaMemcpyHostToDevice,
                                 stream_),
                 "sampling upload");
}

// The masks are filled by the engine while the layers run: waiting for them
// here, after the layers are launched, keeps that overlap.
void CudaLlamaModel::upload_processing(const ForwardBatch& b) {
  Workspace& w = *ws_;
  const size_t words = (static_cast<size_t>(config_.vocab_size) + 31) / 32;
  const size_t jobs = b.jobs.row_processing.size();
  size_t masks = 0;
  for (const RowProcessing& p : b.jobs.row_processing) masks += p.mask != nullptr ? 1 : 0;
  w.off_biases = align8(jobs * sizeof(kc::ProcessRowJob));
  w.off_masks = align8(w.off_biases + b.jobs.logit_biases.size() * sizeof(kc::LogitBiasEntry));
  const size_t bytes = w.off_masks + masks * words * sizeof(uint32_t);
  if (bytes > w.processing.bytes()) {  // the previous step's copies are done: forward() synchronises
    const size_t grown = std::max(bytes, 2 * w.processing.bytes());
    w.processing = kc::DeviceBuffer(grown, "processed rows");
    w.processing_staging = kc::PinnedBuffer(grown, "processed rows (host)");
  }
  if (b.jobs.await_masks) b.jobs.await_masks();
  auto* host = w.processing_staging.as<uint8_t>();
  auto* job = reinterpret_cast<kc::ProcessRowJob*>(host);
  auto* mask = reinterpret_cast<uint32_t*>(host + w.off_masks);
  int32_t next_mask = 0;
  for (const RowProcessing& p : b.jobs.row_processing) {
    *job++ = {p.row, p.bias_begin, p.bias_end, p.mask != nullptr ? next_mask++ : -1};
    if (p.mask != nullptr) mask = std::copy(p.mask, p.mask + words, mask);
  }
  if (!b.jobs.logit_biases.empty())
    std::memcpy(host + w.off_biases, b.jobs.logit_biases.data(), b.jobs.logit_biases.size() * sizeof(LogitBiasEntry));
  kc::check_cuda(cudaMemcpyAsync(w.processing.get(), host, bytes, cudaMemcpyHostToDevice, stream_),
                 "processed rows upload");
}

// Only the rows that need logits go through the final norm and the head, in
// chunks that fit the logits buffer; rows wanted for their token alone stay
// on the GPU (a 128k vocabulary is half a megabyte a row), their argmax or
// their sample computed there.
void CudaLlamaModel::compute_logits(const ForwardBatch& b, float* logits, int32_t* tokens) {
  const ModelConfig& c = config_;
  Workspace& w = *ws_;
  const auto n_out = static_cast<int64_t>(b.input.logits_rows.size());
  const auto* d_rows = reinterpret_cast<const int32_t*>(w.index.as<uint8_t>() + w.off_rows);
  const bool verifying = tokens != nullptr && !b.jobs.verifies.empty();
  const bool sampling =
      verifying ||
      (tokens != nullptr && std::find(b.jobs.row_use.begin(), b.jobs.row_use.end(), RowUse::kSample) != b.jobs.row_use.end());
  if (sampling) upload_sampling(b);
  const bool processing = sampling && !b.jobs.row_processing.empty();
  if (processing) upload_processing(b);
  if (verifying) {
    EXACTLY_CHECK(n_out <= w.logits_rows, "%lld logits rows with verifies exceed one chunk of %d",
                  static_cast<long long>(n_out), w.logits_rows);
    upload_verifies(b);
  }
  auto wanted = [&](int64_t r) {
    return tokens == nullptr || b.jobs.row_use.empty() || b.jobs.row_use[static_cast<size_t>(r)] == RowUse::kLogits;
  };
  for (int64_t first = 0; first < n_out; first += w.logits_rows) {
    const int64_t rows = std::min<int64_t>(w.logits_rows, n_out - first);
    kc::rmsnorm_bf16(w.x.as<float>(), output_norm_, d_rows + first, rows, c.dim, c.rms_eps, w.last.get(), stream_);
    gemm_->run(w.last.get(), output_, w.logits.get(), rows, c.vocab_size, c.dim, kc::GemmOut::f32, false, stream_);
    if (processing) {
      const uint8_t* dev = w.processing.as<uint8_t>();
      kc::process_rows(w.logits.as<float>(), first, rows, c.vocab_size, reinterpret_cast<const kc::ProcessRowJob*>(dev),
                       static_cast<int32_t>(b.jobs.row_processing.size()),
                       reinterpret_cast<const kc::LogitBiasEntry*>(dev + w.off_biases),
                       reinterpret_cast<const uint32_t*>(dev + w.off_masks), stream_);
    }
    if (sampling) {
      for (int64_t s = 0; s < rows; s += kSampleRowsPerLaunch)
        kc::sample_rows(w.logits.as<float>() + s * c.vocab_size, std::min<int64_t>(kSampleRowsPerLaunch, rows - s),
                        c.vocab_size, w.sampling.as<kc::SampleRowParams>() + first + s,
                        w.penalties.as<kc::PenaltyEntry>(), w.argmax.as<int32_t>() + first + s,
                        w.sampling_scratch.get(), stream_);
    } else if (tokens != nullptr) {
      kc::row_argmax(w.logits.as<float>(), rows, c.vocab_size, w.argmax.as<int32_t>() + first, stream_);
    }
    if (verifying) run_verifies(b);
    // Download runs of rows that are wanted whole.
    for (int64_t i = 0; i < rows;) {
      if (!wanted(first + i)) {
        ++i;
        continue;
      }
      int64_t j = i + 1;
      while (j < rows && wanted(first + j)) ++j;
      kc::check_cuda(cudaMemcpyAsync(logits + (first + i) * c.vocab_size, w.logits.as<float>() + i * c.vocab_size,
                                     static_cast<size_t>((j - i) * c.vocab_size) * 4, cudaMemcpyDeviceToHost, stream_),
                     "logits download");
      i = j;
    }
  }
  if (tokens != nullptr && n_out > 0)
    kc::check_cuda(cudaMemcpyAsync(tokens, w.argmax.get(), static_cast<size_t>(n_out) * 4, cudaMemcpyDeviceToHost,
                                   stream_),
                   "token download");
  if (verifying) {
    const size_t jobs = b.jobs.verifies.size();
    auto* host = w.verify_staging.as<uint8_t>();
    kc::check_cuda(cudaMemcpyAsync(host + w.off_accepted, w.verify.as<uint8_t>() + w.off_accepted,
                                   w.off_final + jobs * 4 - w.off_accepted, cudaMemcpyDeviceToHost, stream_),
                   "verify download");
  }
  kc::check_cuda(cudaStreamSynchronize(stream_), "forward pass");
  if (verifying) {  // a verify's rows give its emitted tokens, then -1
    const auto* host = w.verify_staging.as<uint8_t>();
    const auto* accepted = reinterpret_cast<const int32_t*>(host + w.off_accepted);
    const auto* final_token = reinterpret_cast<const int32_t*>(host + w.off_final);
    for (size_t j = 0; j < b.jobs.verifies.size(); ++j) {
      const RowVerify& v = b.jobs.verifies[j];
      EXACTLY_CHECK(accepted[j] >= 0 && accepted[j] <= v.num_drafts && final_token[j] >= 0,
                    "verify %zu: the kernel refused the job", j);
      for (int32_t i = 0; i <= v.num_drafts; ++i)
        tokens[v.first_row + i] = i < accepted[j]    ? b.jobs.verify_drafts[static_cast<size_t>(v.draft_begin + i)]
                                  : i == accepted[j] ? final_token[j]
                                                     : -1;
    }
  }
}

// Stages the verifies' arrays (their rows' real parameters apart: the
// sampling kernel leaves those rows as they are) and uploads them.
void CudaLlamaModel::upload_verifies(const ForwardBatch& b) {
  Workspace& w = *ws_;
  const size_t rows = b.input.logits_rows.size();
  auto* params = w.verify_params_staging.as<RowSampling>();
  for (size_t i = 0; i < rows; ++i) params[i] = b.jobs.row_use[i] == RowUse::kVerify ? b.jobs.row_sampling[i] : RowSampling{};
  kc::check_cuda(cudaMemcpyAsync(w.verify_params.get(), params, rows * sizeof(RowSampling), cudaMemcpyHostToDevice,
                                 stream_),
                 "verify upload");
  const auto S = static_cast<size_t>(w.seqs);
  EXACTLY_CHECK(b.jobs.verifies.size() <= S && b.jobs.verify_drafts.size() <= S * kMaxDrafts &&
                    b.jobs.q_offsets.size() <= S * (kMaxDrafts + 1) &&
                    static_cast<int64_t>(b.jobs.q_entries.size()) <= w.q_capacity &&
                    b.jobs.verify_uniforms.size() <= S * (kMaxDrafts + 1),
                "verify arrays beyond the workspace (%zu jobs)", b.jobs.verifies.size());
  auto* host = w.verify_staging.as<uint8_t>();
  auto put = [&](size_t off, const void* src, size_t bytes) {
    std::memcpy(host + off, src, bytes);
    kc::check_cuda(cudaMemcpyAsync(w.verify.as<uint8_t>() + off, host + off, bytes, cudaMemcpyHostToDevice, stream_),
                   "verify upload");
  };
  put(w.off_drafts, b.jobs.verify_drafts.data(), b.jobs.verify_drafts.size() * 4);
  put(w.off_q_offsets, b.jobs.q_offsets.data(), b.jobs.q_offsets.size() * 4);
  if (!b.jobs.q_entries.empty()) put(w.off_q_entries, b.jobs.q_entries.data(), b.jobs.q_entries.size() * sizeof(DraftProb));
  put(w.off_uniforms, b.jobs.verify_uniforms.data(), b.jobs.verify_uniforms.size() * 8);
}

// Verifies in groups of jobs whose rows span at most kSampleRowsPerLaunch
// (the scratch's size), each group's rows counted from its first.
void CudaLlamaModel::run_verifies(const ForwardBatch& b) {
  const ModelConfig& c = config_;
  Workspace& w = *ws_;
  auto* host = w.verify_staging.as<uint8_t>();
  auto* jobs = reinterpret_cast<RowVerify*>(host + w.off_jobs);
  auto* dev = w.verify.as<uint8_t>();
  for (size_t first = 0; first < b.jobs.verifies.size();) {
    const int32_t base = b.jobs.verifies[first].first_row;
    size_t last = first + 1;
    while (last < b.jobs.verifies.size() &&
           b.jobs.verifies[last].first_row + b.jobs.verifies[last].num_drafts + 1 - base <= kSampleRowsPerLaunch)
      ++last;
    const RowVerify& end = b.jobs.verifies[last - 1];
    const int64_t span = end.first_row + end.num_drafts + 1 - base;
    for (size_t j = first; j < last; ++j) {
      jobs[j] = b.jobs.verifies[j];
      jobs[j].first_row -= base;
    }
    kc::check_cuda(cudaMemcpyAsync(dev + w.off_jobs + first * sizeof(RowVerify), jobs + first,
                                   (last - first) * sizeof(RowVerify), cudaMemcpyHostToDevice, stream_),
                   "verify upload");
    kc::verify_drafts(w.logits.as<float>() + int64_t{base} * c.vocab_size, span, c.vocab_size,
                      w.verify_params.as<kc::SampleRowParams>() + base, w.penalties.as<kc::PenaltyEntry>(),
                      reinterpret_cast<const kc::VerifyJob*>(dev + w.off_jobs) + first,
                      static_cast<int32_t>(last - first), reinterpret_cast<const int32_t*>(dev + w.off_drafts),
                      reinterpret_cast<const int32_t*>(dev + w.off_q_offsets),
                      reinterpret_cast<const kc::DraftProb*>(dev + w.off_q_entries),
                      reinterpret_cast<const double*>(dev + w.off_uniforms),
                      reinterpret_cast<int32_t*>(dev + w.off_accepted) + first,
                      reinterpret_cast<int32_t*>(dev + w.off_final) + first, w.sampling_scratch.get(), stream_);
    first = last;
  }
}

std::string CudaLlamaModel::memory_report() const {
  const Workspace& w = *ws_;
  const size_t workspace = w.x.bytes() + w.h.bytes() + w.qkv.bytes() + w.q.bytes() + w.attn.bytes() +
                           w.gate_up.bytes() + w.act.bytes() + w.last.bytes() + w.logits.bytes() + w.argmax.bytes() +
                           w.decode.bytes() + w.index.bytes() + w.sampling.bytes() + w.sampling_scratch.bytes() +
                           w.penalties.bytes() + w.verify_params.bytes() + w.verify.bytes() +
                           gemm_->workspace_bytes();
  return strformat("GPU memory: weights %s, activation workspace %s, %lld step graphs made (%zu live) %s",
                   human_bytes(static_cast<double>(weights_.bytes())).c_str(),
                   human_bytes(static_cast<double>(workspace)).c_str(), static_cast<long long>(graphs_made_),
                   graphs_.size(), human_bytes(static_cast<double>(graph_bytes_)).c_str());
}

}  // namespace exactly
