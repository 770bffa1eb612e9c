// How the kernel lab reaches into the Hopper prefill kernel: a hook type
// whose static members the kernel calls at fixed points. Production's,
// Sm90WsNoHook, does nothing there and compiles away; the lab's
// (dev/cuda/variants/flash_prefill_sm90_lab.cuh) leaves work out to time what
// it costs, counts the cycles the consumers wait, and stamps their steps.
#pragma once

namespace exactly::kernels::cuda {

struct Sm90WsNoHook {
  // Producer: tile g's copies are left out (its full barriers complete with
  // whatever the stage holds).
  __host__ __device__ static constexpr bool skips_copies(int /*g*/, int /*stages*/) { return false; }
  // Producer and consumers: every item takes the CTA's first item's Q.
  __host__ __device__ static constexpr bool keeps_first_q() { return false; }
  // Consumers: the raw scores go into P V without the softmax.
  __host__ __device__ static constexpr bool skips_softmax() { return false; }
  // Epilogue: no output is stored.
  __host__ __device__ static constexpr bool skips_stores() { return false; }

  // A consumer thread's own record, given to each of the calls below.
  struct Record {};
  // At the consumer's start, with its thread's index among the consumers.
  __device__ __forceinline__ static void begin(Record&, int /*ctid*/) {}
  // Around a wait for tile g's K (v = false) or V (v = true) to land.
  template <class Wait>
  __device__ __forceinline__ static void wait(Record&, bool /*v*/, Wait&& wait) {
    wait();
  }
  // Whether the steps that follow are those between two items.
  __device__ __forceinline__ static void between_items(Record&, bool) {}
  // At point `point` (0-8) of a step inside an item, and after its last.
  __device__ __forceinline__ static void stamp(Record&, int /*point*/) {}
  __device__ __forceinline__ static void step_done(Record&) {}
  // At the consumer's end.
  __device__ __forceinline__ static void end(Record&, int /*lane*/) {}
};

}  // namespace exactly::kernels::cuda
