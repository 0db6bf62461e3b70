//===- files.cpp - Files train writes and reads, safely -------------------===//
#include "support/files.h"

#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
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

struct RunInput {
  std::string option, path, replaceableBy;
  dev_t dev;
  ino_t ino;
};

std::vector<RunInput> &runInputs() {
  static std::vector<RunInput> inputs;
  return inputs;
}

bool sameFile(const struct stat &a, const struct stat &b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// How AtomicFile writes a target.
struct Plan {
  enum Kind { Replace, InPlace, Stream } kind = Replace;
  std::string file; // Replace: the file renamed over; InPlace: the path to open
  int streamFd = -1; // Stream: STDOUT_FILENO or STDERR_FILENO
};

// What is at target decides how it is written (files.h); throws
// Error("cannot write <what> 'target': ...") for a target that must not be
// written. option: see checkWritable.
Plan planWrite(const std::string &target, const std::string &what, const std::string &option) {
  auto refuse = [&](const std::string &why) -> Error {
    return Error(fmt::format("cannot write {} '{}': {}", what, target, why));
  };
  if (target.empty() || target.back() == '/')
    throw refuse(std::strerror(EISDIR));
  Plan plan;
  plan.file = target;
  struct stat link;
  if (::lstat(target.c_str(), &link) != 0)
    return plan; // nothing there (or an error the temporary file will name)
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) {
    char to[4096];
    const ssize_t n = ::readlink(target.c_str(), to, sizeof to - 1);
    throw refuse(fmt::format("it is a symbolic link to '{}', which {}",
                             n > 0 ? std::string(to, size_t(n)) : std::string("?"),
                             errno == ENOENT ? std::string("does not exist")
                                             : fmt::format("cannot be reached ({})",
                                                           std::strerror(errno))));
  }
  for (const RunInput &in : runInputs()) {
    if (in.dev != st.st_dev || in.ino != st.st_ino ||
        (!option.empty() && in.replaceableBy == option))
      continue;
    if (!option.empty())
      throw Error(fmt::format("{} '{}' is the same file as {} '{}': an output must not "
                              "replace one of this run's inputs; give {} another path",
                              option, target, in.option, in.path, option));
    throw refuse(fmt::format("it is the same file as {} '{}', one of this run's inputs",
                             in.option, in.path));
  }
  // This process's standard output or error, however it is named.
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat out;
    if (::fstat(fd, &out) == 0 && sameFile(out, st)) {
      plan.kind = Plan::Stream;
      plan.streamFd = fd;
      return plan;
    }
  }
  if (S_ISREG(st.st_mode)) {
    if (S_ISLNK(link.st_mode)) { // replace the file the link names, not the link
      // Not a link another user made: it could have been planted to have
      // this run replace one of this user's files.
      if (link.st_uid != ::geteuid() && link.st_uid != 0)
        throw refuse(fmt::format("it is a symbolic link owned by another user (uid {}); "
                                 "give the path of the file itself",
                                 static_cast<unsigned long>(link.st_uid)));
      char real[PATH_MAX];
      if (!::realpath(target.c_str(), real))
        throw refuse(std::strerror(errno));
      plan.file = real;
    }
    return plan;
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    plan.kind = Plan::InPlace;
    return plan;
  }
  if (S_ISDIR(st.st_mode))
    throw refuse(std::strerror(EISDIR));
  throw refuse(fmt::format("it is a {}; train writes regular files, or in place to a "
                           "character device (/dev/null, a terminal) or a FIFO",
                           S_ISBLK(st.st_mode) ? "block device" : "socket"));
}

} // namespace

void addRunInput(const std::string &option, const std::string &path,
                 const std::string &replaceableBy) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return;
  runInputs().push_back({option, path, replaceableBy, st.st_dev, st.st_ino});
}

void forgetRunInputs(const std::string &option) {
  std::vector<RunInput> &inputs = runInputs();
  inputs.erase(std::remove_if(inputs.begin(), inputs.end(),
                              [&](const RunInput &in) {
                                return option.empty() || in.option == option;
                              }),
               inputs.end());
}

std::string directoryOf(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string target, std::string what, Sync sync)
    : target_(std::move(target)), what_(std::move(what)), sync_(sync == Sync::Durable) {
  const Plan plan = planWrite(target_, what_, std::string());
  file_ = plan.file;
  switch (plan.kind) {
  case Plan::Replace:
    fd_ = createTemp(file_, &temp_);
    break;
  case Plan::InPlace:
    fd_ = ::open(file_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    break;
  case Plan::Stream:
    // After what was printed before it.
    std::fflush(plan.streamFd == STDOUT_FILENO ? stdout : stderr);
    fd_ = ::fcntl(plan.streamFd, F_DUPFD_CLOEXEC, 0);
    break;
  }
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
  if (inPlace()) {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      fail(errno);
    committed_ = true;
    return;
  }
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
  if (::rename(temp_.c_str(), file_.c_str()) != 0)
    fail(errno);
  committed_ = true;
  if (!sync_)
    return;
  int dfd = ::open(directoryOf(file_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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

void checkWritable(const std::string &path, const std::string &what,
                   const std::string &option) {
  const Plan plan = planWrite(path, what, option);
  auto fail = [&](int err) {
    throw Error(fmt::format("cannot write {} '{}': {}", what, path, std::strerror(err)));
  };
  switch (plan.kind) {
  case Plan::Replace: {
    // Create and remove a temporary file, as the write will.
    std::string temp;
    const int fd = createTemp(plan.file, &temp);
    if (fd < 0)
      fail(errno);
    ::close(fd);
    ::unlink(temp.c_str());
    break;
  }
  case Plan::InPlace: // not opened: a FIFO's reader would see its end
    if (::access(plan.file.c_str(), W_OK) != 0)
      fail(errno);
    break;
  case Plan::Stream:
    break;
  }
}

} // namespace dtc::rt
