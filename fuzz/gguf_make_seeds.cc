// Writes a few small valid GGUF images into a directory as the fuzzer's
// starting corpus: every value type, nested arrays, every supported tensor
// type, version 2 and a custom alignment.
//
//   gguf_make_seeds DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "gguf_test_images.h"

namespace {

using namespace exactly::testing;

void write(const std::string& dir, const std::string& name, const GGUFTestWriter& w) {
  const auto img = w.build();
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(img.data()), static_cast<std::streamsize>(img.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_make_seeds DIR\n");
    return 64;
  }
  const std::string dir = argv[1];
  write(dir, "small.gguf", small_valid_writer());

  GGUFTestWriter types;  // one tensor per supported type: {id, elements per block, bytes per block}
  const int64_t geometry[][3] = {{0, 1, 4},    {1, 1, 2},      {30, 1, 2},     {2, 32, 18},  {3, 32, 20},
                                 {8, 32, 34},  {12, 256, 144}, {13, 256, 176}, {14, 256, 210}};
  uint32_t seed = 1;
  for (const auto& g : geometry) {
    const int64_t n = g[1] == 1 ? 8 : g[1];
    types.add_tensor({"t" + std::to_string(g[0]), {static_cast<uint64_t>(n)}, static_cast<uint32_t>(g[0]),
                      random_bytes(stored_bytes(n, g[1], g[2]), seed++), {}});
  }
  write(dir, "types.gguf", types);

  GGUFTestWriter values;
  values.version = 2;
  values.alignment = 64;
  values.add_scalar<uint32_t>("general.alignment", kU32, 64);
  values.add_scalar<uint8_t>("u8", kU8, 1);
  values.add_scalar<int16_t>("i16", kI16, -2);
  values.add_scalar<uint16_t>("u16", kU16, 3);
  values.add_scalar<int32_t>("i32", kI32, -4);
  values.add_scalar<int64_t>("i64", kI64, -5);
  values.add_scalar<double>("f64", kF64, 0.25);
  values.add_array("bools", array_payload<uint8_t>(kBool, {0, 1}));
  values.add_array("u64s", array_payload<uint64_t>(kU64, {1, 2}));
  values.add_array("deep", nested_array_payload({nested_array_payload({string_array_payload({"a", "b"})}),
                                                 array_payload<double>(kF64, {1.5})}));
  values.add_tensor({"w", {64, 2}, 2, random_bytes(stored_bytes(128, 32, 18), 99), {}});
  write(dir, "values_v2.gguf", values);

  GGUFTestWriter empty;
  empty.add_string("general.architecture", "llama");
  write(dir, "no_tensors.gguf", empty);
  return 0;
}
