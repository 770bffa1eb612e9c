#include "model/cuda/cuda_runner.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/format.h"
#include "core/half.h"
#include "kernels/cuda/layer_ops.h"
#include "model/cuda/kv_pool_cuda.h"
#include "model/cuda/step_trace.h"

namespace exactly {

namespace kc = kernels::cuda;

namespace {

// kMaxGraphQuery, or EXACTLY_GRAPH_MAX_QUERY (1 replays decode steps alone:
// what verifies cost when launched from the host, for benchmarks).
int32_t graph_max_query() {
  static const int32_t bound = [] {
    const char* env = std::getenv("EXACTLY_GRAPH_MAX_QUERY");
    const int32_t v = env == nullptr ? CudaRunner::kMaxGraphQuery : std::atoi(env);
    return std::clamp<int32_t>(v, 1, CudaRunner::kMaxGraphQuery);
  }();
  return bound;
}

}  // namespace

CudaRunner::CudaRunner(const ModelConfig& config, const CudaModelOptions& options, CudaArchitecture& arch)
    : config_(config), options_(options), arch_(arch), attention_(options.deterministic), graphs_(kMaxStepGraphs) {
  kc::check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
}

CudaRunner::~CudaRunner() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

void CudaRunner::reserve(const ModelLimits& limits) {
  limits_ = limits;
  const int32_t blocks = (limits.max_model_len + limits.block_size - 1) / std::max(1, limits.block_size);
  ensure_workspace(limits.max_batch_tokens, limits.max_seqs, blocks, limits.max_model_len);
  // Planning a product takes a cuBLASLt query, and in the canonical order
  // timing the candidates of its row bucket: about a millisecond a shape.
  // Done here, at load, for the row counts that come first, the first steps
  // of a run or a server's first requests do not pay it; other row counts
  // take a plan on first use (their bucket already timed up to kTunedRows).
  arch_.prepare_products(limits.max_batch_tokens, ws_.logits_rows, stream_);
}

int64_t CudaRunner::default_kv_cache_memory(double utilization) const {
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

void CudaRunner::ensure_workspace(int64_t tokens, int32_t seqs, int32_t blocks, int32_t max_seq_len) {
  Workspace& w = ws_;
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
    // Logits are computed in chunks of at most this many rows: enough for
    // every sequence's verify of up to 16 drafts, without a [tokens, vocab]
    // buffer for long prompts.
    w.logits_rows = static_cast<int32_t>(std::min<int64_t>(w.tokens, std::max<int64_t>(256, int64_t{w.seqs} * 17)));
    arch_.allocate_activations(w.tokens, w.logits_rows);
    w.logits = kc::DeviceBuffer(static_cast<size_t>(w.logits_rows) * static_cast<size_t>(c.vocab_size) * 4, "logits");
    w.argmax = kc::DeviceBuffer(T * 4, "argmax");
    w.argmax_probability = kc::DeviceBuffer(T * 4, "argmax probabilities");
    allocate_index(T, static_cast<size_t>(w.seqs), static_cast<size_t>(w.blocks));
    if (arch_.reads_hidden_in()) {
      w.hidden_in = kc::DeviceBuffer(T * static_cast<size_t>(c.dim) * 2, "a draft head's input");
      w.hidden_in_staging = kc::PinnedBuffer(T * static_cast<size_t>(c.dim) * 2, "a draft head's input (host)");
    }
    w.hidden_out = {};  // made again, at the new size, when asked for
    rows_.resize(w.tokens, w.seqs, w.logits_rows, c.vocab_size);
  }
  // The decode workspace (split-KV partials, or in the canonical order the
  // exact rows' split path) follows the largest batch and context seen (the
  // sequence count may have grown above without the context growing).
  w.max_seq_len = std::max(w.max_seq_len, max_seq_len);
  {
    const int64_t bytes =
        options_.deterministic
            ? kc::exact_rows_workspace_bytes(c.n_kv_heads, c.n_heads / c.n_kv_heads, w.max_seq_len)
            : kc::decode_workspace_bytes(w.seqs, c.n_heads, w.max_seq_len, c.head_dim);
    if (static_cast<size_t>(bytes) > w.decode_bytes) {
      kc::check_cuda(cudaStreamSynchronize(stream_), "workspace");
      graphs_.clear();
      w.decode = kc::DeviceBuffer(static_cast<size_t>(bytes), "decode attention");
      w.decode_bytes = static_cast<size_t>(bytes);
      attention_.set_decode_workspace(w.decode.get(), static_cast<int64_t>(w.decode_bytes));
    }
  }
}

// The index arrays of T tokens of S sequences with tables of B blocks, in
// one device allocation and its pinned host twin.
void CudaRunner::allocate_index(size_t T, size_t S, size_t B) {
  Workspace& w = ws_;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off += (bytes + 15) / 16 * 16;
    return at;
  };
  w.off_tokens = take(T * 4);
  w.off_positions = take(T * 4);
  w.off_slots = take(T * 8);
  w.off_query_start = take((S + 1) * 4);
  w.off_seq_lens = take(S * 4);
  w.off_tables = take(S * B * 4);
  w.off_rows = take(T * 4);
  w.off_hidden_rows = take(T * 4);
  w.index_bytes = off;
  w.index = kc::DeviceBuffer(off, "batch indices");
  w.staging = kc::PinnedBuffer(off, "batch indices (host)");
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
void CudaRunner::upload_batch(const ModelInput& b, StepShape shape) {
  Workspace& w = ws_;
  auto* host = w.staging.as<uint8_t>();
  const auto n = static_cast<size_t>(b.num_tokens());
  const auto seqs = static_cast<size_t>(b.num_seqs());
  auto at = [&](size_t off) { return host + off; };
  auto* tokens = reinterpret_cast<int32_t*>(at(w.off_tokens));
  auto* positions = reinterpret_cast<int32_t*>(at(w.off_positions));
  auto* slots = reinterpret_cast<int64_t*>(at(w.off_slots));
  auto* query_start = reinterpret_cast<int32_t*>(at(w.off_query_start));
  auto* seq_lens = reinterpret_cast<int32_t*>(at(w.off_seq_lens));
  auto* rows = reinterpret_cast<int32_t*>(at(w.off_rows));
  const auto padded = static_cast<size_t>(std::max<int32_t>(shape.seqs, b.num_seqs()));
  if (shape.query == 0) {
    std::memcpy(tokens, b.tokens.data(), n * 4);
    std::memcpy(positions, b.positions.data(), n * 4);
    std::memcpy(slots, b.slot_mapping.data(), n * 8);
    std::memcpy(query_start, b.query_start.data(), (seqs + 1) * 4);
    std::memcpy(seq_lens, b.seq_lens.data(), seqs * 4);
    std::memcpy(rows, b.logits_rows.data(), b.logits_rows.size() * 4);
  } else {
    const auto q = static_cast<size_t>(shape.query);
    padded_index_.resize(n);
    for (size_t s = 0; s < padded; ++s) {
      const size_t base = s * q;
      query_start[s] = static_cast<int32_t>(base);
      size_t len = 0;
      int32_t next_position = 0;
      if (s < seqs) {
        const auto begin = static_cast<size_t>(b.query_start[s]);
        len = static_cast<size_t>(b.query_start[s + 1]) - begin;
        std::memcpy(tokens + base, b.tokens.data() + begin, len * 4);
        std::memcpy(positions + base, b.positions.data() + begin, len * 4);
        std::memcpy(slots + base, b.slot_mapping.data() + begin, len * 8);
        for (size_t t = 0; t < len; ++t) padded_index_[begin + t] = static_cast<int32_t>(base + t);
        next_position = b.positions[begin + len - 1] + 1;
        seq_lens[s] = b.seq_lens[s] + static_cast<int32_t>(q - len);
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
    for (size_t r = 0; r < b.logits_rows.size(); ++r) rows[r] = padded_index_[static_cast<size_t>(b.logits_rows[r])];
  }
  auto* hidden_rows = reinterpret_cast<int32_t*>(at(w.off_hidden_rows));
  for (size_t r = 0; r < b.hidden_rows.size(); ++r) {
    const auto t = static_cast<size_t>(b.hidden_rows[r]);
    hidden_rows[r] = shape.query == 0 ? static_cast<int32_t>(t) : padded_index_[t];
  }
  auto* tables = reinterpret_cast<int32_t*>(at(w.off_tables));
  const auto stride = static_cast<size_t>(w.blocks), given = static_cast<size_t>(b.max_blocks_per_seq);
  for (size_t s = 0; s < seqs; ++s) {
    std::memcpy(tables + s * stride, b.block_tables.data() + s * given, given * 4);
    std::memset(tables + s * stride + given, 0, (stride - given) * 4);
  }
  std::memset(tables + seqs * stride, 0, (padded - seqs) * stride * 4);
  // Only the used part of each array travels: everything up to the end of
  // the block tables in use, then the logits rows.
  const size_t head = w.off_tables + padded * stride * 4;
  kc::check_cuda(cudaMemcpyAsync(w.index.get(), host, head, cudaMemcpyHostToDevice, stream_), "batch upload");
  kc::check_cuda(cudaMemcpyAsync(w.index.as<uint8_t>() + w.off_rows, rows, b.logits_rows.size() * 4,
                                 cudaMemcpyHostToDevice, stream_),
                 "batch upload");
  if (!b.hidden_rows.empty())
    kc::check_cuda(cudaMemcpyAsync(w.index.as<uint8_t>() + w.off_hidden_rows, hidden_rows, b.hidden_rows.size() * 4,
                                   cudaMemcpyHostToDevice, stream_),
                   "batch upload");
  if (arch_.reads_hidden_in()) upload_hidden_in(b, shape);
}

// Padding tokens read zeros; their rows are never wanted.
void CudaRunner::upload_hidden_in(const ModelInput& b, StepShape shape) {
  Workspace& w = ws_;
  const auto n = static_cast<size_t>(b.num_tokens()), dim = static_cast<size_t>(config_.dim);
  EXACTLY_CHECK(b.hidden_in.size() == n * dim, "a draft head's pass without its hidden states (%zu floats for %zu tokens)",
                b.hidden_in.size(), n);
  const size_t padded = shape.query == 0 ? n : static_cast<size_t>(shape.seqs) * static_cast<size_t>(shape.query);
  auto* host = w.hidden_in_staging.as<uint16_t>();
  if (padded > n) std::memset(host, 0, padded * dim * 2);
  for (size_t t = 0; t < n; ++t) {
    const size_t at = shape.query == 0 ? t : static_cast<size_t>(padded_index_[t]);
    for (size_t i = 0; i < dim; ++i) host[at * dim + i] = float_to_bf16(b.hidden_in[t * dim + i]);
  }
  kc::check_cuda(cudaMemcpyAsync(w.hidden_in.get(), host, padded * dim * 2, cudaMemcpyHostToDevice, stream_),
                 "a draft head's input upload");
}

bool CudaRunner::samples_rows() const {
  static const bool on = [] {
    const char* env = std::getenv("EXACTLY_CUDA_SAMPLING");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

int64_t CudaRunner::verified_draft_entries() const { return samples_rows() ? rows_.q_capacity() : 0; }

CudaStepTokens CudaRunner::step_tokens(int64_t n) const {
  const auto* idx = ws_.index.as<uint8_t>();
  return {reinterpret_cast<const int32_t*>(idx + ws_.off_tokens),
          reinterpret_cast<const int32_t*>(idx + ws_.off_positions),
          reinterpret_cast<const int64_t*>(idx + ws_.off_slots), n,
          arch_.reads_hidden_in() ? ws_.hidden_in.get() : nullptr};
}

void CudaRunner::forward(const ForwardBatch& batch, CudaKVPool& kv, float* logits, int num_layers, int32_t* tokens) {
  const ModelInput& b = batch.input;
  const int64_t n = b.num_tokens();
  int32_t max_q = 0, max_len = 0;
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    max_q = std::max(max_q, b.query_start[static_cast<size_t>(s) + 1] - b.query_start[static_cast<size_t>(s)]);
    max_len = std::max(max_len, b.seq_lens[static_cast<size_t>(s)]);
  }
  ensure_workspace(n, b.num_seqs(), b.max_blocks_per_seq, max_len);
  Workspace& w = ws_;
  EXACTLY_CHECK(static_cast<int64_t>(b.logits_rows.size()) <= w.tokens, "%zu logits rows for %lld tokens",
                b.logits_rows.size(), static_cast<long long>(w.tokens));

  auto* idx = w.index.as<uint8_t>();
  const kc::AttentionBatchDevice attn{b.num_seqs(),
                                      reinterpret_cast<const int32_t*>(idx + w.off_query_start),
                                      reinterpret_cast<const int32_t*>(idx + w.off_seq_lens),
                                      reinterpret_cast<const int32_t*>(idx + w.off_tables),
                                      w.blocks,
                                      max_q,
                                      max_len,
                                      w.tokens};
  last_forward_was_setup_ = false;
  if (StepTrace* t = StepTrace::get()) t->mark(StepTrace::kStart, stream_);
  std::optional<StepShape> shape;
  if (options_.cuda_graphs)
    shape = graph_shape(b, max_q, kv.block_size(), graph_max_query(), {w.tokens, w.seqs, w.blocks});
  if (shape) {
    run_graph(b, kv, attn, *shape, num_layers);
  } else {
    upload_batch(b, StepShape{b.num_seqs(), 0});
    attention_.plan(b, attn, max_q == 1 && n == b.num_seqs());
    arch_.run_layers(step_tokens(n), kv, attention_, num_layers, stream_);
  }
  if (StepTrace* t = StepTrace::get()) t->mark(StepTrace::kLayers, stream_);
  compute_hidden(b);
  compute_logits(batch, logits, tokens);
  unpack_hidden(b);
  if (StepTrace* t = StepTrace::get()) t->print(n, static_cast<int64_t>(b.logits_rows.size()));
}

void CudaRunner::compute_hidden(const ModelInput& b) {
  Workspace& w = ws_;
  const auto n = static_cast<size_t>(b.hidden_rows.size()), dim = static_cast<size_t>(config_.dim);
  if (n == 0) return;
  const size_t bytes = static_cast<size_t>(w.tokens) * dim * 2;
  if (w.hidden_out.bytes() < bytes) {
    w.hidden_out = kc::DeviceBuffer(bytes, "hidden states");
    w.hidden_out_staging = kc::PinnedBuffer(bytes, "hidden states (host)");
  }
  const auto* rows = reinterpret_cast<const int32_t*>(w.index.as<uint8_t>() + w.off_hidden_rows);
  arch_.final_norm(rows, static_cast<int64_t>(n), w.hidden_out.get(), stream_);
  kc::check_cuda(cudaMemcpyAsync(w.hidden_out_staging.get(), w.hidden_out.get(), n * dim * 2, cudaMemcpyDeviceToHost,
                                 stream_),
                 "hidden states download");
}

void CudaRunner::unpack_hidden(const ModelInput& b) {
  const size_t count = b.hidden_rows.size() * static_cast<size_t>(config_.dim);
  hidden_.resize(count);
  const auto* host = ws_.hidden_out_staging.as<uint16_t>();
  for (size_t i = 0; i < count; ++i) hidden_[i] = bf16_to_float(host[i]);
}

void CudaRunner::run_graph(const ModelInput& b, CudaKVPool& kv, kc::AttentionBatchDevice attn, StepShape shape,
                           int num_layers) {
  Workspace& w = ws_;
  upload_batch(b, shape);
  // The graph is made for a bound on the padded contexts: a multiple of
  // kDecodeContextGranule.
  int32_t max_len = shape.query;
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    const auto i = static_cast<size_t>(s);
    max_len = std::max(max_len, b.seq_lens[i] + shape.query - (b.query_start[i + 1] - b.query_start[i]));
  }
  const int32_t granules = (max_len + kc::kDecodeContextGranule - 1) / kc::kDecodeContextGranule;
  attn.n_seqs = shape.seqs;
  attn.max_query_len = shape.query;
  attn.max_seq_len = std::max(std::min(granules * kc::kDecodeContextGranule, w.blocks * kv.block_size()), max_len);
  const int64_t tokens = int64_t{shape.seqs} * shape.query;
  // The pool's address and size are baked into the graph with everything else.
  const CudaGraphCache::Key key{shape.seqs, shape.query, attn.max_seq_len, num_layers, kv.layer(0).k, kv.num_blocks()};
  graphs_.run(
      key, stream_,
      [&] {
        attention_.plan_uniform(attn, shape.query);  // a replay needs no plan: the graph holds its launches
        arch_.run_layers(step_tokens(tokens), kv, attention_, num_layers, stream_);
      },
      last_forward_was_setup_);
}

// Only the rows that need logits go through the final norm and the head, in
// chunks that fit the logits buffer; rows wanted for their token alone stay
// on the GPU (a 128k vocabulary is half a megabyte a row), their argmax or
// their sample computed there.
void CudaRunner::compute_logits(const ForwardBatch& b, float* logits, int32_t* tokens) {
  const ModelConfig& c = config_;
  Workspace& w = ws_;
  const RowJobs& j = b.jobs;
  const auto n_out = static_cast<int64_t>(b.input.logits_rows.size());
  const auto* d_rows = reinterpret_cast<const int32_t*>(w.index.as<uint8_t>() + w.off_rows);
  const bool verifying = tokens != nullptr && !j.verifies.empty();
  const bool sampling = verifying || (tokens != nullptr && std::find(j.row_use.begin(), j.row_use.end(),
                                                                     RowUse::kSample) != j.row_use.end());
  if (sampling) rows_.upload_sampling(b, stream_);
  const bool processing = sampling && !j.row_processing.empty();
  const bool probabilities = tokens != nullptr && j.argmax_probabilities;
  EXACTLY_CHECK(!probabilities || !sampling, "argmax probabilities in a step that samples rows");
  if (verifying) {
    EXACTLY_CHECK(n_out <= w.logits_rows, "%lld logits rows with verifies exceed one chunk of %d",
                  static_cast<long long>(n_out), w.logits_rows);
    rows_.upload_verifies(b, stream_);
  }
  for (int64_t first = 0; first < n_out; first += w.logits_rows) {
    const int64_t rows = std::min<int64_t>(w.logits_rows, n_out - first);
    arch_.final_norm_and_head(d_rows + first, rows, w.logits.as<float>(), stream_);
    StepTrace* trace = first == 0 ? StepTrace::get() : nullptr;
    if (trace) trace->mark(StepTrace::kHead, stream_);
    // The masks are awaited once the first rows' head is queued: the grammar
    // threads have the layers' time and the head's to fill them.
    if (processing && first == 0) {
      if (trace) trace->begin_wait();
      rows_.upload_processing(j, c.vocab_size, stream_);
      if (trace) trace->end_wait();
    }
    if (processing)
      rows_.process(w.logits.as<float>(), first, rows, c.vocab_size, static_cast<int32_t>(j.row_processing.size()),
                    stream_);
    if (trace) trace->mark(StepTrace::kProcessed, stream_);
    if (sampling) {
      rows_.sample(w.logits.as<float>(), first, rows, c.vocab_size, w.argmax.as<int32_t>(), stream_);
    } else if (tokens != nullptr) {
      kc::row_argmax(w.logits.as<float>(), rows, c.vocab_size, w.argmax.as<int32_t>() + first, stream_,
                     probabilities ? w.argmax_probability.as<float>() + first : nullptr);
    }
    if (verifying) rows_.run_verifies(j, w.logits.as<float>(), c.vocab_size, stream_);
    download_logits(b, first, rows, logits, tokens);
  }
  if (tokens != nullptr && n_out > 0)
    kc::check_cuda(
        cudaMemcpyAsync(tokens, w.argmax.get(), static_cast<size_t>(n_out) * 4, cudaMemcpyDeviceToHost, stream_),
        "token download");
  if (verifying) rows_.download_outcomes(j.verifies.size(), stream_);
  if (probabilities) {
    argmax_probabilities_.resize(static_cast<size_t>(n_out));
    kc::check_cuda(cudaMemcpyAsync(argmax_probabilities_.data(), w.argmax_probability.get(),
                                   static_cast<size_t>(n_out) * 4, cudaMemcpyDeviceToHost, stream_),
                   "argmax probabilities download");
  }
  if (StepTrace* t = StepTrace::get()) t->mark(StepTrace::kEnd, stream_);
  kc::check_cuda(cudaStreamSynchronize(stream_), "forward pass");
  if (StepTrace* t = StepTrace::get()) t->synchronised();
  if (verifying) rows_.write_verified_tokens(j, tokens);  // a verify's rows give its emitted tokens, then -1
}

// Download runs of rows that are wanted whole.
void CudaRunner::download_logits(const ForwardBatch& b, int64_t first, int64_t rows, float* logits, int32_t* tokens) {
  const int64_t vocab = config_.vocab_size;
  auto wanted = [&](int64_t r) {
    return tokens == nullptr || b.jobs.row_use.empty() || b.jobs.row_use[static_cast<size_t>(r)] == RowUse::kLogits;
  };
  const float* chunk = ws_.logits.as<float>();
  for (int64_t i = 0; i < rows;) {
    if (!wanted(first + i)) {
      ++i;
      continue;
    }
    int64_t j = i + 1;
    while (j < rows && wanted(first + j)) ++j;
    kc::check_cuda(cudaMemcpyAsync(logits + (first + i) * vocab, chunk + i * vocab,
                                   static_cast<size_t>((j - i) * vocab) * 4, cudaMemcpyDeviceToHost, stream_),
                   "logits download");
    i = j;
  }
}

std::string CudaRunner::memory_report() const {
  const Workspace& w = ws_;
  const size_t workspace = arch_.activation_memory() + w.logits.bytes() + w.argmax.bytes() + w.decode.bytes() +
                           w.index.bytes() + rows_.bytes() + w.hidden_in.bytes() + w.hidden_out.bytes() +
                           w.argmax_probability.bytes();
  return strformat("GPU memory: weights %s, activation workspace %s, %lld step graphs made (%zu live) %s",
                   human_bytes(static_cast<double>(arch_.weight_memory())).c_str(),
                   human_bytes(static_cast<double>(workspace)).c_str(), static_cast<long long>(graphs_.made()),
                   graphs_.live(), human_bytes(static_cast<double>(graphs_.bytes())).c_str());
}

}  // namespace exactly
