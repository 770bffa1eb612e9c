#include "speculative/model_drafter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "core/check.h"
#include "core/faulted_in.h"
#include "speculative/distribution_view.h"

namespace exactly {

ModelDrafter::ModelDrafter(Model& model, int num_layers, KVPool& kv, KVCacheManager& kv_manager, Cache cache,
                           int64_t max_pass_tokens, const TargetHiddenStates* hidden)
    : model_(model), num_layers_(num_layers), kv_(kv), kv_manager_(kv_manager), cache_(cache),
      max_pass_tokens_(max_pass_tokens), hidden_(hidden) {
  EXACTLY_CHECK(hidden == nullptr || (cache == Cache::kOwn && model.returns_hidden() &&
                                      hidden->dim() == model.config().dim));
  EXACTLY_CHECK(num_layers >= 1 && num_layers <= model.config().n_layers, "%d layers of %d", num_layers,
                model.config().n_layers);
  EXACTLY_CHECK(max_pass_tokens >= 1);
}

void ModelDrafter::fault_in(size_t max_requests, size_t max_drafts) {
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  if (logits_.capacity() < max_requests * vocab) reserve_faulted_in(logits_, max_requests * vocab);
  q_pool_.fill(max_drafts, vocab);
}

void ModelDrafter::release(SeqId seq) {
  if (cache_ != Cache::kOwn) return;
  if (kv_manager_.contains(seq)) kv_manager_.free(seq);
  held_.erase(seq);
}

void ModelDrafter::release_others(std::span<const DraftRequest> requests) {
  std::unordered_set<SeqId> wanted;
  for (const DraftRequest& r : requests) wanted.insert(r.seq);
  for (auto it = held_.begin(); it != held_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    kv_manager_.free(it->first);
    it = held_.erase(it);
  }
}

int64_t ModelDrafter::catch_up_tokens(SeqId seq, std::span<const int32_t> tokens) const {
  if (cache_ != Cache::kOwn) return 0;
  const auto before_newest = static_cast<int64_t>(tokens.size()) - 1;
  const auto it = held_.find(seq);
  const int64_t known = it != held_.end() ? it->second.known : kv_manager_.find_cached_prefix(tokens).num_tokens;
  return std::max<int64_t>(0, before_newest - known);
}

bool ModelDrafter::allocate(SeqId seq, int64_t computed, int64_t num_new) {
  std::vector<BlockCopy> copies;
  if (!kv_manager_.allocate(seq, computed, num_new, copies)) return false;
  std::vector<std::pair<int32_t, int32_t>> pairs;
  for (const BlockCopy& c : copies) pairs.push_back({c.src, c.dst});
  if (!pairs.empty()) kv_.copy_blocks(pairs);
  return true;
}

bool ModelDrafter::prepare_own(const DraftRequest& r, std::span<const DraftRequest> all, int64_t& budget, Work& w) {
  const auto n = static_cast<int64_t>(r.tokens.size());
  if (!kv_manager_.contains(r.seq)) {
    const PrefixHit hit = kv_manager_.find_cached_prefix(r.tokens);
    if (!kv_manager_.allocate_new(r.seq, r.tokens, hit, 0)) {
      release_others(all);
      if (!kv_manager_.allocate_new(r.seq, r.tokens, hit, 0)) return false;
    }
    held_[r.seq] = Held{hit.num_tokens, {}};
  }
  Held& h = held_.at(r.seq);
  // Fed drafts the target accepted are known tokens now; the rest go. The
  // newest token is always fed again, since its logits are what the first
  // draft is drawn from.
  size_t accepted = 0;
  while (accepted < h.fed.size() && h.known + static_cast<int64_t>(accepted) < n &&
         r.tokens[static_cast<size_t>(h.known) + accepted] == h.fed[accepted])
    ++accepted;
  const int64_t computed = std::min(h.known + static_cast<int64_t>(accepted), n - 1);
  h.known = computed;
  h.fed.clear();
  if (kv_manager_.num_reserved_tokens(r.seq) > computed) kv_manager_.truncate(r.seq, computed);
  kv_manager_.commit_computed(r.seq, r.tokens, computed);  // later prompts may start from these blocks

  w.first = computed;
  w.feed = std::min(n - computed, budget);
  w.k = w.feed == n - computed ? r.k : 0;
  if (w.feed <= 0) return false;
  // A head reads the target's hidden state before each token it is fed.
  if (hidden_ && !hidden_->has(r.seq, std::max<int64_t>(0, computed - 1), computed + w.feed - 2)) return false;
  const int64_t num_new = w.feed + std::max(0, w.k - 1);
  if (!allocate(r.seq, computed, num_new)) {
    release_others(all);
    if (!allocate(r.seq, computed, num_new)) return false;
  }
  budget -= w.feed;
  return true;
}

bool ModelDrafter::prepare_target(const DraftRequest& r, Work& w) {
  const auto n = static_cast<int64_t>(r.tokens.size());
  w.first = n - 1;
  w.feed = 1;
  w.k = r.k;
  // Slots for the newest token and the k - 1 drafts fed after it; the
  // scheduler adds the last draft's when it schedules the verify.
  return allocate(r.seq, n - 1, r.k);
}

void ModelDrafter::forward(const std::vector<Row>& rows, ThreadPool& pool) {
  ForwardBatch& b = batch_;
  const int32_t bs = kv_manager_.block_size();
  size_t max_blocks = 1;
  for (const Row& row : rows) max_blocks = std::max(max_blocks, kv_manager_.block_table(row.seq).size());
  b.reset(rows.size(), max_blocks);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    std::span<const BlockId> table = kv_manager_.block_table(row.seq);
    b.input.begin_sequence(i, table);
    for (size_t j = 0; j < row.tokens.size(); ++j)
      b.input.push_token(row.tokens[j], row.first + static_cast<int64_t>(j), table, bs);
    b.input.end_sequence(row.first + static_cast<int64_t>(row.tokens.size()));
    if (row.wants_logits) b.input.logits_rows.push_back(static_cast<int32_t>(b.input.tokens.size() - 1));
  }
  if (hidden_) fill_hidden_in(rows);
  // Rows drawn from their argmax leave their logits on the model's device.
  for (const Row& row : rows)
    if (row.wants_logits) b.jobs.row_use.push_back(row.argmax_only ? RowUse::kArgmax : RowUse::kLogits);
  const bool argmax_rows = std::find(b.jobs.row_use.begin(), b.jobs.row_use.end(), RowUse::kArgmax) !=
                           b.jobs.row_use.end();
  if (!argmax_rows) b.jobs.row_use.clear();
  b.jobs.argmax_probabilities = argmax_rows;
  argmax_.assign(b.input.logits_rows.size(), -1);
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  logits_.resize(std::max<size_t>(1, b.input.logits_rows.size()) * vocab);
  const auto t0 = std::chrono::steady_clock::now();
  model_.forward(b, kv_, logits_.data(), pool, num_layers_, argmax_rows ? argmax_.data() : nullptr);
  passes_.push_back({b.input.num_tokens(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                     model_.last_forward_was_setup()});
}

void ModelDrafter::keep_fed_back(const std::vector<size_t>& drawing, size_t num_work) {
  const auto dim = static_cast<size_t>(hidden_->dim());
  std::span<const float> out = model_.hidden();
  EXACTLY_CHECK(out.size() == drawing.size() * dim, "%zu hidden floats for %zu rows", out.size(), drawing.size());
  fed_back_.resize(num_work * dim);
  for (size_t row = 0; row < drawing.size(); ++row)
    std::copy(out.begin() + static_cast<std::ptrdiff_t>(row * dim),
              out.begin() + static_cast<std::ptrdiff_t>((row + 1) * dim),
              fed_back_.begin() + static_cast<std::ptrdiff_t>(drawing[row] * dim));
}

void ModelDrafter::fill_hidden_in(const std::vector<Row>& rows) {
  ForwardBatch& b = batch_;
  const auto dim = static_cast<size_t>(hidden_->dim());
  b.input.hidden_in.assign(b.input.tokens.size() * dim, 0.0f);  // position 0 reads a zero vector
  size_t t = 0;
  for (const Row& row : rows) {
    for (size_t j = 0; j < row.tokens.size(); ++j, ++t) {
      const int64_t before = row.first + static_cast<int64_t>(j) - 1;
      const float* h = row.fed_hidden ? row.fed_hidden : hidden_->at(row.seq, before);
      EXACTLY_CHECK(h != nullptr || before < 0, "no hidden state at position %lld", static_cast<long long>(before));
      if (h) std::copy(h, h + dim, b.input.hidden_in.begin() + static_cast<std::ptrdiff_t>(t * dim));
    }
  }
  b.input.hidden_rows = b.input.logits_rows;
}

namespace {

// Probability of token x under the softmax of `logits` at temperature 1;
// tokens outside the draft's head have logit -inf and weigh nothing.
double unit_softmax_probability(std::span<const float> logits, int32_t x) {
  const float top = logits[static_cast<size_t>(x)];
  double sum = 0;
  for (const float l : logits)
    if (l != -std::numeric_limits<float>::infinity()) sum += std::exp(static_cast<double>(l - top));
  return sum > 0 ? 1.0 / sum : 1.0;
}

double probability_of(std::span<const TokenProb> q, int32_t x) {
  for (const TokenProb& e : q)
    if (e.id == x) return e.p;
  return 0.0;
}

}  // namespace

void ModelDrafter::draw(const DraftRequest& r, Work& w, size_t logits_row, Drafts& out) {
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  std::span<const float> logits(logits_.data() + logits_row * vocab, vocab);
  const bool argmax_only = !batch_.jobs.row_use.empty() && batch_.jobs.row_use[logits_row] == RowUse::kArgmax;
  std::vector<TokenProb> q = q_pool_.take();
  if (argmax_only) {  // a plain greedy draft: q is one-hot (its logit is read by no one)
    q.assign(1, TokenProb{argmax_[logits_row], 0.0f, 1.0});
  } else {
    r.sampler->distribution_into(logits, w.context, r.num_prompt, q);
  }
  const bool greedy = r.sampler->params().greedy();
  const int32_t x = greedy ? q.front().id
                           : draw_from(DistributionView::sparse(std::span<const TokenProb>(q)), r.sampler->rng().uniform());
  // A run's confidence is worth its cost (a pass over the vocabulary for a
  // greedy draft) only where it decides the run's length.
  if (r.continue_above) {
    const double confidence = argmax_only ? model_.argmax_probabilities()[logits_row]
                              : greedy    ? unit_softmax_probability(logits, x)
                                          : probability_of(q, x);
    out.confidence.push_back(confidence);
    w.all_accepted *= std::min(1.0, r.confidence_scale * confidence);
    if (w.all_accepted < *r.continue_above) w.k = std::min(w.k, static_cast<int32_t>(out.tokens.size() + 1));
  }
  w.context.push_back(x);
  out.tokens.push_back(x);
  out.dists.push_back(std::move(q));
}

std::vector<Drafts> ModelDrafter::propose(std::span<const DraftRequest> requests, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  passes_.clear();
  std::vector<Drafts> out(requests.size());
  std::vector<Work> work;
  int64_t budget = max_pass_tokens_;
  int32_t max_k = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    EXACTLY_CHECK(r.k >= 1 && !r.tokens.empty() && r.sampler != nullptr);
    Work w;
    w.request = i;
    const bool ready = cache_ == Cache::kOwn ? prepare_own(r, requests, budget, w) : prepare_target(r, w);
    if (!ready) continue;
    if (w.k > 0) w.context.assign(r.tokens.begin(), r.tokens.end());
    max_k = std::max(max_k, w.k);
    work.push_back(std::move(w));
  }
  if (work.empty()) return out;

  // Pass j feeds the newest known token (with any catch-up before it) for
  // j = 0 and draft j otherwise, and draws draft j + 1 from its logits.
  for (int32_t j = 0; j == 0 || j < max_k; ++j) {
    std::vector<Row> rows;
    std::vector<size_t> drawing;  // [n_rows_with_logits] index into `work`
    for (size_t i = 0; i < work.size(); ++i) {
      const Work& w = work[i];
      const DraftRequest& r = requests[w.request];
      if (j == 0) {
        rows.push_back({r.seq, w.first, r.tokens.subspan(static_cast<size_t>(w.first), static_cast<size_t>(w.feed)),
                        w.k > 0, nullptr});
      } else if (j < w.k) {
        rows.push_back({r.seq, static_cast<int64_t>(r.tokens.size()) - 1 + j,
                        std::span<const int32_t>(out[w.request].tokens).subspan(static_cast<size_t>(j - 1), 1), true,
                        hidden_ ? fed_back_.data() + i * static_cast<size_t>(hidden_->dim()) : nullptr});
      } else {
        continue;
      }
      if (rows.back().wants_logits) {
        drawing.push_back(i);
        rows.back().argmax_only =
            model_.returns_argmax_probabilities() && r.sampler->plain_greedy(w.context.size(), r.num_prompt);
      }
    }
    if (rows.empty()) break;  // every run of drafts has ended
    forward(rows, pool);
    if (hidden_) keep_fed_back(drawing, work.size());
    for (size_t row = 0; row < drawing.size(); ++row) {
      Work& w = work[drawing[row]];
      draw(requests[w.request], w, row, out[w.request]);
    }
  }

  if (cache_ == Cache::kOwn) {
    for (const Work& w : work) {
      const DraftRequest& r = requests[w.request];
      Held& h = held_.at(r.seq);
      h.known = w.first + w.feed;
      // Now, not at the next step: a request that ends after this verify
      // still leaves its prompt's blocks for the next one to start from.
      kv_manager_.commit_computed(r.seq, r.tokens, h.known);
      const std::vector<int32_t>& drafts = out[w.request].tokens;
      if (!drafts.empty()) h.fed.assign(drafts.begin(), drafts.end() - 1);
    }
  }
  // What drafting costs is more than its forward passes: the bookkeeping,
  // and at temperature > 0 each draw's processed q over the draft's
  // vocabulary (~15% of drafting at temperature 0.8). Each pass carries its
  // share, so a cost model fitted to the passes prices all of it.
  double forward_seconds = 0;
  for (const DraftPass& p : passes_) forward_seconds += p.seconds;
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (forward_seconds > 0)
    for (DraftPass& p : passes_) p.seconds *= total / forward_seconds;
  return out;
}

}  // namespace exactly
