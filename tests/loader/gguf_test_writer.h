// A deliberately permissive GGUF writer for tests and fuzz seeds.
//
// It writes whatever it is told — bad magic, lying counts, unknown types,
// misaligned or overlapping offsets — so tests can build exactly the defect
// they want to see rejected. It validates nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace exactly::testing {

// Little-endian encoding of GGUF primitives into a byte buffer.
class Bytes {
 public:
  template <typename T>
  Bytes& put(T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    data.insert(data.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& append(const Bytes& other) {
    data.insert(data.end(), other.data.begin(), other.data.end());
    return *this;
  }
  std::vector<uint8_t> data;  // [n_bytes] encoded so far
};

// Value type ids of the format (mirrors GGUFValueType, kept separate so the
// writer can also emit ids the reader must reject).
enum TypeId : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Encoded array payload (element type, count, elements) for scalar elements.
template <typename T>
Bytes array_payload(uint32_t elem_type, const std::vector<T>& items) {
  Bytes b;
  b.put<uint32_t>(elem_type).put<uint64_t>(items.size());
  for (const T& x : items) b.put<T>(x);
  return b;
}
inline Bytes string_array_payload(const std::vector<std::string>& items) {
  Bytes b;
  b.put<uint32_t>(kString).put<uint64_t>(items.size());
  for (const auto& s : items) b.str(s);
  return b;
}
// An array whose elements are the given (already encoded) array payloads.
inline Bytes nested_array_payload(const std::vector<Bytes>& inner) {
  Bytes b;
  b.put<uint32_t>(kArray).put<uint64_t>(inner.size());
  for (const auto& x : inner) b.append(x);
  return b;
}

struct TestTensor {
  std::string name;
  std::vector<uint64_t> dims;      // [n_dims] GGUF order, innermost first
  uint32_t type_id;
  std::vector<uint8_t> data;       // [nbytes] raw stored bytes
  std::optional<uint64_t> offset;  // recorded offset; default: where the data is actually placed
};

class GGUFTestWriter {
 public:
  uint32_t magic = 0x46554747;  // "GGUF"
  uint32_t version = 3;
  uint64_t alignment = 32;      // layout alignment; add general.alignment yourself to change it in the file
  std::optional<uint64_t> tensor_count_override;
  std::optional<uint64_t> kv_count_override;

  template <typename T>
  void add_scalar(const std::string& key, uint32_t type, T value) {
    Bytes b;
    b.put<T>(value);
    add_raw(key, type, b);
  }
  void add_string(const std::string& key, const std::string& value) {
    Bytes b;
    b.str(value);
    add_raw(key, kString, b);
  }
  void add_array(const std::string& key, const Bytes& payload) { add_raw(key, kArray, payload); }
  void add_raw(const std::string& key, uint32_t type, const Bytes& payload) {
    Bytes b;
    b.str(key).put<uint32_t>(type).append(payload);
    kvs_.push_back(std::move(b));
  }
  void add_tensor(TestTensor t) { tensors_.push_back(std::move(t)); }

  // Byte offsets of the pieces of the last build(), for targeted corruption.
  struct Layout {
    std::vector<size_t> kv_offsets;           // [n_kv]
    std::vector<size_t> tensor_info_offsets;  // [n_tensors]
    size_t data_offset = 0;
  };

  std::vector<uint8_t> build(Layout* layout = nullptr) const {
    Layout lay;
    Bytes out;
    out.put<uint32_t>(magic).put<uint32_t>(version);
    out.put<uint64_t>(tensor_count_override.value_or(tensors_.size()));
    out.put<uint64_t>(kv_count_override.value_or(kvs_.size()));
    for (const auto& kv : kvs_) {
      lay.kv_offsets.push_back(out.data.size());
      out.append(kv);
    }
    std::vector<uint64_t> placed;  // [n_tensors] where each tensor's data goes
    uint64_t cursor = 0;
    for (const auto& t : tensors_) {
      cursor = align(cursor);
      placed.push_back(cursor);
      cursor += t.data.size();
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      lay.tensor_info_offsets.push_back(out.data.size());
      out.str(t.name).put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) out.put<uint64_t>(d);
      out.put<uint32_t>(t.type_id).put<uint64_t>(t.offset.value_or(placed[i]));
    }
    if (!tensors_.empty()) out.data.resize(align(out.data.size()), 0);
    lay.data_offset = out.data.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out.data.resize(lay.data_offset + placed[i], 0);
      out.data.insert(out.data.end(), tensors_[i].data.begin(), tensors_[i].data.end());
    }
    if (layout) *layout = lay;
    return out.data;
  }

 private:
  uint64_t align(uint64_t x) const { return (x + alignment - 1) / alignment * alignment; }

  std::vector<Bytes> kvs_;
  std::vector<TestTensor> tensors_;
};

}  // namespace exactly::testing
