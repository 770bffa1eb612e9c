#include "engine/speculator.h"

#include <algorithm>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "kvcache/capacity.h"

namespace exactly {

Speculator::Speculator(const SpecMethod& method, LoadedModel& target, Model* draft, KVPool& target_kv,
                       KVCacheManager& target_kv_manager, const EngineConfig& config, int64_t draft_kv_memory)
    : method_(method), rejection_sampler_(config.acceptance_rule), vocab_size_(target.config().vocab_size) {
  // Scratch for draft distributions indexed by id and for the residual of a
  // rejection, faulted in now rather than inside the first verify or the
  // first rejection (see the Engine's constructor).
  if (method.kind == SpecMethod::Kind::kDraftModel || method.kind == SpecMethod::Kind::kLayerSkip ||
      method.kind == SpecMethod::Kind::kHead)
    dense_q_.assign(static_cast<size_t>(std::max(0, config.num_speculative_tokens)),
                    std::vector<double>(static_cast<size_t>(vocab_size_), 0.0));
  if (method.kind != SpecMethod::Kind::kNone) rejection_sampler_.reserve(static_cast<size_t>(vocab_size_));
  switch (method.kind) {
    case SpecMethod::Kind::kNone:
      break;
    case SpecMethod::Kind::kNgram:
      break;
    case SpecMethod::Kind::kLayerSkip: {
      const int32_t n_layers = target.config().n_layers;
      if (method.layers < 1 || method.layers > n_layers)
        throw Error(strformat("--spec layerskip:%d: L must be between 1 and %d, the target's number of layers",
                              method.layers, n_layers),
                    ExitCode::kUsage);
      drafter_ = std::make_unique<ModelDrafter>(*target.model, method.layers, target_kv, target_kv_manager,
                                                ModelDrafter::Cache::kTarget, config.max_num_batched_tokens);
      break;
    }
    case SpecMethod::Kind::kDraftModel:
    case SpecMethod::Kind::kHead: {
      EXACTLY_CHECK(draft != nullptr, "draft:PATH or head:PATH without a loaded draft");
      const int64_t per_slot = draft->kv_bytes_per_slot();
      const int32_t blocks = num_blocks_for_memory(draft_kv_memory, per_slot, config.block_size);
      if (blocks < 1)
        throw Error(strformat("the draft model's KV cache of %s holds no block of %d tokens (%s per token); "
                              "raise --kv-cache-memory or --draft-kv-cache-memory",
                              human_bytes(static_cast<double>(draft_kv_memory)).c_str(), config.block_size,
                              human_bytes(static_cast<double>(per_slot)).c_str()),
                    ExitCode::kUsage);
      draft_kv_storage_ = draft->make_kv_pool(blocks, config.block_size);
      draft_kv_manager_ = std::make_unique<KVCacheManager>(blocks, config.block_size, config.enable_prefix_caching,
                                                           draft->config().kv_window());
      if (method.kind == SpecMethod::Kind::kHead) hidden_ = std::make_unique<TargetHiddenStates>(draft->config().dim);
      drafter_ = std::make_unique<ModelDrafter>(*draft, draft->config().n_layers, *draft_kv_storage_,
                                                *draft_kv_manager_, ModelDrafter::Cache::kOwn,
                                                config.max_num_batched_tokens, hidden_.get());
      weight_fraction_ = static_cast<double>(draft->weight_bytes()) / static_cast<double>(target.model->weight_bytes());
      break;
    }
  }
}

Speculator::~Speculator() = default;

void Speculator::propose(std::span<const DraftJob> jobs, ThreadPool& pool) {
  std::vector<const DraftJob*> model_jobs;
  for (const DraftJob& j : jobs) {
    if (!j.lookup && drafter_) {
      model_jobs.push_back(&j);
      continue;
    }
    std::vector<int32_t> drafts = lookup_.propose(j.request->tokens, j.k);
    if (j.lookup) drafts.resize(static_cast<size_t>(j.k), j.request->tokens.back());
    j.request->draft_tokens = std::move(drafts);
    recycle(*j.dists);  // one-hot: verified without distributions
    if (j.confidence) j.confidence->clear();
  }
  if (model_jobs.empty()) return;
  std::vector<DraftRequest> requests;
  requests.reserve(model_jobs.size());
  for (const DraftJob* j : model_jobs)
    requests.push_back({j->request->id, j->request->tokens, static_cast<size_t>(j->request->num_prompt_tokens), j->k,
                        j->drafter, j->continue_above, j->confidence_scale});
  std::vector<Drafts> drafts = drafter_->propose(requests, pool);
  for (size_t i = 0; i < model_jobs.size(); ++i) {
    model_jobs[i]->request->draft_tokens = std::move(drafts[i].tokens);
    drafter_->recycle(*model_jobs[i]->dists);
    *model_jobs[i]->dists = std::move(drafts[i].dists);
    if (model_jobs[i]->confidence) *model_jobs[i]->confidence = std::move(drafts[i].confidence);
  }
  for (const DraftPass& p : drafter_->last_passes()) {
    if (!p.setup) draft_cost_.observe(p.tokens, p.seconds);
    draft_tokens_computed_ += p.tokens;
  }
}

void Speculator::fault_in(size_t max_requests, size_t max_drafts) {
  if (drafter_) drafter_->fault_in(max_requests, max_drafts);
}

void Speculator::recycle(std::vector<std::vector<TokenProb>>& dists) {
  if (drafter_) drafter_->recycle(dists);
  dists.clear();
}

VerifyOutcome Speculator::verify(std::span<const int32_t> drafts, std::span<const std::vector<TokenProb>> draft_dists,
                                 const TargetAt& target_at, Sampler& target_sampler) {
  EXACTLY_CHECK(draft_dists.empty() || draft_dists.size() == drafts.size(), "%zu drafts, %zu draft distributions",
                drafts.size(), draft_dists.size());
  if (target_sampler.params().greedy())
    return RejectionSampler::verify_greedy(drafts, [&](size_t i) { return target_at(i).front().id; });
  const auto p = [&](size_t i) { return DistributionView::sparse(std::span<const TokenProb>(target_at(i))); };
  std::vector<DistributionView> q;
  if (draft_dists.empty()) {  // n-gram drafts: each q_i one-hot at its draft
    for (int32_t x : drafts) q.push_back(DistributionView::one_hot(x));
    return rejection_sampler_.verify(drafts, q, p, target_sampler.rng());
  }
  // Without top-k a draft distribution spans the vocabulary, and the
  // residual would look each of p's tokens up in it. Indexed by id, each
  // lookup is O(1). Draws walk p's order, so nothing they return changes.
  constexpr size_t kSparseLimit = 64;
  if (dense_q_.size() < draft_dists.size()) dense_q_.resize(draft_dists.size());
  for (size_t i = 0; i < draft_dists.size(); ++i) {
    if (draft_dists[i].size() <= kSparseLimit) {
      q.push_back(DistributionView::sparse(std::span<const TokenProb>(draft_dists[i])));
      continue;
    }
    std::vector<double>& dense = dense_q_[i];
    dense.assign(static_cast<size_t>(vocab_size_), 0.0);
    for (const TokenProb& e : draft_dists[i]) dense[static_cast<size_t>(e.id)] = e.p;
    q.push_back(DistributionView::dense(std::span<const double>(dense)));
  }
  return rejection_sampler_.verify(drafts, q, p, target_sampler.rng());
}

std::optional<double> Speculator::draft_pass_seconds(int64_t decoding,
                                                     const std::optional<StepCostModel::Fit>& target) const {
  if (!drafter_) return 0.0;
  if (const auto fit = draft_cost_.fit()) return fit->fixed + fit->per_token * static_cast<double>(decoding);
  // A draft model's first pass for a request computes its context too: the
  // mean of such passes is no price for one more position.
  if (target && weight_fraction_ > 0)
    return weight_fraction_ * (target->fixed + target->per_token * static_cast<double>(decoding));
  return draft_cost_.mean_seconds();
}

int64_t Speculator::catch_up_tokens(const Request& r) const {
  return drafter_ ? drafter_->catch_up_tokens(r.id, r.tokens) : 0;
}

std::optional<double> Speculator::catch_up_seconds(const Request& r,
                                                   const std::optional<StepCostModel::Fit>& target) const {
  const int64_t tokens = catch_up_tokens(r);
  if (tokens == 0) return 0.0;
  if (const auto fit = draft_cost_.fit()) return fit->per_token * static_cast<double>(tokens);
  if (target && weight_fraction_ > 0) return weight_fraction_ * target->per_token * static_cast<double>(tokens);
  return std::nullopt;
}

void Speculator::release(RequestId id) {
  if (drafter_) drafter_->release(id);
  if (hidden_) hidden_->release(id);
}

void Speculator::record_hidden(RequestId id, int64_t first, int64_t count, const float* rows) {
  EXACTLY_CHECK(hidden_ != nullptr);
  hidden_->record(id, first, count, rows);
}

void Speculator::fork(RequestId parent, RequestId child) {
  if (hidden_) hidden_->fork(parent, child);
}

}  // namespace exactly
