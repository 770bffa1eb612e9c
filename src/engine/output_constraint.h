// What a request may generate beyond its sampling settings: a logit bias and
// a grammar. The engine sees a grammar only through these interfaces (the
// grammar engine lives in constrain/), as a mask over the vocabulary before
// each sampled token.
//
// Exactness: the processed row is the model's row with the bias added and
// the disallowed tokens set to -inf, nothing else. Greedy picks the model's
// own argmax whenever the grammar allows it, and sampling draws from the
// model's distribution renormalised over the allowed tokens.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace exactly {

// One sequence's position in a grammar.
class ConstraintState {
 public:
  virtual ~ConstraintState() = default;
  // Bit t of mask[t / 32] is set when token t may come next; stop tokens
  // are allowed once the grammar is complete.
  virtual void fill_mask(std::span<uint32_t> mask) = 0;  // [ceil(vocab / 32)]
  // Advances past a token the mask allowed; false when the grammar refuses it.
  virtual bool accept(int32_t token) = 0;
  // The last mask found no token the grammar allows (a byte no token of the
  // vocabulary holds) and allowed the stop tokens instead, so that the row
  // can be sampled: the output ends unfinished, and says so ("abort").
  virtual bool dead_end() const { return false; }
};

// A compiled grammar, shared by every request that asks for it.
class Constraint {
 public:
  virtual ~Constraint() = default;
  virtual std::unique_ptr<ConstraintState> start() const = 0;
};

using LogitBias = std::vector<std::pair<int32_t, float>>;  // (token id, bias added to its logit)

inline size_t mask_words(size_t vocab) { return (vocab + 31) / 32; }

// `out` = `logits` + `bias`, with every token that `mask` (when not empty)
// leaves out set to -inf.
void process_row(std::span<const float> logits, const LogitBias& bias, std::span<const uint32_t> mask,
                 std::vector<float>& out);

// Fills grammar masks on threads of its own while the forward pass runs:
// a mask depends only on the tokens accepted so far, never on this step's
// logits. Each job is one sequence's (its own grammar state and mask). A
// job's key (its sequence) names its home thread, key % threads, so that a
// sequence's masks are filled on one thread step after step, whose caches
// hold the grammar's megabytes: a mask filled cold costs about three times
// a warm one. A thread with no jobs of its own left takes the last job of
// the thread with the most still waiting, when that is two or more (a
// lone job waits for its home thread).
class MaskFiller {
 public:
  explicit MaskFiller(int threads = 1);
  ~MaskFiller();
  MaskFiller(const MaskFiller&) = delete;
  MaskFiller& operator=(const MaskFiller&) = delete;

  struct Job {
    uint64_t key = 0;
    std::function<void()> run;
  };
  void start(std::vector<Job> jobs);  // returns at once
  void wait();                        // until every started job has run

  // Seconds the jobs ran (summed over threads), and seconds wait() blocked:
  // the masks' share of a step's critical path.
  struct Times {
    int64_t jobs = 0;
    double job_seconds = 0, wait_seconds = 0;
  };
  Times times();

 private:
  void run(size_t thread);
  // The index of the job `thread` takes next, or none; under mu_.
  std::optional<size_t> take(size_t thread);
  bool idle() const { return waiting_ == 0 && running_ == 0; }
  std::mutex mu_;
  std::condition_variable work_, done_;
  std::vector<Job> jobs_;
  std::vector<std::deque<size_t>> queues_;  // per thread: its jobs not yet taken, in order
  size_t waiting_ = 0;                      // jobs not yet taken
  size_t running_ = 0;  // jobs taken and not yet finished
  bool steal_lone_jobs_ = false;
  Times times_;
  bool quit_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace exactly
