#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "core/check.h"
#include "core/error.h"
#include "core/faulted_in.h"
#include "core/format.h"
#include "engine/draft_model.h"
#include "kvcache/capacity.h"
#include "sample/stop_strings.h"
#include "speculative/acceptance_stats.h"
#include "speculative/rejection_sampler.h"

namespace exactly {

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "?";
}

// One client request: n sequences that share the prompt.
struct Engine::Group {
  ClientRequestId id = 0;
  RequestParams params;
  std::vector<RequestId> seqs;  // [n] sequence of each completion index (parent first)
  int64_t cached_prompt_tokens = -1;  // known once the parent is first scheduled
  std::chrono::steady_clock::time_point first_scheduled{};
  int32_t num_done = 0;
  bool forked = false;
  int64_t completion_tokens = 0;
  RequestOutput pending;  // deltas gathered during the current step
  bool touched = false;
  std::vector<TokenLogprobs> prompt_scores;  // prompt tokens 1.. scored so far (prompt_logprobs)
  bool prompt_scores_sent = false;
};

namespace {

// Tokens of a request's rest that drafting for it may count on saving. Up
// to max_tokens when nothing else can end it. Otherwise nothing is known of
// when it will stop, and the prior is one without a scale: having generated
// g tokens, it generates r more with probability g / (g + r), whose median
// is g and whose lower quartile is g / 3. A catch-up is a certain cost and
// the saving it buys an uncertain one, so the saving is counted at the lower
// quartile. (Counting up to max_tokens let a draft model catch up on 11 of 16
// editing contexts near their ends, 0.3 s for nothing; counting at the
// median, 4 editing requests caught up on 136 tokens each at 62 generated,
// with about 10 left.)
int64_t remaining_tokens_to_count_on(const Request& r, const RequestParams& p) {
  const int64_t left = r.max_tokens - r.num_output_tokens();
  if (p.ignore_eos && p.stop.empty() && p.stop_token_ids.empty()) return left;
  return std::min(left, std::max<int64_t>(1, r.num_output_tokens() / 3));
}

// A model drafter processes its logits with the request's settings but draws
// from a generator of its own (seeded from the request's seed, when it has
// one), so drafting takes no uniforms from the stream verification uses.
SamplingParams drafting_params(SamplingParams sp) {
  if (sp.seed) sp.seed = *sp.seed ^ 0xd1b54a32d192ed03ull;
  return sp;
}

SpeculationConfig speculation_config(const EngineConfig& c) {
  SpeculationConfig sc;
  sc.max_drafts = c.num_speculative_tokens;
  sc.adaptive = c.adaptive_speculation;
  sc.confident_runs = c.confident_draft_runs;
  sc.max_model_len = c.max_model_len;
  sc.long_prefill_token_threshold = c.long_prefill_token_threshold;
  return sc;
}

}  // namespace

// One completion: its sampler, detokenizer and stop-string state.
struct Engine::Sequence {
  Sequence(RequestId id_, Group* group_, int32_t index_, const SamplingParams& sp, const Tokenizer& tok)
      : id(id_), group(group_), index(index_), sampler(sp), drafter(drafting_params(sp)),
        detok(tok, !group_->params.skip_special_tokens),
        stops(group_->params.stop),
        constraint(group_->params.constraint ? group_->params.constraint->start() : nullptr) {}
  // The row is changed before sampling (logit_bias, a grammar): it is
  // sampled on the host from the processed row, and never drafted for.
  bool processes_logits() const { return constraint != nullptr || !group->params.logit_bias.empty(); }
  RequestId id;
  Group* group;
  int32_t index;
  Sampler sampler;
  Sampler drafter;  // draws model drafts
  std::vector<std::vector<TokenProb>> draft_dists;  // [num_drafts] q of each pending model draft
  std::vector<double> draft_confidence;             // [num_drafts] the draft model's confidence in each
  StreamingDetokenizer detok;
  StopStringMatcher stops;
  AcceptanceStats spec_stats;
  bool lookup_drafts = false;  // the pending drafts are a probe's lookups, not the proposer's
  bool done = false;
  std::unique_ptr<ConstraintState> constraint;  // the grammar's state, or none
  // Emitted tokens the grammar's state has yet to advance past: it does so
  // in the next mask's job, beside the forward pass, or when the sequence ends.
  std::vector<int32_t> unaccepted;
  std::vector<uint32_t> mask;                   // [ceil(vocab / 32)] allowed next tokens, filled each step
};

namespace {

// Sample i of a seeded request draws from seed + i, so each completion is
// reproducible on its own.
SamplingParams params_for_index(SamplingParams sp, int32_t index) {
  if (sp.seed) sp.seed = *sp.seed + static_cast<uint64_t>(index);
  return sp;
}

// Bytes of KV cache for the target and for a draft model's own cache. Unless
// --draft-kv-cache-memory says otherwise, they share --kv-cache-memory in
// proportion to their bytes per token: both hold the same number of tokens.
struct KVMemory {
  int64_t target;
  int64_t draft;
};

KVMemory split_kv_memory(const LoadedModel& target, const Model* draft, const EngineConfig& c) {
  if (draft == nullptr) return {c.kv_cache_memory, 0};
  if (c.draft_kv_cache_memory > 0) return {c.kv_cache_memory, c.draft_kv_cache_memory};
  const double t = static_cast<double>(target.model->kv_bytes_per_slot());
  const double d = static_cast<double>(draft->kv_bytes_per_slot());
  const auto target_share = static_cast<int64_t>(static_cast<double>(c.kv_cache_memory) * t / (t + d));
  return {target_share, c.kv_cache_memory - target_share};
}

// The target's KV pool: the model first reserves its activation workspace
// for this engine's limits, so that what a GPU has left for the cache is
// measured after every other allocation.
std::unique_ptr<KVPool> make_target_pool(LoadedModel& m, Model* draft, EngineConfig& c) {
  ModelLimits limits;
  limits.max_batch_tokens = c.max_num_batched_tokens;
  limits.max_seqs = c.max_num_seqs;
  limits.max_model_len = c.max_model_len;
  limits.block_size = c.block_size;
  m.model->reserve(limits);
  if (draft != nullptr) draft->reserve(limits);  // its passes are bounded by the same limits
  const bool automatic = c.kv_cache_memory <= 0;
  if (automatic) c.kv_cache_memory = m.model->default_kv_cache_memory(c.gpu_memory_utilization);
  const int64_t memory = split_kv_memory(m, draft, c).target;
  const int64_t per_slot = m.model->kv_bytes_per_slot();
  const int32_t blocks = num_blocks_for_memory(memory, per_slot, c.block_size);
  if (blocks < 1 && automatic && std::string_view(m.model->device()) != "cpu")
    throw Error(strformat("--gpu-memory-utilization %.2f leaves %s for the KV cache after the weights and the "
                          "workspace, not one block of %d tokens (%s per token): raise it, or set --kv-cache-memory",
                          c.gpu_memory_utilization, human_bytes(static_cast<double>(memory)).c_str(), c.block_size,
                          human_bytes(static_cast<double>(per_slot)).c_str()),
                ExitCode::kUsage);
  if (blocks < 1)
    throw Error(strformat("--kv-cache-memory %s holds no KV block of %d tokens (%s per token)",
                          human_bytes(static_cast<double>(memory)).c_str(), c.block_size,
                          human_bytes(static_cast<double>(per_slot)).c_str()),
                ExitCode::kUsage);
  return m.model->make_kv_pool(blocks, c.block_size);
}

std::unique_ptr<LoadedModel> load_draft_if_named(const SpecMethod& spec, const LoadedModel& target) {
  if (spec.kind != SpecMethod::Kind::kDraftModel) return nullptr;
  return load_draft_model(spec.draft_path, target);
}

std::unique_ptr<Model> load_head_if_named(const SpecMethod& spec, const LoadedModel& target) {
  if (spec.kind != SpecMethod::Kind::kHead) return nullptr;
  return load_draft_head(spec.draft_path, target);
}

// The draft's model: draft:PATH's or head:PATH's, or null.
Model* draft_of(const std::unique_ptr<LoadedModel>& model, const std::unique_ptr<Model>& head) {
  return model ? model->model.get() : head.get();
}

EngineConfig resolved(const LoadedModel& m, EngineConfig c) {
  if (c.threads <= 0) c.threads = ThreadPool::default_threads();
  if (c.max_model_len <= 0 || c.max_model_len > m.config().context_length) c.max_model_len = m.config().context_length;
  if (c.block_size <= 0 || c.block_size > 1024)
    throw Error(strformat("--block-size %d must be between 1 and 1024", c.block_size), ExitCode::kUsage);
  if (c.max_num_batched_tokens < 1) throw Error("--max-num-batched-tokens must be positive", ExitCode::kUsage);
  if (c.max_num_seqs < 1) throw Error("--max-num-seqs must be positive", ExitCode::kUsage);
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > 16)
    throw Error("--num-speculative-tokens must be between 1 and 16", ExitCode::kUsage);
  return c;
}

// The delta of completion `index` in this step's output, created on first use.
CompletionDelta& delta_for(RequestOutput& out, int32_t index) {
  for (auto& d : out.completions)
    if (d.index == index) return d;
  out.completions.push_back({});
  out.completions.back().index = index;
  return out.completions.back();
}

// Threads that fill grammar masks beside the forward pass: on the CPU one
// (the forward pass has the cores), on a GPU up to 8 while the host waits
// (15 on a 16-core host were slower at 64 requests: +5.6-12.8% per token
// against +3.5-5.6%, BENCHMARKS.md §8). EXACTLY_MASK_THREADS=N (1 to 64)
// sets the number.
int mask_filler_threads(const Model& model) {
  if (const char* e = std::getenv("EXACTLY_MASK_THREADS")) return std::clamp(std::atoi(e), 1, 64);
  if (std::string_view(model.device()) == "cpu") return 1;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores - 1, 1, 8);
}

}  // namespace

Engine::Engine(LoadedModel& model, const EngineConfig& config)
    : model_(model), config_(resolved(model, config)), spec_(parse_spec_method(config_.spec_method)),
      draft_model_(load_draft_if_named(spec_, model)), draft_head_(load_head_if_named(spec_, model)),
      pool_(config_.threads), kv_storage_(make_target_pool(model, draft_of(draft_model_, draft_head_), config_)),
      kv_manager_(static_cast<int32_t>(kv_storage_->num_blocks()), config_.block_size, config_.enable_prefix_caching,
                  model.config().kv_window()),
      mask_filler_(mask_filler_threads(*model.model)) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = config_.max_num_batched_tokens;
  sc.max_num_seqs = config_.max_num_seqs;
  sc.enable_prefix_caching = config_.enable_prefix_caching;
  sc.long_prefill_token_threshold = config_.long_prefill_token_threshold;
  sc.max_model_len = config_.max_model_len;
  scheduler_ = std::make_unique<Scheduler>(kv_manager_, sc);
  Model* draft = draft_of(draft_model_, draft_head_);
  speculator_ = std::make_unique<Speculator>(spec_, model_, draft, *kv_storage_, kv_manager_, config_,
                                             split_kv_memory(model_, draft, config_).draft);
  policy_ = std::make_unique<SpeculationPolicy>(speculation_config(config_), *speculator_);
  // The vocabulary-sized buffers of the probe, speculation's first step,
  // faulted in now: the logits of every running request plus the probe's
  // drafts, a distribution per verified row of one request when sampling,
  // and a model drafter's logits and the distributions of one request's k
  // drafts (the probe's lookups draw none). Touched first
  // inside a step, those fresh pages cost this machine 35-80 ms in the first
  // verify of one request, and 0.7-0.9 s in a probe of 64 sampled drafts,
  // which the step-cost model took for the price of speculating
  // (docs/journal/benchmarks-record.md §4). Steps that draft more than the
  // probe reuse what it used and fault in only their growth, once.
  if (speculator_->enabled()) {
    const auto vocab = static_cast<size_t>(model_.config().vocab_size);
    const auto rows = static_cast<size_t>(config_.num_speculative_tokens) + 1;
    const auto requests = static_cast<size_t>(config_.max_num_seqs);
    const auto probe = static_cast<size_t>(probe_draft_tokens(config_.max_num_seqs));
    reserve_faulted_in(logits_, (requests + probe) * vocab);
    verify_dists_.resize(rows);
    for (std::vector<TokenProb>& d : verify_dists_) reserve_faulted_in(d, vocab);
    speculator_->fault_in(requests, static_cast<size_t>(config_.num_speculative_tokens));
  }
}

Engine::~Engine() = default;

KVCacheStats Engine::draft_kv_stats() const {
  const KVCacheManager* m = speculator_->draft_kv_manager();
  return m ? m->stats() : KVCacheStats{};
}

void Engine::check_integrity() const {
  kv_manager_.check_integrity();
  if (const KVCacheManager* m = speculator_->draft_kv_manager()) m->check_integrity();
  // A request's hidden states go when it ends: never more kept than requests alive.
  EXACTLY_CHECK(speculator_->hidden_sequences() <= sequences_.size(), "hidden states of %zu sequences, %zu alive",
                speculator_->hidden_sequences(), sequences_.size());
}

bool Engine::has_unfinished() const { return !groups_.empty(); }

ClientRequestId Engine::add_request(const RequestParams& p) {
  const int32_t vocab = model_.config().vocab_size;
  if (p.prompt.empty()) throw Error("the prompt is empty", ExitCode::kUsage);
  for (size_t i = 0; i < p.prompt.size(); ++i)
    if (p.prompt[i] < 0 || p.prompt[i] >= vocab)
      throw Error(strformat("prompt token %zu is %d, outside the vocabulary of %d tokens", i, p.prompt[i], vocab),
                  ExitCode::kUsage);
  if (p.max_tokens < 1) throw Error(strformat("max_tokens must be at least 1, got %lld", static_cast<long long>(p.max_tokens)),
                                    ExitCode::kUsage);
  if (p.n < 1 || p.n > 128) throw Error(strformat("n must be between 1 and 128, got %d", p.n), ExitCode::kUsage);
  for (const auto& [id, bias] : p.logit_bias)
    if (id < 0 || id >= vocab)
      throw Error(strformat("logit_bias names token %d, outside the vocabulary of %d tokens", id, vocab),
                  ExitCode::kUsage);
  if (p.constraint && p.ignore_eos)
    throw Error("ignore_eos cannot be combined with a grammar: its end is a stop token", ExitCode::kUsage);
  if (p.logprobs > kMaxLogprobs || p.prompt_logprobs > kMaxLogprobs)
    throw Error(strformat("logprobs and prompt_logprobs take at most %d alternatives", kMaxLogprobs), ExitCode::kUsage);
  const int64_t total = static_cast<int64_t>(p.prompt.size()) + p.max_tokens;
  if (total > config_.max_model_len)
    throw Error(strformat("the prompt (%zu tokens) plus max_tokens (%lld) is %lld tokens, more than the context of %d",
                          p.prompt.size(), static_cast<long long>(p.max_tokens), static_cast<long long>(total),
                          config_.max_model_len),
                ExitCode::kUsage);
  if (!scheduler_->fits_alone(total))
    throw Error(strformat("the request needs %lld token slots of KV cache at once but the pool holds only %lld",
                          static_cast<long long>(kv_manager_.max_blocks_held(total, config_.max_num_batched_tokens) *
                                                 kv_manager_.block_size()),
                          static_cast<long long>(int64_t{kv_manager_.num_blocks()} * kv_manager_.block_size())),
                ExitCode::kUsage);

  auto group = std::make_unique<Group>();
  group->id = next_client_id_++;
  group->params = p;
  group->pending.id = group->id;
  group->pending.prompt_tokens = static_cast<int64_t>(p.prompt.size());
  const RequestId seq = next_seq_id_++;
  group->seqs.push_back(seq);
  sequences_[seq] = std::make_unique<Sequence>(seq, group.get(), 0, params_for_index(p.sampling, 0), *model_.tokenizer);
  Request r = make_request(seq, p.prompt, p.max_tokens, p.priority);
  r.engine_state = sequences_[seq].get();
  if (p.prompt_logprobs >= 0) {
    r.skip_prefix_cache = true;
    r.max_chunk_tokens = kPromptLogprobChunk;
  }
  scheduler_->add_request(std::move(r));
  const ClientRequestId id = group->id;
  groups_[id] = std::move(group);
  return id;
}

void Engine::abort(ClientRequestId id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  Group& g = *it->second;
  for (RequestId seq : g.seqs) {
    Sequence& s = sequence_of(seq);
    if (s.done) continue;
    scheduler_->abort_request(seq);
    end_sequence(s, FinishReason::kAbort);
  }
}

// The grammar's state advances past the tokens emitted since its last mask.
// Advancing is the costly half of a grammar's work per token on the host
// after sampling; done with the next mask, it leaves the step's critical path.
void Engine::accept_emitted(Sequence& s) {
  for (int32_t token : s.unaccepted)
    EXACTLY_CHECK(s.constraint->accept(token), "the grammar refused token %d it allowed", token);
  s.unaccepted.clear();
}

// What the model applies to a row it samples for a processing sequence: the
// request's logit_bias and, once filled, its grammar's mask.
void Engine::pack_row_processing(ForwardBatch& b, Sequence& s, size_t row) {
  RowProcessing p{static_cast<int32_t>(row), static_cast<int32_t>(b.jobs.logit_biases.size()), 0, nullptr};
  for (const auto& [id, bias] : s.group->params.logit_bias) b.jobs.logit_biases.push_back({id, bias});
  p.bias_end = static_cast<int32_t>(b.jobs.logit_biases.size());
  if (s.constraint) {
    s.mask.resize(mask_words(static_cast<size_t>(model_.config().vocab_size)));
    p.mask = s.mask.data();
    b.jobs.await_masks = [this] { mask_filler_.wait(); };
  }
  b.jobs.row_processing.push_back(p);
}

// Grammar masks for the rows this step samples, filled while the forward pass runs.
void Engine::start_masks(const SchedulerOutput& out) {
  std::vector<MaskFiller::Job> jobs;
  const size_t words = mask_words(static_cast<size_t>(model_.config().vocab_size));
  for (const ScheduledChunk& c : out.scheduled) {
    if (!c.samples) continue;
    Sequence& s = sequence_of(c.id);
    if (!s.constraint) continue;
    s.mask.resize(words);
    jobs.push_back({static_cast<uint64_t>(c.id), [&s] {
                      accept_emitted(s);
                      s.constraint->fill_mask(s.mask);
                    }});
  }
  mask_filler_.start(std::move(jobs));
}

// The row a processing sequence samples from: biased and masked, in a
// buffer of the engine's; any other sequence samples the model's row.
std::span<const float> Engine::processed(const Sequence& s, std::span<const float> logits) {
  if (!s.processes_logits()) return logits;
  process_row(logits, s.group->params.logit_bias,
              s.constraint ? std::span<const uint32_t>(s.mask) : std::span<const uint32_t>(), processed_row_);
  return processed_row_;
}

Engine::Sequence& Engine::sequence_of(RequestId id) {
  auto it = sequences_.find(id);
  EXACTLY_CHECK(it != sequences_.end(), "unknown sequence %lld", static_cast<long long>(id));
  return *it->second;
}

bool Engine::is_stop_token(const Sequence& s, int32_t token) const {
  const RequestParams& p = s.group->params;
  if (!p.ignore_eos && model_.tokenizer->is_end_of_generation(token)) return true;
  return std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
}


void Engine::emit(Sequence& s, int32_t token, std::span<const float> logits) {
  Group& g = *s.group;
  CompletionDelta& d = delta_for(g.pending, s.index);
  g.touched = true;
  d.token_ids.push_back(token);
  if (s.constraint) s.unaccepted.push_back(token);
  if (g.params.logprobs >= 0) d.logprobs.push_back(compute_logprobs(logits, token, g.params.logprobs));
  d.text += s.stops.push(s.detok.push(token));
  ++g.completion_tokens;
  ++stats_.generated_tokens;
}

void Engine::end_sequence(Sequence& s, FinishReason reason) {
  if (s.done) return;
  s.done = true;
  if (s.constraint) accept_emitted(s);
  Group& g = *s.group;
  CompletionDelta& d = delta_for(g.pending, s.index);
  if (reason != FinishReason::kAbort && !s.stops.stopped()) d.text += s.stops.push(s.detok.flush()) + s.stops.flush();
  d.finish_reason = reason;
  g.touched = true;
  ++g.num_done;
  speculator_->release(s.id);
  speculator_->recycle(s.draft_dists);
}

// Drafts for the requests that decode this step, as many as the policy
// finds worth verifying. Running requests are scheduled first, so drafts are
// only handed out while the whole step's running work fits the token budget:
// a verify is never split across steps, and its k + 1 logits rows come from
// one pass.
void Engine::propose_drafts() {
  if (!speculator_->enabled()) return;
  int64_t budget = config_.max_num_batched_tokens;
  const std::vector<DraftCandidate> decoding = decoding_requests(budget);
  std::vector<DraftJob> jobs;
  for (const DraftDecision& d : policy_->plan(decoding, budget)) jobs.push_back(draft_job(d));
  if (jobs.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  speculator_->propose(jobs, pool_);
  stats_.spec_draft_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.spec_draft_pass_tokens = speculator_->draft_tokens_computed();
}

// The running requests with one token to compute and no logits processing
// that drafts cannot go through, in id order; `budget` loses every running
// request's pending tokens.
std::vector<DraftCandidate> Engine::decoding_requests(int64_t& budget) {
  std::vector<DraftCandidate> decoding;
  for (const auto& [id, seq] : sequences_) {
    Request* r = seq->done ? nullptr : scheduler_->find(id);
    if (r == nullptr || r->status != RequestStatus::kRunning) continue;
    const int64_t pending = r->num_tokens() - r->num_computed_tokens;
    budget -= pending;
    if (pending == 1 && !seq->processes_logits())
      decoding.push_back({r, &seq->spec_stats, remaining_tokens_to_count_on(*r, seq->group->params)});
  }
  std::sort(decoding.begin(), decoding.end(),
            [](const DraftCandidate& a, const DraftCandidate& b) { return a.request->id < b.request->id; });
  return decoding;
}

// The speculator's job for the policy's decision, drawing into the sequence's own storage.
DraftJob Engine::draft_job(const DraftDecision& d) {
  Sequence& s = sequence_of(d.request->id);
  DraftJob job;
  job.request = d.request;
  job.k = d.k;
  job.drafter = &s.drafter;
  job.dists = &s.draft_dists;
  job.lookup = d.lookup;
  job.confidence = &s.draft_confidence;
  job.continue_above = d.continue_above;
  job.confidence_scale = d.confidence_scale;
  s.lookup_drafts = d.lookup;
  return job;
}

namespace {

// The row's sampling for a model that samples it, with the request's draw
// for this token taken now (as Sampler::sample() would take it) unless the
// row is part of a verify, whose draws are the job's.
RowSampling device_sampling(Sampler& sampler, std::span<const int32_t> context, size_t num_prompt,
                            std::vector<PenaltyToken>& penalty_tokens, bool draw = true) {
  const SamplingParams& p = sampler.params();
  RowSampling row{p.temperature,        p.top_k,
                  p.top_p,              p.min_p,
                  p.repetition_penalty, p.frequency_penalty,
                  p.presence_penalty,   static_cast<int32_t>(penalty_tokens.size()),
                  0,                    0.0};
  for (const PenalisedToken& t : sampler.penalised_tokens(context, num_prompt))
    penalty_tokens.push_back({t.id, t.output_count, t.in_window ? 1 : 0});
  row.penalty_end = static_cast<int32_t>(penalty_tokens.size());
  if (draw && !p.greedy()) row.uniform = sampler.rng().uniform();
  return row;
}

// The draft-distribution entries a verify of these drafts hands the model
// (a deterministic drafter's are one-hot: one per draft).
int64_t draft_entries(const std::vector<std::vector<TokenProb>>& draft_dists, size_t num_drafts) {
  if (draft_dists.empty()) return static_cast<int64_t>(num_drafts);
  int64_t n = 0;
  for (const auto& q : draft_dists) n += static_cast<int64_t>(q.size());
  return n;
}

// A sampled verify run by the model: its drafts and draft distributions, and
// the request's next k + 1 uniforms, taken from a copy of its generator (the
// real one moves on by as many as the outcome used, in step()).
void pack_device_verify(ForwardBatch& b, Sampler& sampler, const Request& r,
                        const std::vector<std::vector<TokenProb>>& draft_dists, size_t first_row) {
  const std::vector<int32_t>& drafts = r.draft_tokens;
  const size_t k = drafts.size();
  b.jobs.verifies.push_back({static_cast<int32_t>(first_row), static_cast<int32_t>(k),
                        static_cast<int32_t>(b.jobs.verify_drafts.size()), static_cast<int32_t>(b.jobs.q_offsets.size()),
                        static_cast<int32_t>(b.jobs.verify_uniforms.size()), 0});
  b.jobs.verify_drafts.insert(b.jobs.verify_drafts.end(), drafts.begin(), drafts.end());
  for (size_t j = 0; j < k; ++j) {
    b.jobs.q_offsets.push_back(static_cast<int32_t>(b.jobs.q_entries.size()));
    if (draft_dists.empty()) {  // a deterministic drafter: q_j is one-hot at its draft
      b.jobs.q_entries.push_back({drafts[j], 0, 1.0});
    } else {
      for (const TokenProb& e : draft_dists[j]) b.jobs.q_entries.push_back({e.id, 0, e.p});
    }
  }
  b.jobs.q_offsets.push_back(static_cast<int32_t>(b.jobs.q_entries.size()));
  Rng ahead = sampler.rng();
  for (size_t j = 0; j <= k; ++j) b.jobs.verify_uniforms.push_back(ahead.uniform());
  std::vector<int32_t> context = r.tokens;  // position j sees the drafts before it
  const auto num_prompt = static_cast<size_t>(r.num_prompt_tokens);
  for (size_t j = 0; j <= k; ++j) {
    b.jobs.row_use[first_row + j] = RowUse::kVerify;
    b.jobs.row_sampling[first_row + j] = device_sampling(sampler, context, num_prompt, b.jobs.penalty_tokens, false);
    if (j < k) context.push_back(drafts[j]);
  }
}

}  // namespace

void Engine::pack_batch(const SchedulerOutput& out) {
  ForwardBatch& b = batch_;
  step_has_prefill_ = false;
  const int32_t bs = kv_manager_.block_size();
  size_t max_blocks = 1;
  for (const ScheduledChunk& c : out.scheduled) max_blocks = std::max(max_blocks, kv_manager_.block_table(c.id).size());
  b.reset(out.scheduled.size(), max_blocks);
  int64_t entries_left = model_.model->verified_draft_entries();  // for the verifies the model runs
  // A model verifies drafts over one chunk of logits rows; a step that also
  // scores prompts (many more rows) verifies on the host instead.
  for (const ScheduledChunk& c : out.scheduled)
    if (sequence_of(c.id).group->params.prompt_logprobs >= 0 &&
        c.first_new_token < scheduler_->find(c.id)->num_prompt_tokens - 1)
      entries_left = 0;

  std::vector<int32_t> chunk_rows(out.scheduled.size());  // each chunk's first token in the batch
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledChunk& c = out.scheduled[i];
    const Request* r = scheduler_->find(c.id);
    EXACTLY_CHECK(r != nullptr);
    std::span<const BlockId> table = kv_manager_.block_table(c.id);
    chunk_rows[i] = static_cast<int32_t>(b.input.tokens.size());
    b.input.begin_sequence(i, table);
    if (c.first_new_token < r->num_tokens() - 1) step_has_prefill_ = true;  // more than one new non-draft token
    for (int64_t pos = c.first_new_token; pos < c.first_new_token + c.num_new_tokens; ++pos) {
      const int32_t token = pos < r->num_tokens() ? r->tokens[static_cast<size_t>(pos)]
                                                  : r->draft_tokens[static_cast<size_t>(pos - r->num_tokens())];
      b.input.push_token(token, pos, table, bs);
      if (pos < r->num_prompt_tokens) ++stats_.prompt_tokens_computed;
    }
    b.input.end_sequence(c.first_new_token + c.num_new_tokens);
    if (c.samples) {
      // A verify needs the logits after the newest known token and after each draft.
      const int64_t drafts = static_cast<int64_t>(r->draft_tokens.size());
      EXACTLY_CHECK(c.first_new_token <= r->num_tokens() - 1, "a verify of request %lld was split",
                    static_cast<long long>(c.id));
      for (int64_t j = drafts; j >= 0; --j) b.input.logits_rows.push_back(static_cast<int32_t>(b.input.tokens.size() - 1 - j));
      // A row whose token alone is needed stays with the model: a plain
      // greedy decode needs its argmax, any other decode is sampled there
      // when the model samples (the logits stay on its device), biased and
      // masked first where the model processes rows. A greedy verify needs
      // each position's (penalised) argmax alone too.
      Sequence& s = sequence_of(c.id);
      const Group& g = *s.group;
      const bool processes = s.processes_logits();
      const bool token_only = g.params.logprobs < 0 && (g.params.n == 1 || g.forked) &&
                              (!processes || (drafts == 0 && model_.model->processes_rows()));
      const size_t num_prompt = static_cast<size_t>(r->num_prompt_tokens);
      const size_t first_row = b.input.logits_rows.size() - static_cast<size_t>(drafts) - 1;
      b.jobs.row_use.resize(b.input.logits_rows.size(), RowUse::kLogits);
      b.jobs.row_sampling.resize(b.input.logits_rows.size());
      if (token_only && drafts == 0 && !processes && s.sampler.plain_greedy(r->tokens.size(), num_prompt)) {
        b.jobs.row_use.back() = RowUse::kArgmax;
      } else if (token_only && drafts == 0 && model_.model->samples_rows()) {
        b.jobs.row_use.back() = RowUse::kSample;
        b.jobs.row_sampling.back() = device_sampling(s.sampler, r->tokens, num_prompt, b.jobs.penalty_tokens);
        if (processes) pack_row_processing(b, s, b.input.logits_rows.size() - 1);
      } else if (token_only && drafts > 0 && s.sampler.params().greedy() &&
                 (model_.model->samples_rows() || s.sampler.plain_greedy(r->tokens.size() + drafts, num_prompt))) {
        std::vector<int32_t> context = r->tokens;  // position j sees the drafts before it
        for (size_t j = 0; j <= static_cast<size_t>(drafts); ++j) {
          if (s.sampler.plain_greedy(context.size(), num_prompt)) {
            b.jobs.row_use[first_row + j] = RowUse::kArgmax;
          } else {
            b.jobs.row_use[first_row + j] = RowUse::kSample;
            b.jobs.row_sampling[first_row + j] = device_sampling(s.sampler, context, num_prompt, b.jobs.penalty_tokens);
          }
          if (j < static_cast<size_t>(drafts)) context.push_back(r->draft_tokens[j]);
        }
      } else if (const int64_t entries = draft_entries(s.draft_dists, static_cast<size_t>(drafts));
                 token_only && drafts > 0 && entries <= entries_left) {
        entries_left -= entries;
        pack_device_verify(b, s.sampler, *r, s.draft_dists, first_row);
      }
    }
  }
  pack_prompt_score_rows(out, chunk_rows);
  if (speculator_->wants_hidden())
    for (int32_t t = 0; t < static_cast<int32_t>(b.input.tokens.size()); ++t) b.input.hidden_rows.push_back(t);
}

// The target's hidden state of every token of the step goes to a draft head.
void Engine::record_hidden(const SchedulerOutput& out) {
  if (!speculator_->wants_hidden()) return;
  std::span<const float> hidden = model_.model->hidden();
  const auto dim = static_cast<size_t>(model_.config().dim);
  EXACTLY_CHECK(hidden.size() == batch_.input.tokens.size() * dim, "%zu hidden floats for %zu tokens", hidden.size(),
                batch_.input.tokens.size());
  size_t row = 0;
  for (const ScheduledChunk& c : out.scheduled) {
    speculator_->record_hidden(c.id, c.first_new_token, c.num_new_tokens, hidden.data() + row * dim);
    row += static_cast<size_t>(c.num_new_tokens);
  }
}

// A request asking for prompt logprobs needs the logits of each prompt
// position that precedes another prompt token, once: rows after the
// sampling rows (so those keep their order), whole logits on any device.
void Engine::pack_prompt_score_rows(const SchedulerOutput& out, const std::vector<int32_t>& chunk_rows) {
  ForwardBatch& b = batch_;
  prompt_score_rows_.clear();
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledChunk& c = out.scheduled[i];
    const Request* r = scheduler_->find(c.id);
    Sequence& s = sequence_of(c.id);
    const Group& g = *s.group;
    if (g.params.prompt_logprobs < 0 || g.prompt_scores_sent || s.index != 0) continue;
    // Positions already scored (before a preemption) are not scored again.
    const int64_t first = std::max<int64_t>(c.first_new_token, static_cast<int64_t>(g.prompt_scores.size()));
    const int64_t end = std::min<int64_t>(c.first_new_token + c.num_new_tokens, r->num_prompt_tokens - 1);
    if (first >= end) continue;
    prompt_score_rows_.push_back({c.id, first, end - first, b.input.logits_rows.size()});
    for (int64_t pos = first; pos < end; ++pos)
      b.input.logits_rows.push_back(chunk_rows[i] + static_cast<int32_t>(pos - c.first_new_token));
  }
  b.jobs.row_use.resize(b.input.logits_rows.size(), RowUse::kLogits);
  b.jobs.row_sampling.resize(b.input.logits_rows.size());
}

// The prompt tokens' logprobs from this step's score rows; a request's are
// handed out whole once its last prompt token is scored.
void Engine::score_prompts() {
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  for (const PromptScoreRows& rows : prompt_score_rows_) {
    const Request* r = scheduler_->find(rows.seq);
    Group& g = *sequence_of(rows.seq).group;
    if (r == nullptr) continue;
    for (int64_t i = 0; i < rows.count; ++i) {
      std::span<const float> logits(logits_.data() + (rows.first_logits_row + static_cast<size_t>(i)) * vocab, vocab);
      const int32_t next = r->tokens[static_cast<size_t>(rows.first_pos + i + 1)];
      g.prompt_scores.push_back(compute_logprobs(logits, next, g.params.prompt_logprobs));
    }
  }
}

// One engine iteration: drafts, a schedule, one forward pass over what it
// packed, the tokens drawn (or drafts verified), the scheduler and the
// requests updated, and the outputs that changed handed out.
std::vector<RequestOutput> Engine::step() {
  if (groups_.empty()) return {};
  const auto step_start = std::chrono::steady_clock::now();
  propose_drafts();
  const SchedulerOutput out = schedule_step();
  if (!out.scheduled.empty()) {
    const auto forward_start = std::chrono::steady_clock::now();
    run_forward(out);
    std::vector<StepTokens> step_tokens;
    const std::vector<Drawn> drawn = draw_tokens(out, step_tokens);
    observe_step_cost(std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count());
    apply_tokens(out, drawn, step_tokens);
    std::vector<RequestOutput> outputs = collect_outputs();
    stats_.step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    return outputs;
  }
  return collect_outputs();
}

SchedulerOutput Engine::schedule_step() {
  SchedulerOutput out = scheduler_->schedule();
  stats_.preemptions += static_cast<int64_t>(out.preempted.size());
  stats_.peak_running = std::max<int64_t>(stats_.peak_running, static_cast<int64_t>(scheduler_->num_running()));
  if (out.scheduled.empty()) return out;
  ++stats_.steps;
  for (const ScheduledChunk& c : out.scheduled) {
    Group& g = *sequence_of(c.id).group;
    if (g.cached_prompt_tokens < 0 && g.seqs.front() == c.id) {
      g.cached_prompt_tokens = c.first_new_token;
      g.first_scheduled = std::chrono::steady_clock::now();
    }
  }
  return out;
}

// Copy-on-write block copies, the packed batch, the grammar masks started
// beside the forward pass, the pass itself, then what reads its results
// before sampling (hidden states for a head, prompt scores).
void Engine::run_forward(const SchedulerOutput& out) {
  if (!out.copies.empty()) {
    std::vector<std::pair<int32_t, int32_t>> pairs;
    for (const BlockCopy& bc : out.copies) pairs.push_back({bc.src, bc.dst});
    kv_storage_->copy_blocks(pairs);
  }
  pack_batch(out);
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  logits_.resize(std::max<size_t>(1, batch_.input.logits_rows.size()) * vocab);
  const auto t0 = std::chrono::steady_clock::now();
  argmax_.resize(batch_.input.logits_rows.size());
  start_masks(out);
  model_.model->forward(batch_, *kv_storage_, logits_.data(), pool_, -1, argmax_.data());
  record_hidden(out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.forward_seconds += seconds;
  mask_filler_.wait();
  const MaskFiller::Times masks = mask_filler_.times();
  stats_.grammar_masks = masks.jobs;
  stats_.grammar_mask_seconds = masks.job_seconds;
  stats_.grammar_mask_wait_seconds = masks.wait_seconds;
  score_prompts();
  if (batch_.input.logits_rows.size() == out.scheduled.size() && batch_.input.tokens.size() == out.scheduled.size()) {
    ++stats_.decode_only_steps;
    stats_.decode_only_tokens += static_cast<int64_t>(out.scheduled.size());
    stats_.decode_only_seconds += seconds;
  }
}

// Samples every chunk that reached the end of its tokens (verifying its
// drafts, if any). A group's first sample also draws its siblings' first
// tokens from the same logits.
std::vector<Engine::Drawn> Engine::draw_tokens(const SchedulerOutput& out, std::vector<StepTokens>& step_tokens) {
  std::vector<Drawn> drawn;
  size_t row = 0;
  for (const ScheduledChunk& c : out.scheduled) {
    if (!c.samples) continue;
    const Request* r = scheduler_->find(c.id);
    Sequence& s = sequence_of(c.id);
    Drawn d{c.id, {}, {}, false};
    if (r->draft_tokens.empty()) {
      d.tokens.push_back(batch_.jobs.row_use[row] != RowUse::kLogits
                             ? argmax_[row]
                             : s.sampler.sample(processed(s, logits_row(row)), r->tokens,
                                                static_cast<size_t>(r->num_prompt_tokens)));
      d.rows.push_back(row);
    } else {
      const VerifyOutcome v = verify_drafts(*r, s, row);
      d.tokens = v.tokens;
      for (size_t i = 0; i < v.tokens.size(); ++i) d.rows.push_back(row + i);
    }
    step_tokens.push_back({c.id, d.tokens, false});
    fork_siblings(*r, s, row, drawn);
    drawn.push_back(std::move(d));
    row += r->draft_tokens.size() + 1;
  }
  return drawn;
}

std::span<const float> Engine::logits_row(size_t row) const {
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  return {logits_.data() + row * vocab, vocab};
}

// A request's drafts against the target's rows from `row` on: verified on
// the model's device, greedily against its argmaxes, or by the exact
// rejection rule on the processed distributions; then the statistics.
VerifyOutcome Engine::verify_drafts(const Request& r, Sequence& s, size_t row) {
  const std::vector<int32_t>& drafts = r.draft_tokens;
  const size_t num_prompt = static_cast<size_t>(r.num_prompt_tokens);
  VerifyOutcome v;
  if (batch_.jobs.row_use[row] == RowUse::kVerify) {  // verified by the model: the emitted tokens, then -1
    for (size_t i = 0; i <= drafts.size() && argmax_[row + i] >= 0; ++i) v.tokens.push_back(argmax_[row + i]);
    EXACTLY_CHECK(!v.tokens.empty(), "the model verified no token");
    v.num_accepted = static_cast<int32_t>(v.tokens.size()) - 1;
    v.num_draws = RejectionSampler::draws_used(drafts.size(), static_cast<size_t>(v.num_accepted));
    for (int32_t i = 0; i < v.num_draws; ++i) s.sampler.rng().uniform();  // what the verify used
  } else if (batch_.jobs.row_use[row] != RowUse::kLogits) {  // greedy: the model gave each position's token
    v = RejectionSampler::verify_greedy(drafts, std::span<const int32_t>(argmax_).subspan(row, drafts.size() + 1));
  } else {
    // p_i is conditioned on the context followed by drafts x_1..x_{i-1};
    // processed only for the positions the verification reaches.
    if (verify_dists_.size() < drafts.size() + 1) verify_dists_.resize(drafts.size() + 1);
    std::vector<int32_t> context;
    v = speculator_->verify(
        drafts, s.draft_dists,
        [&](size_t i) -> const std::vector<TokenProb>& {
          context.assign(r.tokens.begin(), r.tokens.end());
          context.insert(context.end(), drafts.begin(), drafts.begin() + static_cast<ptrdiff_t>(i));
          s.sampler.distribution_into(logits_row(row + i), context, num_prompt, verify_dists_[i]);
          return verify_dists_[i];
        },
        s.sampler);
  }
  speculator_->recycle(s.draft_dists);
  record_verify(s, static_cast<int32_t>(drafts.size()), v.num_accepted);
  return v;
}

void Engine::record_verify(Sequence& s, int32_t drafted, int32_t accepted) {
  if (s.lookup_drafts) {  // the probe's filler: says nothing of the proposer
    ++stats_.spec_probe_verifies;
    stats_.spec_probe_drafted_tokens += drafted;
    stats_.spec_probe_accepted_tokens += accepted;
  } else {
    policy_->record_verify(s.spec_stats, s.draft_confidence, drafted, accepted);
    ++stats_.spec_verifies;
    stats_.spec_drafted_tokens += drafted;
    stats_.spec_accepted_tokens += accepted;
  }
  s.lookup_drafts = false;
}

// A group of n > 1 forks at its first sample: each sibling draws its first
// token from the parent's first logits row (the parent's mask is theirs).
void Engine::fork_siblings(const Request& r, Sequence& s, size_t row, std::vector<Drawn>& drawn) {
  Group& g = *s.group;
  if (g.forked || g.params.n <= 1) return;
  g.forked = true;
  for (int32_t i = 1; i < g.params.n; ++i) {
    const RequestId child = next_seq_id_++;
    g.seqs.push_back(child);
    auto cs = std::make_unique<Sequence>(child, &g, i, params_for_index(g.params.sampling, i), *model_.tokenizer);
    const int32_t t = cs->sampler.sample(processed(s, logits_row(row)), r.tokens,
                                         static_cast<size_t>(r.num_prompt_tokens));
    sequences_[child] = std::move(cs);
    speculator_->fork(r.id, child);
    drawn.push_back({child, {t}, {row}, true});
  }
}

// Speculation weighs decode steps against verify steps, so only those feed
// its cost model: a prefill chunk runs the GEMM path at a lower cost per
// token than the few tokens of a verify, and fitted in, it made verifying
// look cheaper than it is. A step's cost is its forward pass and the
// sampling of its rows (every verified position is a row to process when
// sampling is not greedy; left out, drafting looked cheaper than it is at
// temperature > 0). A pass that paid a one-time set-up (a graph's capture)
// is left out too.
void Engine::observe_step_cost(double forward_and_sampling_seconds) {
  if (step_has_prefill_ || model_.model->last_forward_was_setup()) return;
  policy_->observe_step(static_cast<int64_t>(batch_.input.tokens.size()), forward_and_sampling_seconds);
}

// The scheduler takes the step's tokens (ending requests at max_tokens),
// forked siblings join it, then each drawn token is emitted up to a stop.
void Engine::apply_tokens(const SchedulerOutput& out, const std::vector<Drawn>& drawn,
                          const std::vector<StepTokens>& step_tokens) {
  std::vector<std::unique_ptr<Request>> finished = scheduler_->update_after_step(out, step_tokens);
  std::unordered_set<RequestId> finished_by_length;
  for (const auto& r : finished) finished_by_length.insert(r->id);
  for (const Drawn& d : drawn) {
    if (!d.fork) continue;
    Sequence& s = sequence_of(d.seq);
    const RequestId parent = s.group->seqs.front();
    if (scheduler_->find(parent) != nullptr) {
      Request& child = scheduler_->fork_request(parent, d.seq, d.tokens.front());
      child.engine_state = &s;
    } else {
      finished_by_length.insert(d.seq);  // the parent ended at max_tokens; so does its sibling
    }
  }
  for (const Drawn& d : drawn) {
    Sequence& s = sequence_of(d.seq);
    bool stopped = false;
    for (size_t i = 0; i < d.tokens.size() && !stopped; ++i) {
      const bool stop_token = is_stop_token(s, d.tokens[i]);
      if (!stop_token) emit(s, d.tokens[i], logits_row(d.rows[i]));
      stopped = stop_token || s.stops.stopped();
    }
    if (stopped) {
      if (scheduler_->find(d.seq) != nullptr) scheduler_->finish_request(d.seq, RequestStatus::kFinishedStopped);
      // A grammar with no way on ended at a stop token: unfinished, not stopped.
      end_sequence(s, s.constraint && s.constraint->dead_end() ? FinishReason::kAbort : FinishReason::kStop);
    } else if (finished_by_length.count(d.seq)) {
      end_sequence(s, FinishReason::kLength);
    }
  }
}

// Hands out what changed in each group and retires the finished ones.
std::vector<RequestOutput> Engine::collect_outputs() {
  std::vector<RequestOutput> results;
  for (auto it = groups_.begin(); it != groups_.end();) {
    Group& g = *it->second;
    release_prompt_scores(g);
    if (!g.touched) {
      ++it;
      continue;
    }
    RequestOutput& o = g.pending;
    o.cached_prompt_tokens = std::max<int64_t>(0, g.cached_prompt_tokens);
    o.first_scheduled = g.first_scheduled;
    o.completion_tokens = g.completion_tokens;
    o.finished = g.num_done == g.params.n;
    std::sort(o.completions.begin(), o.completions.end(),
              [](const CompletionDelta& a, const CompletionDelta& b) { return a.index < b.index; });
    results.push_back(std::move(o));
    g.pending = RequestOutput{};
    g.pending.id = g.id;
    g.pending.prompt_tokens = static_cast<int64_t>(g.params.prompt.size());
    g.touched = false;
    if (results.back().finished) {
      for (RequestId seq : g.seqs) sequences_.erase(seq);
      it = groups_.erase(it);
    } else {
      ++it;
    }
  }
  return results;
}

// A group's prompt logprobs go out once, when every prompt position is scored.
void Engine::release_prompt_scores(Group& g) {
  const bool prompt_scored = g.prompt_scores.size() + 1 == g.params.prompt.size();
  if (g.params.prompt_logprobs < 0 || g.prompt_scores_sent || !prompt_scored) return;
  std::vector<std::optional<TokenLogprobs>>& lp = g.pending.prompt_logprobs;
  lp.assign(1, std::nullopt);
  for (TokenLogprobs& t : g.prompt_scores) lp.emplace_back(std::move(t));
  g.prompt_scores.clear();  // only their count matters from now on
  g.prompt_scores.shrink_to_fit();
  g.prompt_scores_sent = true;
  g.touched = true;
}

}  // namespace exactly
