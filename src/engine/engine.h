// The batched engine: requests come in with add_request, every step() runs
// one forward pass over the flattened tokens of all scheduled requests and
// returns what each request gained. The step is the pipeline of
// docs/ARCHITECTURE.md: schedule → pack the batch → forward → sample →
// update requests and free finished blocks.
//
// Exactness: a request's tokens do not depend on what else is in the batch,
// on prefix-cache hits, prefill chunking or preemption — the kernels compute
// each row in a batch-independent order and each request samples with its
// own seeded generator.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/loaded_model.h"
#include "engine/output_constraint.h"
#include "engine/request_params.h"
#include "engine/spec_method.h"
#include "engine/speculator.h"
#include "engine/speculation_policy.h"
#include "engine/step_cost.h"
#include "kvcache/kv_cache_manager.h"
#include "model/model.h"
#include "sched/scheduler.h"
#include "speculative/acceptance_stats.h"
#include "speculative/draft_confidence.h"

namespace exactly {

struct EngineStats {
  int64_t steps = 0;
  int64_t prompt_tokens_computed = 0;   // prompt tokens run through the model (not cached ones)
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t peak_running = 0;
  double forward_seconds = 0;
  double step_seconds = 0;  // whole iterations that ran the model: forward_seconds plus the host's work around it
  // Grammar masks: how many were filled, their threads' seconds, and the
  // seconds the step waited for them (what the forward pass did not hide).
  int64_t grammar_masks = 0;
  double grammar_mask_seconds = 0;
  double grammar_mask_wait_seconds = 0;
  int64_t spec_drafted_tokens = 0;    // the proposer's drafts, verified
  int64_t spec_accepted_tokens = 0;   // of those, accepted
  int64_t spec_verifies = 0;          // their verify passes (requests with drafts, per step)
  // The probe's prompt lookups where the proposer is a model (Engine::propose_drafts).
  int64_t spec_probe_verifies = 0;
  int64_t spec_probe_drafted_tokens = 0;
  int64_t spec_probe_accepted_tokens = 0;
  double spec_draft_seconds = 0;      // spent drafting (a draft model's passes; n-gram lookups)
  int64_t spec_draft_pass_tokens = 0;  // tokens a model drafter's passes computed, its catch-ups included
  // Steps in which every scheduled request decoded one token (no prompt
  // work): their time and tokens give the pure generation throughput, as
  // llama-batched-bench reports it.
  int64_t decode_only_steps = 0;
  int64_t decode_only_tokens = 0;
  double decode_only_seconds = 0;
};

class Engine {
 public:
  Engine(LoadedModel& model, const EngineConfig& config);
  ~Engine();

  // Queues a request; throws Error (ExitCode::kUsage) naming the problem when
  // it can never run (empty prompt, unknown token, longer than the context).
  ClientRequestId add_request(const RequestParams& params);
  // Cancels a request; its blocks are freed now. Unknown ids are ignored.
  void abort(ClientRequestId id);
  // One iteration; returns the requests that gained tokens or finished.
  std::vector<RequestOutput> step();
  bool has_unfinished() const;

  const EngineConfig& config() const { return config_; }
  const EngineStats& stats() const { return stats_; }
  KVCacheStats kv_stats() const { return kv_manager_.stats(); }
  // The draft model's own KV cache (--spec draft:PATH); all zero otherwise.
  KVCacheStats draft_kv_stats() const;
  size_t num_running() const { return scheduler_->num_running(); }
  size_t num_waiting() const { return scheduler_->num_waiting(); }
  int32_t max_model_len() const { return config_.max_model_len; }
  const Tokenizer& tokenizer() const { return *model_.tokenizer; }
  // Checks the KV bookkeeping's invariants, the draft model's or head's cache
  // included, and that a head keeps no ended request's hidden states (aborts
  // when broken); for tests.
  void check_integrity() const;

 private:
  struct Group;
  struct Sequence;

  void propose_drafts();
  std::vector<DraftCandidate> decoding_requests(int64_t& budget);
  DraftJob draft_job(const DraftDecision& d);
  void pack_batch(const SchedulerOutput& out);
  void pack_row_processing(ForwardBatch& b, Sequence& s, size_t row);
  static void accept_emitted(Sequence& s);
  // Rows of prompt positions whose logits score the next prompt token.
  struct PromptScoreRows {
    RequestId seq;
    int64_t first_pos;      // prompt position of the first row
    int64_t count;
    size_t first_logits_row;
  };
  void pack_prompt_score_rows(const SchedulerOutput& out, const std::vector<int32_t>& chunk_rows);
  void score_prompts();
  // The tokens a step drew for one sequence, and the logits row of each.
  struct Drawn {
    RequestId seq;
    std::vector<int32_t> tokens;  // [n] tokens to emit, in order
    std::vector<size_t> rows;     // [n] logits row each was drawn from
    bool fork;                    // a sibling created from the parent after the update
  };
  // step()'s stages, in order.
  SchedulerOutput schedule_step();
  void run_forward(const SchedulerOutput& out);
  std::vector<Drawn> draw_tokens(const SchedulerOutput& out, std::vector<StepTokens>& step_tokens);
  void observe_step_cost(double forward_and_sampling_seconds);
  void apply_tokens(const SchedulerOutput& out, const std::vector<Drawn>& drawn,
                    const std::vector<StepTokens>& step_tokens);
  std::vector<RequestOutput> collect_outputs();
  // Their parts.
  VerifyOutcome verify_drafts(const Request& r, Sequence& s, size_t row);
  void record_verify(Sequence& s, int32_t drafted, int32_t accepted);
  void fork_siblings(const Request& r, Sequence& s, size_t row, std::vector<Drawn>& drawn);
  void release_prompt_scores(Group& g);
  std::span<const float> logits_row(size_t row) const;
  void start_masks(const SchedulerOutput& out);
  std::span<const float> processed(const Sequence& s, std::span<const float> logits);
  Sequence& sequence_of(RequestId id);
  bool is_stop_token(const Sequence& s, int32_t token) const;
  void emit(Sequence& s, int32_t token, std::span<const float> logits);
  void end_sequence(Sequence& s, FinishReason reason);
  void record_hidden(const SchedulerOutput& out);

  LoadedModel& model_;
  EngineConfig config_;
  SpecMethod spec_;
  std::unique_ptr<LoadedModel> draft_model_;  // --spec draft:PATH; sizes the KV pools, so loaded first
  std::unique_ptr<Model> draft_head_;     // --spec head:PATH; likewise
  ThreadPool pool_;
  std::unique_ptr<KVPool> kv_storage_;  // the target's KV tensors, on the model's device
  KVCacheManager kv_manager_;
  std::unique_ptr<Scheduler> scheduler_;
  ForwardBatch batch_;
  std::vector<float> logits_;    // [n_logits_rows, vocab]
  std::vector<int32_t> argmax_;  // [n_logits_rows]
  std::unique_ptr<Speculator> speculator_;
  std::unique_ptr<SpeculationPolicy> policy_;  // how many drafts each request gets
  std::vector<std::vector<TokenProb>> verify_dists_;  // [k + 1] a sampled verify's target distributions, reused
  bool step_has_prefill_ = false;  // the packed batch holds a prompt chunk
  std::vector<PromptScoreRows> prompt_score_rows_;  // this step's
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> sequences_;
  std::unordered_map<ClientRequestId, std::unique_ptr<Group>> groups_;
  RequestId next_seq_id_ = 1;
  ClientRequestId next_client_id_ = 1;
  EngineStats stats_;
  MaskFiller mask_filler_;            // grammar masks, overlapped with the forward pass
  std::vector<float> processed_row_;  // [vocab] a biased or masked row, reused
};

}  // namespace exactly
