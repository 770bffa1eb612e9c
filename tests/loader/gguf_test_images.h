// Valid GGUF images shared by the loader tests and the fuzz seed generator.
#pragma once

#include <random>

#include "gguf_test_writer.h"

namespace exactly::testing {

inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// Stored bytes of a tensor of `n_elements` of a type with the given block geometry.
inline size_t stored_bytes(int64_t n_elements, int64_t block_elems, int64_t block_bytes) {
  return static_cast<size_t>(n_elements / block_elems * block_bytes);
}

// A small file touching every part of the format: scalars, a string with
// raw non-UTF-8 bytes, flat and nested arrays, and three tensors of
// different block geometries. Small enough to truncate at every offset.
inline GGUFTestWriter small_valid_writer() {
  GGUFTestWriter w;
  w.add_string("general.architecture", "llama");
  w.add_scalar<uint32_t>("llama.block_count", kU32, 2);
  w.add_scalar<float>("llama.rope.freq_base", kF32, 10000.0f);
  w.add_scalar<uint8_t>("flag", kBool, 1);
  w.add_scalar<int8_t>("i8", kI8, -5);
  w.add_scalar<uint64_t>("u64", kU64, 1234567890123ULL);
  w.add_string("raw", std::string("a\xff\x00z", 4));
  w.add_array("tokens", string_array_payload({"<s>", "hello", "\xc3"}));
  w.add_array("scores", array_payload<float>(kF32, {0.5f, -1.25f, 3.0f}));
  w.add_array("nested", nested_array_payload({array_payload<int16_t>(kI16, {1, -2}),
                                              string_array_payload({"x"}),
                                              array_payload<uint8_t>(kU8, {})}));
  w.add_tensor({"norm", {8}, 0 /*F32*/, random_bytes(8 * 4, 1), {}});
  w.add_tensor({"embd", {32, 2}, 8 /*Q8_0*/, random_bytes(stored_bytes(64, 32, 34), 2), {}});
  w.add_tensor({"blk.0.ffn", {256}, 12 /*Q4_K*/, random_bytes(stored_bytes(256, 256, 144), 3), {}});
  return w;
}

}  // namespace exactly::testing
