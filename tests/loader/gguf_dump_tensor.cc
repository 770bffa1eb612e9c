// Test-only tool: writes the dequantised float32 values of GGUF tensors to
// stdout (native byte order, tensors concatenated in argument order), so the
// Python tests can compare dequantize_row against an independent decoder.
//
//   gguf_dump_tensor FILE TENSOR [TENSOR...]
//   gguf_dump_tensor FILE --list      one "name type n_elements" line per tensor
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/ggml_types.h"
#include "loader/gguf.h"

namespace {

int dump(int argc, char** argv) {
  auto file = exactly::GGUFFile::open(argv[1]);
  if (std::strcmp(argv[2], "--list") == 0) {
    for (const auto& t : file->tensors())
      std::printf("%s %s %lld\n", t.name.c_str(), exactly::ggml_type_name(t.type).data(),
                  static_cast<long long>(t.num_elements()));
    return 0;
  }
  std::vector<float> values;  // [n_elements] of one tensor
  for (int i = 2; i < argc; ++i) {
    const auto& t = file->require_tensor(argv[i]);
    values.resize(static_cast<size_t>(t.num_elements()));
    // Rows are contiguous runs of whole blocks, so the tensor is one long row.
    exactly::dequantize_row(t.type, t.data, values.data(), t.num_elements());
    if (std::fwrite(values.data(), sizeof(float), values.size(), stdout) != values.size()) {
      std::fprintf(stderr, "gguf_dump_tensor: write failed\n");
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gguf_dump_tensor FILE TENSOR [TENSOR...] | FILE --list\n");
    return 64;
  }
  try {
    return dump(argc, argv);
  } catch (const exactly::Error& e) {
    std::fprintf(stderr, "gguf_dump_tensor: %s\n", e.what());
    return static_cast<int>(e.code());
  }
}
