//===- fuzz_input.h - Helpers shared by the fuzz harnesses ----------------===//
//
// The readers under test take paths: an input becomes a memfd (a regular
// file in memory, reached as /proc/self/fd/N), so that the harnesses run
// the very code train runs, with no files on disk.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace dtc::fuzz {

class MemFile {
public:
  MemFile(const void *data, size_t size) {
    fd_ = ::memfd_create("dtc-fuzz", MFD_CLOEXEC);
    const char *p = static_cast<const char *>(data);
    while (fd_ >= 0 && size > 0) {
      ssize_t w = ::write(fd_, p, size);
      if (w <= 0)
        break;
      p += w;
      size -= size_t(w);
    }
  }
  ~MemFile() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  MemFile(const MemFile &) = delete;
  MemFile &operator=(const MemFile &) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
  int fd_ = -1;
};

} // namespace dtc::fuzz
