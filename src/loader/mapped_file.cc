#include "loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/format.h"

namespace exactly {
namespace {

struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path, const char* what) {
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) throw FileFormatError(strformat("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0)
    throw FileFormatError(strformat("%s: cannot stat: %s", path.c_str(), std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw FileFormatError(strformat("%s: not a regular file", path.c_str()));
  if (st.st_size == 0) throw FileFormatError(strformat("%s: empty file, not %s", path.c_str(), what));
  const auto size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (map == MAP_FAILED)
    throw FileFormatError(strformat("%s: cannot map %zu bytes: %s", path.c_str(), size, std::strerror(errno)));
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(map), size));
}

MappedFile::~MappedFile() { ::munmap(const_cast<uint8_t*>(data_), size_); }

}  // namespace exactly
