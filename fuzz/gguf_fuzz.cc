// libFuzzer target for the GGUF reader: any input must either parse or throw
// FileFormatError. Everything a parsed file exposes is then touched, so a
// reader that accepted a lying image shows up as an ASan/UBSan report.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/ggml_types.h"
#include "loader/gguf.h"

namespace {

volatile uint64_t g_sink;  // keeps the touched values observable

void touch_metadata(const exactly::GGUFFile& f) {
  uint64_t acc = 0;
  for (const auto& [key, value] : f.metadata()) {
    acc += exactly::gguf_value_to_string(value, SIZE_MAX).size();
    // Typed accessors may legitimately reject a value's type; that is the
    // only exception they may throw.
    try { acc += f.get_int(key).value_or(0); } catch (const exactly::FileFormatError&) {}
    try { acc += static_cast<uint64_t>(f.get_float(key).value_or(0) != 0); } catch (const exactly::FileFormatError&) {}
    try { acc += f.get_string(key).value_or("").size(); } catch (const exactly::FileFormatError&) {}
    try { acc += f.get_bool(key).value_or(false); } catch (const exactly::FileFormatError&) {}
    try { acc += f.get_string_array(key).value_or(std::vector<std::string>{}).size(); } catch (const exactly::FileFormatError&) {}
    try { acc += f.get_int_array(key).value_or(std::vector<int64_t>{}).size(); } catch (const exactly::FileFormatError&) {}
    try { acc += f.get_float_array(key).value_or(std::vector<float>{}).size(); } catch (const exactly::FileFormatError&) {}
    acc += f.find(key) != nullptr;
  }
  g_sink = g_sink + acc;
}

void touch_tensors(const exactly::GGUFFile& f) {
  uint64_t acc = 0;
  std::vector<float> values;  // [n_elements] of one tensor
  for (const auto& t : f.tensors()) {
    for (uint64_t i = 0; i < t.nbytes; ++i) acc += t.data[i];
    acc += f.find_tensor(t.name) == &t;
    // nbytes <= input size, so the element count is small here.
    values.resize(static_cast<size_t>(t.num_elements()));
    exactly::dequantize_row(t.type, t.data, values.data(), t.num_elements());
    for (float v : values) acc += v > 0.0f;
  }
  g_sink = g_sink + acc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<exactly::GGUFFile> f;
  try {
    f = exactly::GGUFFile::parse(data, size, "fuzz.gguf");
  } catch (const exactly::FileFormatError&) {
    return 0;
  }
  touch_metadata(*f);
  touch_tensors(*f);
  return 0;
}
