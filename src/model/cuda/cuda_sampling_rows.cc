#include "model/cuda/cuda_sampling_rows.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cuda/sampling.h"

namespace exactly {

namespace kc = kernels::cuda;

namespace {

// Rows sampled per launch: the kernel's scratch is 8 bytes per logit, so
// it is sized for this many rows rather than for the whole logits buffer.
constexpr int64_t kSampleRowsPerLaunch = 256;

// A verify on the GPU takes draft distributions of at most this many tokens
// per position (its arrays are sized for them with the workspace).
static_assert(CudaSamplingRows::kSparseDraftEntries > 0 && CudaSamplingRows::kDenseDraftRows > 0);

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

void CudaSamplingRows::resize(int64_t tokens, int32_t seqs, int32_t logits_rows, int32_t vocab) {
  const auto T = static_cast<size_t>(tokens);
  seqs_ = seqs;
  sampling_ = kc::DeviceBuffer(T * sizeof(RowSampling), "sampling parameters");
  sampling_staging_ = kc::PinnedBuffer(T * sizeof(RowSampling), "sampling parameters (host)");
  const int64_t scratch_rows = std::min<int64_t>(logits_rows, kSampleRowsPerLaunch);
  scratch_ = kc::DeviceBuffer(
      std::max(kc::sampling_workspace_bytes(scratch_rows, vocab), kc::verify_workspace_bytes(scratch_rows, vocab)),
      "sampling");
  verify_params_ = kc::DeviceBuffer(T * sizeof(RowSampling), "verify parameters");
  verify_params_staging_ = kc::PinnedBuffer(T * sizeof(RowSampling), "verify parameters (host)");
  const auto S = static_cast<size_t>(seqs);
  size_t v = 0;
  auto take = [&](size_t bytes) {
    const size_t at = v;
    v += (bytes + 15) / 16 * 16;
    return at;
  };
  off_jobs_ = take(S * sizeof(RowVerify));
  off_drafts_ = take(S * kMaxDrafts * 4);
  off_q_offsets_ = take(S * (kMaxDrafts + 1) * 4);
  q_capacity_ =
      std::max<int64_t>(static_cast<int64_t>(S) * kMaxDrafts * kSparseDraftEntries, kDenseDraftRows * int64_t{vocab});
  off_q_entries_ = take(static_cast<size_t>(q_capacity_) * sizeof(DraftProb));
  off_uniforms_ = take(S * (kMaxDrafts + 1) * 8);
  off_accepted_ = take(S * 4);
  off_final_ = take(S * 4);
  verify_bytes_ = v;
  verify_ = kc::DeviceBuffer(v, "verify arrays");
  verify_staging_ = kc::PinnedBuffer(v, "verify arrays (host)");
}

size_t CudaSamplingRows::bytes() const {
  return sampling_.bytes() + scratch_.bytes() + penalties_.bytes() + verify_params_.bytes() + verify_.bytes();
}

void CudaSamplingRows::upload_sampling(const ForwardBatch& b, cudaStream_t stream) {
  const size_t rows = b.input.logits_rows.size();
  auto* params = sampling_staging_.as<RowSampling>();
  for (size_t i = 0; i < rows; ++i)
    params[i] = b.jobs.row_use[i] == RowUse::kSample ? b.jobs.row_sampling[i] : RowSampling{};
  kc::check_cuda(cudaMemcpyAsync(sampling_.get(), params, rows * sizeof(RowSampling), cudaMemcpyHostToDevice, stream),
                 "sampling upload");
  const size_t penalty_bytes = b.jobs.penalty_tokens.size() * sizeof(PenaltyToken);
  if (penalty_bytes == 0) return;
  if (penalty_bytes > penalties_.bytes()) {  // the previous step's copies are done: forward() synchronises
    const size_t grown = std::max(penalty_bytes, 2 * penalties_.bytes());
    penalties_ = kc::DeviceBuffer(grown, "penalty tokens");
    penalties_staging_ = kc::PinnedBuffer(grown, "penalty tokens (host)");
  }
  std::memcpy(penalties_staging_.get(), b.jobs.penalty_tokens.data(), penalty_bytes);
  kc::check_cuda(
      cudaMemcpyAsync(penalties_.get(), penalties_staging_.get(), penalty_bytes, cudaMemcpyHostToDevice, stream),
      "sampling upload");
}

// The masks are filled by the engine while the layers run: waiting for them
// here, after the layers are launched, keeps that overlap.
void CudaSamplingRows::upload_processing(const RowJobs& j, int32_t vocab, cudaStream_t stream) {
  const size_t words = (static_cast<size_t>(vocab) + 31) / 32;
  const size_t jobs = j.row_processing.size();
  size_t masks = 0;
  for (const RowProcessing& p : j.row_processing) masks += p.mask != nullptr ? 1 : 0;
  off_biases_ = align8(jobs * sizeof(kc::ProcessRowJob));
  off_masks_ = align8(off_biases_ + j.logit_biases.size() * sizeof(kc::LogitBiasEntry));
  const size_t bytes = off_masks_ + masks * words * sizeof(uint32_t);
  if (bytes > processing_.bytes()) {  // the previous step's copies are done: forward() synchronises
    const size_t grown = std::max(bytes, 2 * processing_.bytes());
    processing_ = kc::DeviceBuffer(grown, "processed rows");
    processing_staging_ = kc::PinnedBuffer(grown, "processed rows (host)");
  }
  if (j.await_masks) j.await_masks();
  auto* host = processing_staging_.as<uint8_t>();
  auto* job = reinterpret_cast<kc::ProcessRowJob*>(host);
  auto* mask = reinterpret_cast<uint32_t*>(host + off_masks_);
  int32_t next_mask = 0;
  for (const RowProcessing& p : j.row_processing) {
    *job++ = {p.row, p.bias_begin, p.bias_end, p.mask != nullptr ? next_mask++ : -1};
    if (p.mask != nullptr) mask = std::copy(p.mask, p.mask + words, mask);
  }
  if (!j.logit_biases.empty())
    std::memcpy(host + off_biases_, j.logit_biases.data(), j.logit_biases.size() * sizeof(LogitBiasEntry));
  kc::check_cuda(cudaMemcpyAsync(processing_.get(), host, bytes, cudaMemcpyHostToDevice, stream),
                 "processed rows upload");
}

// Stages the verifies' arrays (their rows' real parameters apart: the
// sampling kernel leaves those rows as they are) and uploads them.
void CudaSamplingRows::upload_verifies(const ForwardBatch& b, cudaStream_t stream) {
  const RowJobs& j = b.jobs;
  const size_t rows = b.input.logits_rows.size();
  auto* params = verify_params_staging_.as<RowSampling>();
  for (size_t i = 0; i < rows; ++i) params[i] = j.row_use[i] == RowUse::kVerify ? j.row_sampling[i] : RowSampling{};
  kc::check_cuda(
      cudaMemcpyAsync(verify_params_.get(), params, rows * sizeof(RowSampling), cudaMemcpyHostToDevice, stream),
      "verify upload");
  const auto S = static_cast<size_t>(seqs_);
  EXACTLY_CHECK(j.verifies.size() <= S && j.verify_drafts.size() <= S * kMaxDrafts &&
                    j.q_offsets.size() <= S * (kMaxDrafts + 1) &&
                    static_cast<int64_t>(j.q_entries.size()) <= q_capacity_ &&
                    j.verify_uniforms.size() <= S * (kMaxDrafts + 1),
                "verify arrays beyond the workspace (%zu jobs)", j.verifies.size());
  auto* host = verify_staging_.as<uint8_t>();
  auto put = [&](size_t off, const void* src, size_t bytes) {
    std::memcpy(host + off, src, bytes);
    kc::check_cuda(cudaMemcpyAsync(verify_.as<uint8_t>() + off, host + off, bytes, cudaMemcpyHostToDevice, stream),
                   "verify upload");
  };
  put(off_drafts_, j.verify_drafts.data(), j.verify_drafts.size() * 4);
  put(off_q_offsets_, j.q_offsets.data(), j.q_offsets.size() * 4);
  if (!j.q_entries.empty()) put(off_q_entries_, j.q_entries.data(), j.q_entries.size() * sizeof(DraftProb));
  put(off_uniforms_, j.verify_uniforms.data(), j.verify_uniforms.size() * 8);
}

void CudaSamplingRows::process(float* logits, int64_t first, int64_t rows, int32_t vocab, int32_t jobs,
                               cudaStream_t stream) const {
  const uint8_t* dev = processing_.as<uint8_t>();
  kc::process_rows(logits, first, rows, vocab, reinterpret_cast<const kc::ProcessRowJob*>(dev), jobs,
                   reinterpret_cast<const kc::LogitBiasEntry*>(dev + off_biases_),
                   reinterpret_cast<const uint32_t*>(dev + off_masks_), stream);
}

void CudaSamplingRows::sample(float* logits, int64_t first, int64_t rows, int32_t vocab, int32_t* tokens,
                              cudaStream_t stream) const {
  for (int64_t s = 0; s < rows; s += kSampleRowsPerLaunch)
    kc::sample_rows(logits + s * vocab, std::min<int64_t>(kSampleRowsPerLaunch, rows - s), vocab,
                    sampling_.as<kc::SampleRowParams>() + first + s, penalties_.as<kc::PenaltyEntry>(),
                    tokens + first + s, scratch_.get(), stream);
}

// Verifies in groups of jobs whose rows span at most kSampleRowsPerLaunch
// (the scratch's size), each group's rows counted from its first.
void CudaSamplingRows::run_verifies(const RowJobs& j, float* logits, int32_t vocab, cudaStream_t stream) {
  auto* host = verify_staging_.as<uint8_t>();
  auto* jobs = reinterpret_cast<RowVerify*>(host + off_jobs_);
  auto* dev = verify_.as<uint8_t>();
  for (size_t first = 0; first < j.verifies.size();) {
    const int32_t base = j.verifies[first].first_row;
    size_t last = first + 1;
    while (last < j.verifies.size() &&
           j.verifies[last].first_row + j.verifies[last].num_drafts + 1 - base <= kSampleRowsPerLaunch)
      ++last;
    const RowVerify& end = j.verifies[last - 1];
    const int64_t span = end.first_row + end.num_drafts + 1 - base;
    for (size_t i = first; i < last; ++i) {
      jobs[i] = j.verifies[i];
      jobs[i].first_row -= base;
    }
    kc::check_cuda(cudaMemcpyAsync(dev + off_jobs_ + first * sizeof(RowVerify), jobs + first,
                                   (last - first) * sizeof(RowVerify), cudaMemcpyHostToDevice, stream),
                   "verify upload");
    kc::verify_drafts(
        logits + int64_t{base} * vocab, span, vocab, verify_params_.as<kc::SampleRowParams>() + base,
        penalties_.as<kc::PenaltyEntry>(), reinterpret_cast<const kc::VerifyJob*>(dev + off_jobs_) + first,
        static_cast<int32_t>(last - first), reinterpret_cast<const int32_t*>(dev + off_drafts_),
        reinterpret_cast<const int32_t*>(dev + off_q_offsets_),
        reinterpret_cast<const kc::DraftProb*>(dev + off_q_entries_),
        reinterpret_cast<const double*>(dev + off_uniforms_), reinterpret_cast<int32_t*>(dev + off_accepted_) + first,
        reinterpret_cast<int32_t*>(dev + off_final_) + first, scratch_.get(), stream);
    first = last;
  }
}

void CudaSamplingRows::download_outcomes(size_t jobs, cudaStream_t stream) {
  auto* host = verify_staging_.as<uint8_t>();
  kc::check_cuda(cudaMemcpyAsync(host + off_accepted_, verify_.as<uint8_t>() + off_accepted_,
                                 off_final_ + jobs * 4 - off_accepted_, cudaMemcpyDeviceToHost, stream),
                 "verify download");
}

void CudaSamplingRows::write_verified_tokens(const RowJobs& j, int32_t* tokens) const {
  const auto* host = verify_staging_.as<uint8_t>();
  const auto* accepted = reinterpret_cast<const int32_t*>(host + off_accepted_);
  const auto* final_token = reinterpret_cast<const int32_t*>(host + off_final_);
  for (size_t v = 0; v < j.verifies.size(); ++v) {
    const RowVerify& job = j.verifies[v];
    EXACTLY_CHECK(accepted[v] >= 0 && accepted[v] <= job.num_drafts && final_token[v] >= 0,
                  "verify %zu: the kernel refused the job", v);
    for (int32_t i = 0; i <= job.num_drafts; ++i)
      tokens[job.first_row + i] = i < accepted[v]    ? j.verify_drafts[static_cast<size_t>(job.draft_begin + i)]
                                  : i == accepted[v] ? final_token[v]
                                                     : -1;
  }
}

}  // namespace exactly
