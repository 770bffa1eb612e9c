// Drafting with a model, batched across requests. Each step, every request
// that speculates first has the draft catch up on the tokens it has not seen,
// then the draft proposes k tokens autoregressively: one forward pass per
// draft position for all requests together. Each draft is drawn from the
// draft's logits processed exactly as the target's are (the request's own
// Sampler: penalties, temperature, top-k/top-p/min-p), and that processed
// distribution q comes back with it, so RejectionSampler::verify is given the
// real q each draft was drawn from. Greedy requests take q's argmax.
//
// Where the draft's KV lives:
//  - Cache::kOwn (`--spec draft:PATH`): a paged cache of its own — a
//    KVPool on the draft's device and a KVCacheManager over its own BlockPool, prefix caching
//    included — where each request has a sequence of the same id. The drafter
//    remembers what each sequence holds: known tokens, then the drafts it fed.
//    Next step the drafts the target accepted (now known tokens) are kept and
//    the rest are truncated away: the draft's own rollback.
//  - Cache::kTarget (`--spec layerskip:L`): the target's cache, shared. The
//    draft is the target's first L layers, so the target's KV of those layers
//    for every computed token is exactly what the draft needs: no catch-up.
//    The draft writes layers < L of the positions it feeds (the newest known
//    token and all drafts but the last) into slots it first allocates in the
//    target's sequence, copy-on-write included, so no block shared with
//    another sequence or held by the prefix cache is touched. Nothing is
//    undone after rejection because the verify pass that follows computes
//    every one of those positions again with all layers, and in each layer
//    stores its K/V before attending to them: whatever the draft wrote is
//    overwritten before anything reads it (and, the kernels being batch
//    invariant, overwritten with the same bits for the positions the target
//    keeps). Slots of rejected drafts are cut off by the usual truncate and
//    written afresh before they are read again.
//
// A draft head (`--spec head:PATH`, model/draft_head.h) drafts as a draft
// model with its own cache does, reading beside each token the hidden state
// before it: the target's (TargetHiddenStates) for known tokens, its own
// output of the previous position for a draft. A request whose context
// holds a position without the target's hidden state does not draft.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "kvcache/kv_cache_manager.h"
#include "model/forward_batch.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "speculative/distribution_pool.h"
#include "speculative/target_hidden.h"

namespace exactly {

struct DraftRequest {
  SeqId seq;                        // the request's id, also its sequence in the draft's KV manager
  std::span<const int32_t> tokens;  // [n] prompt + output; the target has KV for all but the newest
  size_t num_prompt;                // leading prompt tokens (penalties treat the output apart)
  int32_t k;                        // drafts wanted, >= 1
  Sampler* sampler;                 // processes logits as the target does; its Rng draws the drafts
  // After each draft but the k-th, another is made only while the product of
  // the drafts' estimated acceptance probabilities, each min(1,
  // confidence_scale x its confidence), stays at least `continue_above`: a
  // confident run of drafts goes on to k, an unsure draft ends it. None:
  // always k drafts, and no confidences computed. The drafts' number depends
  // on the draft's values and draws alone, so verification stays exact.
  std::optional<double> continue_above;
  double confidence_scale = 1;
};

struct Drafts {
  std::vector<int32_t> tokens;                // [0 or k]: none when the request cannot draft this step
  std::vector<std::vector<TokenProb>> dists;  // [tokens.size()] the processed q each draft was drawn from
  // [tokens.size()] each draft's probability under the distribution it was
  // drawn from; for a greedy request, under the draft's unprocessed softmax
  // (q itself is one-hot there). Empty without DraftRequest::continue_above.
  std::vector<double> confidence;
};

struct DraftPass {
  int64_t tokens;  // tokens the pass computed
  double seconds;  // its share of drafting's time (ModelDrafter::last_passes)
  bool setup;      // it paid a one-time set-up (Model::last_forward_was_setup)
};

class ModelDrafter {
 public:
  enum class Cache { kOwn, kTarget };

  // `model` runs its first `num_layers` layers; `kv` and `kv_manager` are the
  // draft's own (kOwn) or the target's (kTarget). A catch-up pass computes at
  // most `max_pass_tokens` tokens; requests left behind catch up next step.
  // With `hidden` (a draft head, Cache::kOwn), the model reads hidden
  // states beside tokens (ModelInput::hidden_in); `hidden` must outlive
  // the drafter.
  ModelDrafter(Model& model, int num_layers, KVPool& kv, KVCacheManager& kv_manager, Cache cache,
               int64_t max_pass_tokens, const TargetHiddenStates* hidden = nullptr);

  // Drafts for each request, in the same order. A request the draft's cache
  // has no room for (kOwn: after releasing the sequences of requests not in
  // `requests`) or that is still catching up gets none.
  std::vector<Drafts> propose(std::span<const DraftRequest> requests, ThreadPool& pool);

  // The request has finished: its draft sequence's blocks go back to the pool
  // (kOwn; nothing to do for kTarget, whose sequences the scheduler owns).
  void release(SeqId seq);

  // Tokens of the request's context before its newest that the draft must
  // compute before it can draft for it (kOwn: those its sequence lacks, less
  // what the draft's prefix cache holds for a request new to it; kTarget:
  // none, the target's KV serves).
  int64_t catch_up_tokens(SeqId seq, std::span<const int32_t> tokens) const;

  // Writes, now, the memory that a propose() of up to `max_drafts` drafts
  // for up to `max_requests` requests draws into: the logits of one row per
  // request and a vocabulary-sized distribution per draft. Left to the first
  // such propose(), each fresh page is a fault inside a timed step
  // (DistributionPool).
  void fault_in(size_t max_requests, size_t max_drafts);

  // The distributions of drafts that have been verified: their storage
  // serves later draws (DistributionPool). Leaves `dists` empty.
  void recycle(std::vector<std::vector<TokenProb>>& dists) { q_pool_.give_back(dists); }

  // The forward passes of the last propose(), for the step-cost model; their
  // seconds add up to all of propose()'s time, each pass taking its share.
  const std::vector<DraftPass>& last_passes() const { return passes_; }
  Cache cache() const { return cache_; }

 private:
  // What a kOwn sequence holds KV for: tokens[0, known) of its request, then `fed`.
  struct Held {
    int64_t known = 0;
    std::vector<int32_t> fed;  // [k - 1] drafts fed after the known tokens
  };
  // One request's share of this step.
  struct Work {
    size_t request;                // index into the requests of propose()
    int64_t first = 0;             // position of the first token fed in the first pass
    int64_t feed = 0;              // tokens fed in the first pass
    int32_t k = 0;                 // drafts to make (0: catching up only); lowered when a run of drafts ends
    double all_accepted = 1;       // estimated probability that the target accepts every draft so far
    std::vector<int32_t> context;  // [n + drafts so far] what the penalties look at
  };
  // A sequence's tokens in one pass.
  struct Row {
    SeqId seq;
    int64_t first;                   // position of tokens[0]
    std::span<const int32_t> tokens;  // [n_fed]
    bool wants_logits;               // of its last token
    const float* fed_hidden;         // [dim] a draft head's own hidden state before a draft, or null
    // Its draft is a plain greedy one, drawn from the token and probability
    // the model returns (Model::returns_argmax_probabilities), not its logits.
    bool argmax_only = false;
  };

  bool prepare_own(const DraftRequest& r, std::span<const DraftRequest> all, int64_t& budget, Work& w);
  bool prepare_target(const DraftRequest& r, Work& w);
  bool allocate(SeqId seq, int64_t computed, int64_t num_new);
  void release_others(std::span<const DraftRequest> requests);
  void forward(const std::vector<Row>& rows, ThreadPool& pool);
  void fill_hidden_in(const std::vector<Row>& rows);
  void keep_fed_back(const std::vector<size_t>& drawing, size_t num_work);
  void draw(const DraftRequest& r, Work& w, size_t logits_row, Drafts& out);

  Model& model_;
  int num_layers_;
  KVPool& kv_;
  KVCacheManager& kv_manager_;
  Cache cache_;
  int64_t max_pass_tokens_;
  std::unordered_map<SeqId, Held> held_;  // kOwn: every sequence in kv_manager_
  ForwardBatch batch_;
  std::vector<float> logits_;      // [n_rows_with_logits, vocab]
  std::vector<int32_t> argmax_;   // [n_rows_with_logits] the tokens of argmax_only rows
  std::vector<DraftPass> passes_;
  DistributionPool q_pool_;
  const TargetHiddenStates* hidden_;  // a draft head's input; null for a model
  std::vector<float> fed_back_;       // [work, dim] a draft head's output at each request's newest position
};

}  // namespace exactly
