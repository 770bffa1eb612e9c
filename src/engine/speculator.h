// The proposer chosen by `--spec` and everything it owns: the n-gram
// matcher, or a model drafter with — for `draft:PATH` — the draft model's own
// paged KV cache (a KVPool on the draft's device and a KVCacheManager over
// its own BlockPool, the same classes as the target's), and the measured
// cost of its passes. The speculation policy decides how many drafts each
// request gets (SpeculationPolicy, from the costs this class reports); the
// speculator makes them and verifies them against the target's
// distributions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/loaded_model.h"
#include "engine/spec_method.h"
#include "engine/speculation_policy.h"
#include "engine/step_cost.h"
#include "kvcache/kv_cache_manager.h"
#include "model/kv_storage.h"
#include "sched/request.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_proposer.h"
#include "speculative/rejection_sampler.h"

namespace exactly {

// One request to draft for.
struct DraftJob {
  Request* request;  // decoding: all but its newest token computed; gets draft_tokens
  int32_t k;         // most drafts wanted, >= 1
  Sampler* drafter;  // the request's sampling settings, with a generator of its own for drawing drafts
  std::vector<std::vector<TokenProb>>* dists;  // gets the draft distributions q (model drafts only)
  // Exactly k drafts that cost nothing to make, whatever the proposer:
  // prompt lookup's, then the newest token repeated. A probe's filler: it
  // measures what verifying costs without a draft model's catch-up.
  bool lookup = false;
  // Model drafts only: a run of drafts ends early once unsure
  // (DraftRequest::continue_above); `confidence` gets each draft's.
  std::optional<double> continue_above;
  double confidence_scale = 1;
  std::vector<double>* confidence = nullptr;
};

class Speculator : public DraftCosts {
 public:
  // `draft` is the model of draft:PATH or the head of head:PATH (null
  // otherwise) and `draft_kv_memory` the bytes of its cache. Throws
  // Error(kUsage) when layerskip's L is not in [1, n_layers] or the draft
  // cache holds no block.
  Speculator(const SpecMethod& method, LoadedModel& target, Model* draft, KVPool& target_kv,
             KVCacheManager& target_kv_manager, const EngineConfig& config, int64_t draft_kv_memory);
  ~Speculator() override;

  bool enabled() const { return method_.kind != SpecMethod::Kind::kNone; }
  // Drafts come from a model's forward passes (draft:PATH, layerskip:L), not a lookup.
  bool drafts_with_model() const override { return drafter_ != nullptr; }
  // The drafter computes a request's context before its first drafts for it
  // (a draft model with its own cache).
  bool catches_up() const override { return drafter_ && drafter_->cache() == ModelDrafter::Cache::kOwn; }

  // Fills each job's request->draft_tokens (and *dists for model drafts); a
  // job may get fewer than k drafts, or none (a lookup job gets k).
  void propose(std::span<const DraftJob> jobs, ThreadPool& pool);

  // Emitted tokens for one request's verify: the target distributions p
  // against the drafts and, for model drafts, their q ([k]; empty for n-gram
  // drafts, which are one-hot). Greedy requests keep drafts while they equal
  // the target's argmax. target_at(i) gives p_{i+1} (i in 0..k); it is asked
  // only for the positions the verification reaches, in order, so the caller
  // processes no logits row past the first rejection (each returned vector
  // must stay valid until verify returns).
  using TargetAt = std::function<const std::vector<TokenProb>&(size_t)>;
  VerifyOutcome verify(std::span<const int32_t> drafts, std::span<const std::vector<TokenProb>> draft_dists,
                       const TargetAt& target_at, Sampler& target_sampler);

  // Seconds one draft position costs (one pass over `decoding` requests):
  // the fit of the drafter's timed passes; until they give one, for a draft
  // model, the target's fitted step (`target`) scaled by the share of the
  // target's weight bytes the draft reads (weight_fraction()), and for layer
  // skipping the passes' mean. 0 for n-gram drafting, which runs no model.
  std::optional<double> draft_pass_seconds(int64_t decoding,
                                           const std::optional<StepCostModel::Fit>& target) const override;

  // Tokens the draft must compute for the request before its first draft.
  int64_t catch_up_tokens(const Request& r) const;
  // Seconds the draft would spend catching up on the request's context
  // before its first draft (0 when it has nothing to catch up on, as for
  // prompt lookup and layerskip): the drafter's fitted cost per token; until
  // its passes give a fit, the target's cost per token (`target`) scaled by
  // weight_fraction().
  std::optional<double> catch_up_seconds(const Request& r,
                                         const std::optional<StepCostModel::Fit>& target) const override;

  // A draft model's weight bytes over the target's (what a pass reads, the
  // embedding lookup aside); 0 without one.
  double weight_fraction() const { return weight_fraction_; }

  // The request has finished: the draft's KV of it is released.
  void release(RequestId id);

  // A model drafter's memory for `max_drafts` drafts for up to
  // `max_requests` requests, faulted in now (ModelDrafter::fault_in).
  void fault_in(size_t max_requests, size_t max_drafts);

  // Draft distributions that are done with (verified, or replaced): a model
  // drafter draws into their storage again. Leaves `dists` empty.
  void recycle(std::vector<std::vector<TokenProb>>& dists);

  // A draft head reads the target's hidden states: the engine asks the
  // target for those of every token it computes and hands them over.
  bool wants_hidden() const { return hidden_ != nullptr; }
  // rows ([count, dim]): the target's hidden states of positions [first, first + count) of request `id`.
  void record_hidden(RequestId id, int64_t first, int64_t count, const float* rows);
  // `child` is forked from `parent` (n > 1): it shares the parent's context.
  void fork(RequestId parent, RequestId child);
  // Requests whose hidden states are kept (released when they end).
  size_t hidden_sequences() const { return hidden_ ? hidden_->num_sequences() : 0; }

  // The draft model's or head's own cache (draft:PATH, head:PATH).
  const KVCacheManager* draft_kv_manager() const { return draft_kv_manager_.get(); }

  // Tokens the drafter's forward passes have computed so far: its drafts'
  // positions and every catch-up on a request's context.
  int64_t draft_tokens_computed() const { return draft_tokens_computed_; }

 private:
  SpecMethod method_;
  NgramProposer lookup_;  // prompt lookup's drafts, and lookup jobs'
  std::unique_ptr<KVPool> draft_kv_storage_;
  std::unique_ptr<KVCacheManager> draft_kv_manager_;
  std::unique_ptr<TargetHiddenStates> hidden_;  // head:PATH
  std::unique_ptr<ModelDrafter> drafter_;
  StepCostModel draft_cost_;  // of the drafter's passes
  int64_t draft_tokens_computed_ = 0;
  double weight_fraction_ = 0;
  RejectionSampler rejection_sampler_;
  int32_t vocab_size_;
  std::vector<std::vector<double>> dense_q_;  // [k, vocab] scratch: large draft distributions indexed by id
};

}  // namespace exactly
