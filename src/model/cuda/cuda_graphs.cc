#include "model/cuda/cuda_graphs.h"

#include <algorithm>

#include "kernels/cuda/device_buffer.h"

namespace exactly {

namespace kc = kernels::cuda;

namespace {

// Decode batches are padded up to one of these sizes, each with a graph of
// its own: 1, 2, 4, 8, then multiples of 8 up to 64 and of 32 beyond.
int32_t graph_batch_size(int32_t n) {
  if (n <= 8) return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8;
  if (n <= 64) return (n + 7) / 8 * 8;
  return (n + 31) / 32 * 32;
}

// A step's tokens per sequence are padded up to one of these: each count up
// to 9 (a verify of up to 8 drafts), then multiples of 4.
int32_t graph_query_len(int32_t q) { return q <= 9 ? q : (q + 3) / 4 * 4; }

}  // namespace

// A step replays a graph when its sequences bring at most `bound` tokens
// each and padding them to one shape at most doubles its tokens (or keeps
// them within 128), every padded context staying within a block-table row;
// other steps (prompt chunks) launch their kernels from the host.
std::optional<StepShape> graph_shape(const ModelInput& b, int32_t max_query, int block_size, int32_t bound,
                                     const StepCapacity& capacity) {
  if (max_query > bound) return std::nullopt;
  const StepShape shape{std::min(graph_batch_size(b.num_seqs()), capacity.seqs), graph_query_len(max_query)};
  const int64_t tokens = int64_t{shape.seqs} * shape.query;
  if (shape.seqs < b.num_seqs() || tokens > capacity.tokens || tokens > std::max<int64_t>(2 * b.num_tokens(), 128))
    return std::nullopt;
  const int64_t table_slots = int64_t{capacity.blocks} * block_size;
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    const auto i = static_cast<size_t>(s);
    const int32_t query = b.query_start[i + 1] - b.query_start[i];
    if (query < 1 || int64_t{b.seq_lens[i]} + (shape.query - query) > table_slots) return std::nullopt;
  }
  return shape;
}

void CudaGraphCache::run(const Key& key, cudaStream_t stream, const std::function<void()>& launch, bool& setup) {
  auto it = graphs_.find(key);
  if (it == graphs_.end() && seen_.insert(key).second) {
    // The first step of a shape runs eagerly: kernels get their one-time
    // set-up (shared-memory limits, product plans and timings) outside any capture.
    launch();
    setup = true;
    return;
  }
  if (it == graphs_.end()) {
    setup = true;
    it = capture(key, stream, launch);
  }
  it->second.last_use = ++clock_;
  kc::check_cuda(cudaGraphLaunch(it->second.exec.get(), stream), "graph launch");
}

std::map<CudaGraphCache::Key, CudaGraphCache::Captured>::iterator CudaGraphCache::capture(
    const Key& key, cudaStream_t stream, const std::function<void()>& launch) {
  cudaGraph_t graph = nullptr;
  kc::check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "graph capture");
  try {
    launch();
  } catch (...) {  // leave the stream usable: end the capture, drop its graph
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  kc::check_cuda(cudaStreamEndCapture(stream, &graph), "graph capture");
  if (graphs_.size() >= max_graphs_) {
    auto oldest = graphs_.begin();
    for (auto g = graphs_.begin(); g != graphs_.end(); ++g)
      if (g->second.last_use < oldest->second.last_use) oldest = g;
    kc::check_cuda(cudaStreamSynchronize(stream), "graph eviction");
    graphs_.erase(oldest);
  }
  size_t free_before = 0, free_after = 0, total = 0;
  kc::check_cuda(cudaMemGetInfo(&free_before, &total), "reading free GPU memory");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t st = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  kc::check_cuda(st, "graph instantiation");
  const auto it = graphs_.emplace(key, Captured{Exec(exec), 0}).first;
  kc::check_cuda(cudaGraphUpload(exec, stream), "graph upload");
  kc::check_cuda(cudaMemGetInfo(&free_after, &total), "reading free GPU memory");
  bytes_ += free_before > free_after ? static_cast<int64_t>(free_before - free_after) : 0;
  ++made_;
  return it;
}

}  // namespace exactly
