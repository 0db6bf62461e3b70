//===- files.cpp - Files train writes and reads, safely -------------------===//
#include "files.h"

#include "error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace dtc::rt {
namespace {

// Creates PATH.tmp.XXXXXX exclusively; returns its descriptor (errno set
// and -1 on failure) and its name in *temp.
int createTemp(const std::string &target, std::string *temp) {
  std::vector<char> name(target.begin(), target.end());
  const char suffix[] = ".tmp.XXXXXX";
  name.insert(name.end(), suffix, suffix + sizeof suffix); // with the NUL
  int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) {
    *temp = name.data();
    ::fchmod(fd, 0644); // mkostemp makes 0600; a trained model is not a secret
  }
  return fd;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

std::string directoryOf(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string target, std::string what, Sync sync)
    : target_(std::move(target)), what_(std::move(what)), sync_(sync == Sync::Durable) {
  if (target_.empty() || target_.back() == '/' || isDirectory(target_))
    fail(EISDIR);
  fd_ = createTemp(target_, &temp_);
  if (fd_ < 0)
    fail(errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_ && !temp_.empty())
    ::unlink(temp_.c_str());
}

void AtomicFile::write(const void *data, size_t n) {
  const char *p = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      fail(errno);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit(const std::string &alsoLinkAs) {
  if (sync_ && ::fsync(fd_) != 0)
    fail(errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    fail(errno);
  if (!alsoLinkAs.empty()) {
    // link() refuses an existing name: link to a fresh temporary name, then
    // rename that over alsoLinkAs.
    std::string linkTemp;
    int lfd = createTemp(alsoLinkAs, &linkTemp);
    if (lfd < 0)
      fail(errno);
    ::close(lfd);
    ::unlink(linkTemp.c_str());
    if (::link(temp_.c_str(), linkTemp.c_str()) != 0)
      fail(errno);
    if (::rename(linkTemp.c_str(), alsoLinkAs.c_str()) != 0) {
      int err = errno;
      ::unlink(linkTemp.c_str());
      fail(err);
    }
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    fail(errno);
  committed_ = true;
  if (!sync_)
    return;
  int dfd = ::open(directoryOf(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd); // best effort: the data itself is already durable
    ::close(dfd);
  }
}

void AtomicFile::fail(int err) const {
  throw Error(fmt::format("cannot write {} '{}': {}", what_, target_, std::strerror(err)));
}

int openForReading(const std::string &path, const std::string &what) {
  // O_NONBLOCK: opening a FIFO without a writer would block.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw Error(fmt::format("cannot open {} '{}': {}", what, path, std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{} '{}' is not a regular file (a FIFO, device or directory "
                            "cannot be read as one)",
                            what, path));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string readWholeFile(const std::string &path, const std::string &what) {
  const int fd = openForReading(path, what);
  std::string data;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0)
    data.reserve(size_t(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(err)));
    }
    if (n == 0)
      break;
    data.append(buf, size_t(n));
  }
  ::close(fd);
  return data;
}

void checkWritable(const std::string &path, const std::string &what) {
  AtomicFile probe(path, what); // throws as a real write would; removed unused
}

} // namespace dtc::rt
