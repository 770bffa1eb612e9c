// A read-only memory map of a whole regular file, unmapped on destruction.
// Model files are mapped, never read: the OS pages in what the kernels touch
// and shares the pages between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace exactly {

class MappedFile {
 public:
  // Throws FileFormatError naming the path when the file cannot be opened,
  // is not a regular file, is empty ("empty file, not <what>") or cannot be
  // mapped.
  static std::unique_ptr<MappedFile> open(const std::string& path, const char* what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

}  // namespace exactly
