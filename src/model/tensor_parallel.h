// Tensor parallelism on the CPU: one model split over `size` ranks, each a
// thread with its own share of the weights (model/llama.h's shard()), its own
// KV heads in a pool of its own behind the same block tables, and its own
// kernel threads. After each attention and MLP block the ranks sum their
// partial outputs through an in-process collective in rank order, so a
// request's bits depend on the number of ranks but never on the batch or on
// timing; each rank computes its slice of the vocabulary's logits.
//
// The engine, scheduler and KV bookkeeping see one model and one pool. The
// shapes must divide: heads, KV heads and MLP columns by the rank count, and
// each rank's share of wo's and w_down's columns into whole blocks of 32.
// Experts are split as the dense MLP is (each expert's width; the router
// whole, so every rank routes alike); Gemma 3's post-norms take the summed
// block output, and a final soft cap applies to the gathered logits.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "model/collective.h"
#include "model/llama.h"
#include "model/model.h"

namespace exactly {

// Throws Error (bad input, exit 2) naming what keeps `config` from a `size`-way split.
void check_tensor_parallel(const ModelConfig& config, int size);

class TensorParallelModel final : public Model {
 public:
  // `threads` kernel threads in all, shared out between the ranks.
  TensorParallelModel(std::unique_ptr<LlamaModel> full, int size, int threads);
  ~TensorParallelModel() override;

  const ModelConfig& config() const override { return full_->config(); }
  const char* device() const override { return "cpu"; }
  int64_t weight_bytes() const override { return full_->weight_bytes(); }
  int64_t kv_bytes_per_slot() const override { return full_->kv_bytes_per_slot(); }
  void reserve(const ModelLimits&) override {}
  int64_t default_kv_cache_memory(double u) const override { return full_->default_kv_cache_memory(u); }
  std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) override;
  std::string memory_report() const override;

  // Every rank runs its shard's pass (the calling thread is rank 0); then
  // each row's argmax over the whole vocabulary when asked. `pool` is not
  // used: each rank has kernel threads of its own.
  void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers = -1,
               int32_t* argmax = nullptr) override;
  bool returns_hidden() const override { return true; }
  std::span<const float> hidden() const override { return shards_[0]->hidden(); }

 private:
  struct Pass {
    const ForwardBatch* batch;
    KVPool* kv;
    float* logits;
    int num_layers;
  };
  void run_rank(int rank, const Pass& pass);
  void worker(int rank);

  std::unique_ptr<LlamaModel> full_;  // owns the weights the shards view
  InProcessCollective collective_;
  std::vector<std::unique_ptr<LlamaModel>> shards_;
  std::vector<std::unique_ptr<ThreadPool>> pools_;  // [size] each rank's kernel threads
  // Ranks 1.. wait for a pass on their threads; rank 0 is the caller's.
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;  // passes started
  int running_ = 0;          // worker ranks still in the current pass
  bool stopping_ = false;
  Pass pass_{};
};

}  // namespace exactly
