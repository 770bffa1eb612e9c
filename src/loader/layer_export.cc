#include "loader/layer_export.h"

#include <charconv>

#include "core/error.h"
#include "core/format.h"
#include "loader/gguf_writer.h"

namespace exactly {

namespace {

// The N of a tensor named "blk.N.*"; -1 for tensors outside the layers.
int64_t layer_of(const std::string& name) {
  static constexpr std::string_view kPrefix = "blk.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  int64_t layer = -1;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  auto [ptr, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || ptr == begin || ptr == end || *ptr != '.') return -1;
  return layer;
}

}  // namespace

void export_first_layers(const GGUFFile& in, int64_t layers, const std::string& out_path) {
  const std::string key = in.require_string("general.architecture") + ".block_count";
  const int64_t block_count = in.require_int(key);
  if (layers < 1 || layers > block_count)
    throw Error(strformat("--layers %lld is out of range: %s has %lld layers (%s)", static_cast<long long>(layers),
                          in.path().c_str(), static_cast<long long>(block_count), key.c_str()),
                ExitCode::kUsage);

  std::vector<std::pair<std::string, GGUFValue>> metadata = in.metadata();
  for (auto& [name, value] : metadata) {
    if (name != key) continue;
    // require_int accepted the stored type, which is signed or unsigned.
    if (std::holds_alternative<uint64_t>(value.v))
      value.v = static_cast<uint64_t>(layers);
    else
      value.v = layers;
  }
  std::vector<GGUFTensorToWrite> tensors;
  for (const GGUFTensorInfo& t : in.tensors()) {
    if (layer_of(t.name) >= layers) continue;
    tensors.push_back({t.name, t.shape, t.type, std::span<const uint8_t>(t.data, t.nbytes)});
  }
  write_gguf(out_path, metadata, tensors);
}

}  // namespace exactly
