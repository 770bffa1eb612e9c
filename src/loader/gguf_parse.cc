// Parsing and validation of a GGUF image: header, metadata, tensor infos and
// tensor data ranges. The image is untrusted: every count is checked against
// the bytes that remain before anything is allocated, so a few hostile bytes
// can neither crash the reader nor make it allocate gigabytes.
#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

#include "loader/byte_reader.h"
#include "loader/gguf.h"

namespace exactly {

namespace {

using loader_detail::ByteReader;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr int kMaxDims = 4;
// Nested arrays are legal but never deep in practice; the cap keeps the
// recursive reader's stack use bounded.
constexpr int kMaxArrayDepth = 16;
// Every array element becomes a GGUFValue (~48 bytes). Real vocabularies hold
// a few hundred thousand entries; the cap stops a file of one-byte elements
// from expanding 48-fold in memory.
constexpr uint64_t kMaxMetadataItems = uint64_t{1} << 22;
constexpr uint64_t kMaxKeyBytes = 65535;  // the format's own limit on key length

bool is_valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GGUFValueType::FLOAT64); }

// Fewest bytes one value of type `t` occupies in the file.
uint64_t min_value_bytes(GGUFValueType t) {
  switch (t) {
    case GGUFValueType::UINT8: case GGUFValueType::INT8: case GGUFValueType::BOOL: return 1;
    case GGUFValueType::UINT16: case GGUFValueType::INT16: return 2;
    case GGUFValueType::UINT32: case GGUFValueType::INT32: case GGUFValueType::FLOAT32: return 4;
    case GGUFValueType::UINT64: case GGUFValueType::INT64: case GGUFValueType::FLOAT64: return 8;
    case GGUFValueType::STRING: return 8;   // length prefix
    case GGUFValueType::ARRAY: return 12;   // element type + count
  }
  return 1;
}

class MetadataReader {
 public:
  explicit MetadataReader(ByteReader& r) : r_(r) {}

  GGUFValueType read_type(const char* what) {
    const size_t at = r_.pos();
    const auto raw = r_.read<uint32_t>(what);
    if (!is_valid_value_type(raw)) r_.fail(at, strformat("unknown %s %u", what, raw));
    return static_cast<GGUFValueType>(raw);
  }

  GGUFValue read_value(GGUFValueType type, int depth) {
    GGUFValue out{type, uint64_t{0}};
    switch (type) {
      case GGUFValueType::UINT8: out.v = uint64_t{r_.read<uint8_t>("uint8 value")}; break;
      case GGUFValueType::UINT16: out.v = uint64_t{r_.read<uint16_t>("uint16 value")}; break;
      case GGUFValueType::UINT32: out.v = uint64_t{r_.read<uint32_t>("uint32 value")}; break;
      case GGUFValueType::UINT64: out.v = r_.read<uint64_t>("uint64 value"); break;
      case GGUFValueType::INT8: out.v = int64_t{r_.read<int8_t>("int8 value")}; break;
      case GGUFValueType::INT16: out.v = int64_t{r_.read<int16_t>("int16 value")}; break;
      case GGUFValueType::INT32: out.v = int64_t{r_.read<int32_t>("int32 value")}; break;
      case GGUFValueType::INT64: out.v = r_.read<int64_t>("int64 value"); break;
      case GGUFValueType::FLOAT32: out.v = double{r_.read<float>("float32 value")}; break;
      case GGUFValueType::FLOAT64: out.v = r_.read<double>("float64 value"); break;
      case GGUFValueType::BOOL: {
        const size_t at = r_.pos();
        const auto b = r_.read<uint8_t>("bool value");
        if (b > 1) r_.fail(at, strformat("bool value %u is neither 0 nor 1", b));
        out.v = b == 1;
        break;
      }
      case GGUFValueType::STRING: out.v = r_.read_string("string value"); break;
      case GGUFValueType::ARRAY: out.v = read_array(depth + 1); break;
    }
    return out;
  }

 private:
  std::shared_ptr<GGUFArray> read_array(int depth) {
    const size_t at = r_.pos();
    if (depth > kMaxArrayDepth)
      r_.fail(at, strformat("arrays nested more than %d deep", kMaxArrayDepth));
    auto arr = std::make_shared<GGUFArray>();
    arr->elem_type = read_type("array element type");
    const size_t count_at = r_.pos();
    const auto count = r_.read<uint64_t>("array length");
    const uint64_t min_bytes = min_value_bytes(arr->elem_type);
    if (count > r_.remaining() / min_bytes)
      r_.fail(count_at, strformat("array of %llu %s elements needs at least %llu bytes per element "
                                  "but only %zu bytes remain",
                                  static_cast<unsigned long long>(count),
                                  std::string(gguf_value_type_name(arr->elem_type)).c_str(),
                                  static_cast<unsigned long long>(min_bytes), r_.remaining()));
    if (count > items_left_)
      r_.fail(count_at, strformat("array of %llu elements exceeds the limit of %llu metadata array "
                                  "elements in one file",
                                  static_cast<unsigned long long>(count),
                                  static_cast<unsigned long long>(kMaxMetadataItems)));
    items_left_ -= count;
    arr->items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) arr->items.push_back(read_value(arr->elem_type, depth));
    return arr;
  }

  ByteReader& r_;
  uint64_t items_left_ = kMaxMetadataItems;
};

uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

}  // namespace

void GGUFFile::parse_all() {
  ByteReader r(base_, size_, path_);

  // Header.
  const auto magic = r.read<uint32_t>("magic");
  if (magic != kMagic) r.fail(0, "not a GGUF file (bad magic; expected the bytes 'GGUF')");
  const auto version = r.read<uint32_t>("version");
  if (version == 1)
    r.fail(4, "GGUF version 1 is not supported (only versions 2 and 3); re-convert the model");
  if (version != 2 && version != 3) {
    if (__builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3)
      r.fail(4, "big-endian GGUF files are not supported");
    r.fail(4, strformat("unsupported GGUF version %u (supported: 2, 3)", version));
  }
  version_ = version;
  const size_t counts_at = r.pos();
  const auto n_tensors = r.read<uint64_t>("tensor count");
  const auto n_kv = r.read<uint64_t>("metadata key/value count");
  // A key/value takes at least 13 bytes and a tensor info at least 32.
  if (n_kv > r.remaining() / 13)
    r.fail(counts_at + 8, strformat("metadata key/value count %llu cannot fit in the %zu bytes remaining "
                                    "(truncated or corrupt file)",
                                    static_cast<unsigned long long>(n_kv), r.remaining()));
  if (n_tensors > r.remaining() / 32)
    r.fail(counts_at, strformat("tensor count %llu cannot fit in the %zu bytes remaining "
                                "(truncated or corrupt file)",
                                static_cast<unsigned long long>(n_tensors), r.remaining()));

  // Metadata.
  MetadataReader mr(r);
  size_t alignment_key_at = 0;
  metadata_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t key_at = r.pos();
    r.set_context(strformat("metadata key #%llu", static_cast<unsigned long long>(i)));
    std::string key = r.read_string("key");
    if (key.size() > kMaxKeyBytes)
      r.fail(key_at, strformat("key length %zu exceeds the format limit of %llu bytes", key.size(),
                               static_cast<unsigned long long>(kMaxKeyBytes)));
    r.set_context("key '" + loader_detail::printable_name(key) + "'");
    if (metadata_index_.count(key)) r.fail(key_at, "duplicate metadata key");
    if (key == "general.alignment") alignment_key_at = key_at;
    const GGUFValueType type = mr.read_type("value type");
    GGUFValue value = mr.read_value(type, 0);
    metadata_index_.emplace(key, metadata_.size());
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  // Alignment of the data section and of every tensor's data.
  if (const GGUFValue* a = find("general.alignment")) {
    r.set_context("key 'general.alignment'");
    const auto* u = std::get_if<uint64_t>(&a->v);
    const auto* s = std::get_if<int64_t>(&a->v);
    const uint64_t value = u ? *u : s && *s > 0 ? static_cast<uint64_t>(*s) : 0;
    if (!u && !s) r.fail(alignment_key_at, strformat("has type %s, expected an integer",
                                      std::string(gguf_value_type_name(a->type)).c_str()));
    if (value == 0 || !std::has_single_bit(value) || value > std::numeric_limits<uint32_t>::max())
      r.fail(alignment_key_at, strformat("alignment %lld is not a non-zero power of two that fits in 32 bits",
                          u ? static_cast<long long>(*u) : static_cast<long long>(*s)));
    alignment_ = value;
  }

  // Tensor infos.
  std::vector<size_t> info_offsets;  // [n_tensors] where each tensor info starts, for messages
  tensors_.reserve(static_cast<size_t>(n_tensors));
  info_offsets.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t info_at = r.pos();
    r.set_context(strformat("tensor #%llu", static_cast<unsigned long long>(i)));
    GGUFTensorInfo t{};
    t.name = r.read_string("tensor name");
    if (t.name.empty()) r.fail(info_at, "empty tensor name");
    r.set_context("tensor '" + loader_detail::printable_name(t.name) + "'");
    if (tensor_index_.count(t.name)) r.fail(info_at, "duplicate tensor name");
    const size_t dims_at = r.pos();
    const auto n_dims = r.read<uint32_t>("dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      r.fail(dims_at, strformat("%u dimensions (must be 1 to %d)", n_dims, kMaxDims));
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const size_t dim_at = r.pos();
      const auto dim = static_cast<int64_t>(r.read<uint64_t>("dimension"));
      if (dim <= 0) r.fail(dim_at, strformat("dimension %u is %lld (must be positive)", d, static_cast<long long>(dim)));
      if (__builtin_mul_overflow(n_elements, dim, &n_elements))
        r.fail(dim_at, "element count overflows 64 bits");
      t.shape.push_back(dim);
    }
    const size_t type_at = r.pos();
    const auto type_id = r.read<uint32_t>("tensor type");
    const auto traits = ggml_type_traits(type_id);
    if (!traits) r.fail(type_at, strformat("unknown tensor type id %u", type_id));
    if (!traits->supported)
      r.fail(type_at, strformat("tensor type %s (id %u) is not supported", traits->name.data(), type_id));
    t.type = static_cast<GGMLType>(type_id);
    if (t.shape[0] % traits->block_elems != 0)
      r.fail(type_at, strformat("first dimension %lld is not a multiple of the %s block size %lld",
                                static_cast<long long>(t.shape[0]), traits->name.data(),
                                static_cast<long long>(traits->block_elems)));
    int64_t nbytes = 0;
    if (__builtin_mul_overflow(n_elements / traits->block_elems, traits->block_bytes, &nbytes))
      r.fail(type_at, "data size overflows 64 bits");
    t.nbytes = static_cast<uint64_t>(nbytes);
    t.offset = r.read<uint64_t>("tensor data offset");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
    info_offsets.push_back(info_at);
  }

  // Tensor data: inside the file, aligned, and not overlapping.
  data_offset_ = align_up(r.pos(), alignment_);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GGUFTensorInfo& t = tensors_[i];
    r.set_context("tensor '" + loader_detail::printable_name(t.name) + "'");
    if (t.offset % alignment_ != 0)
      r.fail(info_offsets[i], strformat("data offset %llu is not a multiple of the alignment %llu",
                                        static_cast<unsigned long long>(t.offset),
                                        static_cast<unsigned long long>(alignment_)));
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(data_offset_, t.offset, &begin) || __builtin_add_overflow(begin, t.nbytes, &end))
      r.fail(info_offsets[i], strformat("data offset %llu extends past end of file (%zu bytes)",
                                        static_cast<unsigned long long>(t.offset), size_));
    if (end > size_)
      r.fail(info_offsets[i], strformat("data range [%llu, %llu) extends past end of file (%zu bytes)",
                                        static_cast<unsigned long long>(data_offset_ + t.offset),
                                        static_cast<unsigned long long>(data_offset_ + t.offset + t.nbytes),
                                        size_));
    t.data = base_ + begin;
    // Float tensors are read as float/uint16 arrays: their data must sit at an
    // address those types may be loaded from (a file may legally declare
    // general.alignment 1 or 2).
    const uint64_t element_alignment = t.type == GGMLType::F32 ? 4
                                       : (t.type == GGMLType::F16 || t.type == GGMLType::BF16) ? 2
                                                                                               : 1;
    if (reinterpret_cast<uintptr_t>(t.data) % element_alignment != 0)
      r.fail(info_offsets[i], strformat("data at byte %llu is not aligned to the %llu bytes that %s elements need",
                                        static_cast<unsigned long long>(begin),
                                        static_cast<unsigned long long>(element_alignment),
                                        std::string(ggml_type_name(t.type)).c_str()));
  }
  std::vector<size_t> by_offset(tensors_.size());  // [n_tensors] tensor indices sorted by data offset
  std::iota(by_offset.begin(), by_offset.end(), size_t{0});
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const GGUFTensorInfo& prev = tensors_[by_offset[k - 1]];
    const GGUFTensorInfo& cur = tensors_[by_offset[k]];
    if (prev.offset + prev.nbytes > cur.offset) {
      r.set_context("tensor '" + loader_detail::printable_name(cur.name) + "'");
      r.fail(info_offsets[by_offset[k]],
             strformat("data range [%llu, %llu) overlaps tensor '%s' at [%llu, %llu)",
                       static_cast<unsigned long long>(data_offset_ + cur.offset),
                       static_cast<unsigned long long>(data_offset_ + cur.offset + cur.nbytes),
                       loader_detail::printable_name(prev.name).c_str(),
                       static_cast<unsigned long long>(data_offset_ + prev.offset),
                       static_cast<unsigned long long>(data_offset_ + prev.offset + prev.nbytes)));
    }
  }
}

}  // namespace exactly
