// Internal to model/cuda: a diagnostic of a GPU step's phases.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/cuda_check.h"

namespace exactly {

// EXACTLY_CUDA_STEP_TRACE=1 prints each step's phases on stderr: the GPU's
// time in the layers, the head, the rows' processing and sampling (events in
// the stream), the host's clock at each mark and its wait for grammar masks.
// A diagnostic: the events cost a few microseconds a step.
class StepTrace {
 public:
  enum Mark { kStart, kLayers, kHead, kProcessed, kEnd, kMarks };
  static StepTrace* get() {
    static StepTrace* trace = std::getenv("EXACTLY_CUDA_STEP_TRACE") != nullptr ? new StepTrace : nullptr;
    return trace;
  }
  void mark(Mark m, cudaStream_t stream) {
    kernels::cuda::check_cuda(cudaEventRecord(events_[m], stream), "trace");
    host_[m] = std::chrono::steady_clock::now();
  }
  void synchronised() { synced_ = std::chrono::steady_clock::now(); }
  // Around the host's wait for grammar masks.
  void begin_wait() { wait_start_ = std::chrono::steady_clock::now(); }
  void end_wait() {
    await_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start_).count();
  }
  // After the stream is synchronised.
  void print(int64_t tokens, int64_t rows) {
    float ms[kMarks] = {};
    for (int m = kLayers; m < kMarks; ++m) cudaEventElapsedTime(&ms[m], events_[m - 1], events_[m]);
    auto at = [&](std::chrono::steady_clock::time_point t) {
      return 1e3 * std::chrono::duration<double>(t - host_[kStart]).count();
    };
    std::fprintf(
        stderr,
        "step %lld tokens %lld rows: layers %.3f head %.3f process %.3f sample+ %.3f ms; masks awaited %.3f ms; "
        "host at layers %.3f head %.3f processed %.3f end %.3f synchronised %.3f ms\n",
        static_cast<long long>(tokens), static_cast<long long>(rows), ms[kLayers], ms[kHead], ms[kProcessed], ms[kEnd],
        1e3 * await_seconds_, at(host_[kLayers]), at(host_[kHead]), at(host_[kProcessed]), at(host_[kEnd]),
        at(synced_));
    await_seconds_ = 0;
  }

 private:
  StepTrace() {
    for (auto& e : events_) kernels::cuda::check_cuda(cudaEventCreate(&e), "trace");
  }
  cudaEvent_t events_[kMarks] = {};
  std::chrono::steady_clock::time_point host_[kMarks], synced_, wait_start_;
  double await_seconds_ = 0;
};

}  // namespace exactly
