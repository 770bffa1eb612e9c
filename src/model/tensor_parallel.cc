#include "model/tensor_parallel.h"

#include <algorithm>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "model/kv_storage.h"

namespace exactly {

namespace {

// One KV pool per rank (its KV heads), addressed by the same block ids.
class ShardedKVPool final : public KVPool {
 public:
  explicit ShardedKVPool(std::vector<std::unique_ptr<KVPool>> ranks) : ranks_(std::move(ranks)) {}
  int64_t num_blocks() const override { return ranks_[0]->num_blocks(); }
  int block_size() const override { return ranks_[0]->block_size(); }
  void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& pairs) override {
    for (auto& r : ranks_) r->copy_blocks(pairs);
  }
  KVPool& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }

 private:
  std::vector<std::unique_ptr<KVPool>> ranks_;
};

}  // namespace

void check_tensor_parallel(const ModelConfig& c, int size) {
  // The model's shape, not the flag alone, decides: exit 2 as for other input the engine cannot run.
  auto refuse = [&](const std::string& why) {
    throw Error(strformat("--tensor-parallel-size %d: %s", size, why.c_str()), ExitCode::kBadInput);
  };
  if (size < 1 || size > 64) throw Error("--tensor-parallel-size must be from 1 to 64", ExitCode::kUsage);

  if (!c.output_token_ids.empty()) refuse("a partial output head (exactly.output_token_ids) is not split");
  if (c.n_heads % size != 0 || c.n_kv_heads % size != 0)
    refuse(strformat("%d attention heads and %d KV heads do not divide into %d ranks", c.n_heads, c.n_kv_heads, size));
  // Experts are split like the dense MLP: each expert's width over the ranks.
  const int32_t ffn = c.n_experts > 0 ? c.expert_ffn_dim : c.ffn_dim;
  if (ffn % size != 0) refuse(strformat("the MLP's %d columns do not divide into %d ranks", ffn, size));
  if ((c.n_heads / size * c.head_dim) % 32 != 0 || (ffn / size) % 32 != 0)
    refuse(strformat("each rank's share of wo (%d columns) and w_down (%d) must be a multiple of 32",
                     c.n_heads / size * c.head_dim, ffn / size));
}

TensorParallelModel::TensorParallelModel(std::unique_ptr<LlamaModel> full, int size, int threads)
    : full_(std::move(full)), collective_(size) {
  check_tensor_parallel(full_->config(), size);
  for (int r = 0; r < size; ++r) {
    shards_.push_back(full_->shard(r, size, collective_));
    pools_.push_back(std::make_unique<ThreadPool>(std::max(1, threads / size)));
  }
  for (int r = 1; r < size; ++r) workers_.emplace_back([this, r] { worker(r); });
}

TensorParallelModel::~TensorParallelModel() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

std::unique_ptr<KVPool> TensorParallelModel::make_kv_pool(int64_t num_blocks, int block_size) {
  std::vector<std::unique_ptr<KVPool>> ranks;
  for (auto& s : shards_) ranks.push_back(s->make_kv_pool(num_blocks, block_size));
  return std::make_unique<ShardedKVPool>(std::move(ranks));
}

std::string TensorParallelModel::memory_report() const {
  return strformat("tensor parallel: %zu ranks of %d threads", shards_.size(), pools_[0]->size());
}

void TensorParallelModel::run_rank(int rank, const Pass& pass) {
  auto& kv = static_cast<ShardedKVPool&>(*pass.kv).rank(rank);
  shards_[static_cast<size_t>(rank)]->forward(*pass.batch, kv, pass.logits, *pools_[static_cast<size_t>(rank)],
                                              pass.num_layers, nullptr);
}

void TensorParallelModel::worker(int rank) {
  uint64_t seen = 0;
  while (true) {
    Pass pass;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      pass = pass_;
    }
    run_rank(rank, pass);
    {
      std::lock_guard lock(mutex_);
      if (--running_ == 0) done_.notify_one();
    }
  }
}

void TensorParallelModel::forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool&, int num_layers,
                                  int32_t* argmax) {
  EXACTLY_CHECK(dynamic_cast<ShardedKVPool*>(&kv) != nullptr, "a tensor-parallel model was given another KV pool");
  // Bad input is refused here, before any rank waits on another in a collective.
  num_layers = check_forward_batch(batch, *this, num_layers);
  {
    std::lock_guard lock(mutex_);
    pass_ = {&batch, &kv, logits, num_layers};
    running_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_rank(0, pass_);
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return running_ == 0; });
  }
  // The soft cap and argmax on the gathered rows, as the whole model takes them.
  cap_and_argmax(logits, static_cast<int64_t>(batch.input.logits_rows.size()), config().vocab_size,
                 config().final_logit_softcap, argmax, *pools_[0]);
}

}  // namespace exactly
