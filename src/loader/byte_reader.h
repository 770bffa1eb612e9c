// A bounds-checked little-endian cursor over an untrusted byte image.
//
// Every read checks the remaining length first, so a truncated or lying file
// can only ever produce a FileFormatError, never an out-of-bounds access. The
// reader carries a short "context" (e.g. "key 'general.name'") so that errors
// say what was being read as well as where.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/format.h"

namespace exactly::loader_detail {

// A key or tensor name from the file as it may appear in a message: control
// bytes escaped (a hostile name must not drive the terminal) and long names cut.
inline std::string printable_name(const std::string& name) {
  constexpr size_t kMaxShown = 200;
  std::string out;
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f)
      out += strformat("\\x%02x", c);
    else
      out += name[i];
  }
  if (name.size() > kMaxShown) out += "...";
  return out;
}

class ByteReader {
 public:
  ByteReader(const uint8_t* base, size_t size, const std::string& file_name)  // base: [size]
      : base_(base), size_(size), file_name_(file_name) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }

  // What is being read, for error messages: "header", "key 'x'", "tensor 'y'".
  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }

  // Throws FileFormatError: "<file>: <context> at offset <at>: <reason>".
  [[noreturn]] void fail(size_t at, const std::string& reason) const {
    throw FileFormatError(strformat("%s: %s at offset %zu: %s", file_name_.c_str(), context_.c_str(),
                                    at, reason.c_str()));
  }

  // Fails unless `n` more bytes are available; `what` names the field.
  void need(size_t n, const char* what) const {
    if (n > remaining())
      fail(pos_, strformat("file truncated: %s needs %zu bytes but only %zu remain (file is %zu bytes)",
                           what, n, remaining(), size_));
  }

  template <typename T>
  T read(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, base_ + pos_, sizeof(T));  // unaligned-safe; GGUF is little-endian like the host
    pos_ += sizeof(T);
    return value;
  }

  // A GGUF string: uint64 byte length, then raw bytes (not necessarily UTF-8).
  std::string read_string(const char* what) {
    const size_t at = pos_;
    const auto len = read<uint64_t>(what);
    if (len > remaining())
      fail(at, strformat("%s length %llu exceeds the %zu bytes remaining in the file", what,
                         static_cast<unsigned long long>(len), remaining()));
    std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* base_;  // [size_]
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_name_;
  std::string context_ = "header";
};

}  // namespace exactly::loader_detail
