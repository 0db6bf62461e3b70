//===- atomic_file.h - Files that appear complete or not at all ----------===//
//
// AtomicFile writes PATH.tmp; commit() fsyncs it, renames it over PATH and
// fsyncs the directory. Destroyed uncommitted (an error), it removes
// PATH.tmp and leaves PATH untouched. Errors throw
// Error("cannot write <what> 'PATH': <strerror>").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>

namespace dtc::rt {

class AtomicFile {
public:
  AtomicFile(std::string target, std::string what)
      : path_(target + ".tmp"), target_(std::move(target)), what_(std::move(what)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0)
      fail();
  }
  ~AtomicFile() {
    if (fd_ >= 0)
      ::close(fd_);
    if (!committed_)
      ::unlink(path_.c_str());
  }
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  void write(const void *data, size_t n) {
    const char *p = static_cast<const char *>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        fail();
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  // fsync, close, rename over the target, fsync the directory.
  void commit() {
    if (::fsync(fd_) != 0)
      fail();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 || ::rename(path_.c_str(), target_.c_str()) != 0)
      fail();
    committed_ = true;
    std::string dir = target_.substr(0, target_.find_last_of('/') + 1);
    int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd); // best effort: the data itself is already durable
      ::close(dfd);
    }
  }

private:
  [[noreturn]] void fail() {
    throw Error(fmt::format("cannot write {} '{}': {}", what_, target_, std::strerror(errno)));
  }

  std::string path_, target_, what_;
  int fd_ = -1;
  bool committed_ = false;
};

} // namespace dtc::rt
