// Internal to model/cuda: CUDA graphs of padded steps. Which steps replay a
// graph and how they are padded (graph_shape), and the cache of captured
// graphs, the least recently used dropped beyond a bound.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <type_traits>

#include "model/forward_batch.h"

namespace exactly {

// The layout of a step run from a graph: `seqs` sequences (the real ones
// and padding) of `query` tokens each. Query 0 is the batch as given.
struct StepShape {
  int32_t seqs = 0;
  int32_t query = 0;
};

// What the workspace holds: tokens, sequences, and blocks per table row.
struct StepCapacity {
  int64_t tokens = 0;
  int32_t seqs = 0;
  int32_t blocks = 0;
};

// The padded shape of a step that may replay a graph (its sequences bring at
// most max_query tokens each, up to `bound`), if it may.
std::optional<StepShape> graph_shape(const ModelInput& b, int32_t max_query, int block_size, int32_t bound,
                                     const StepCapacity& capacity);

class CudaGraphCache {
 public:
  // Captured steps: (padded sequences, tokens each, context bound, layers,
  // KV pool base address, its blocks).
  using Key = std::tuple<int32_t, int32_t, int32_t, int, const void*, int64_t>;

  explicit CudaGraphCache(size_t max_graphs) : max_graphs_(max_graphs) {}

  // Runs the step `launch` issues on `stream`: eagerly on the first sight of
  // `key`, captured into a graph and replayed on the second, replayed after.
  // Sets `setup` when the pass paid a set-up (the eager run or the capture).
  void run(const Key& key, cudaStream_t stream, const std::function<void()>& launch, bool& setup);
  // Drops every graph (they hold the addresses of buffers about to change).
  void clear() { graphs_.clear(); }

  size_t live() const { return graphs_.size(); }
  int64_t made() const { return made_; }
  int64_t bytes() const { return bytes_; }

 private:
  struct ExecDeleter {
    void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
  };
  using Exec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, ExecDeleter>;
  struct Captured {
    Exec exec;
    uint64_t last_use = 0;
  };
  // Captures `launch` into a new graph, dropping the least recently used
  // beyond max_graphs_.
  std::map<Key, Captured>::iterator capture(const Key& key, cudaStream_t stream, const std::function<void()>& launch);

  size_t max_graphs_;
  std::map<Key, Captured> graphs_;
  std::set<Key> seen_;
  uint64_t clock_ = 0;
  // GPU memory the instantiated graphs took (free memory before minus after
  // each instantiation and upload), and how many were made in all.
  int64_t bytes_ = 0;
  int64_t made_ = 0;
};

}  // namespace exactly
