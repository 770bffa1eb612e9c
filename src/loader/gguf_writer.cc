#include "loader/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;

class FileOut {
 public:
  explicit FileOut(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw Error(strformat("cannot write %s: %s", path.c_str(), std::strerror(errno)));
  }
  ~FileOut() {
    if (f_) std::fclose(f_);
  }

  void bytes(const void* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f_) != n)
      throw Error(strformat("cannot write %s: %s", path_.c_str(), std::strerror(errno)));
    written_ += n;
  }
  template <class T>
  void put(T value) {  // GGUF is little-endian like the host
    bytes(&value, sizeof value);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static const uint8_t zeros[256] = {};
    while (written_ % alignment != 0) bytes(zeros, std::min<uint64_t>(sizeof zeros, alignment - written_ % alignment));
  }
  void close() {
    const bool ok = std::fflush(f_) == 0 && std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok) throw Error(strformat("cannot write %s: %s", path_.c_str(), std::strerror(errno)));
  }
  uint64_t written() const { return written_; }

 private:
  std::string path_;
  std::FILE* f_;
  uint64_t written_ = 0;
};

void put_value(FileOut& out, const GGUFValue& v) {
  switch (v.type) {
    case GGUFValueType::UINT8: out.put(static_cast<uint8_t>(std::get<uint64_t>(v.v))); break;
    case GGUFValueType::UINT16: out.put(static_cast<uint16_t>(std::get<uint64_t>(v.v))); break;
    case GGUFValueType::UINT32: out.put(static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
    case GGUFValueType::UINT64: out.put(std::get<uint64_t>(v.v)); break;
    case GGUFValueType::INT8: out.put(static_cast<int8_t>(std::get<int64_t>(v.v))); break;
    case GGUFValueType::INT16: out.put(static_cast<int16_t>(std::get<int64_t>(v.v))); break;
    case GGUFValueType::INT32: out.put(static_cast<int32_t>(std::get<int64_t>(v.v))); break;
    case GGUFValueType::INT64: out.put(std::get<int64_t>(v.v)); break;
    // A float32 was widened to double when read; narrowing it back is exact.
    case GGUFValueType::FLOAT32: out.put(static_cast<float>(std::get<double>(v.v))); break;
    case GGUFValueType::FLOAT64: out.put(std::get<double>(v.v)); break;
    case GGUFValueType::BOOL: out.put(static_cast<uint8_t>(std::get<bool>(v.v) ? 1 : 0)); break;
    case GGUFValueType::STRING: out.str(std::get<std::string>(v.v)); break;
    case GGUFValueType::ARRAY: {
      const GGUFArray& a = *std::get<std::shared_ptr<GGUFArray>>(v.v);
      out.put(static_cast<uint32_t>(a.elem_type));
      out.put(static_cast<uint64_t>(a.items.size()));
      for (const GGUFValue& item : a.items) put_value(out, item);
      break;
    }
  }
}

uint64_t alignment_of(const std::vector<std::pair<std::string, GGUFValue>>& metadata) {
  for (const auto& [key, value] : metadata) {
    if (key != "general.alignment") continue;
    const auto* u = std::get_if<uint64_t>(&value.v);
    const auto* s = std::get_if<int64_t>(&value.v);
    const uint64_t a = u ? *u : s && *s > 0 ? static_cast<uint64_t>(*s) : 0;
    EXACTLY_CHECK(a > 0 && (a & (a - 1)) == 0, "general.alignment must be a power of two");
    return a;
  }
  return kDefaultAlignment;
}

uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

}  // namespace

void write_gguf(const std::string& path, const std::vector<std::pair<std::string, GGUFValue>>& metadata,
                const std::vector<GGUFTensorToWrite>& tensors) {
  const uint64_t alignment = alignment_of(metadata);
  const std::string tmp = path + ".tmp";
  try {
    FileOut out(tmp);
    out.put(kMagic);
    out.put(uint32_t{3});
    out.put(static_cast<uint64_t>(tensors.size()));
    out.put(static_cast<uint64_t>(metadata.size()));
    for (const auto& [key, value] : metadata) {
      out.str(key);
      out.put(static_cast<uint32_t>(value.type));
      put_value(out, value);
    }
    uint64_t offset = 0;  // of the next tensor's data, relative to the data section
    for (const GGUFTensorToWrite& t : tensors) {
      int64_t elements = 1;
      for (int64_t d : t.shape) elements *= d;
      EXACTLY_CHECK(!t.shape.empty() && ggml_row_bytes(t.type, elements) == static_cast<int64_t>(t.data.size()),
                    "tensor %s: %zu bytes do not match its shape and type", t.name.c_str(), t.data.size());
      offset = align_up(offset, alignment);
      out.str(t.name);
      out.put(static_cast<uint32_t>(t.shape.size()));
      for (int64_t d : t.shape) out.put(static_cast<uint64_t>(d));
      out.put(static_cast<uint32_t>(t.type));
      out.put(offset);
      offset += t.data.size();
    }
    out.pad_to(alignment);  // the data section starts aligned, so file and section offsets align alike
    for (const GGUFTensorToWrite& t : tensors) {
      out.pad_to(alignment);
      out.bytes(t.data.data(), t.data.size());
    }
    out.close();
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw Error(strformat("cannot write %s: %s", path.c_str(), std::strerror(err)));
  }
}

}  // namespace exactly
