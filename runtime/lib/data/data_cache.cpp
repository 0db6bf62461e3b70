//===- data_cache.cpp - Decoded data sets cached next to their sources ----===//
#include "data/data_cache.h"

#include "support/error.h"
#include "support/files.h"

#include <fmt/format.h>
#include <libdeflate.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <new>
#include <optional>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dtc::rt {
namespace {

constexpr size_t kPage = 4096;
constexpr const char *kMagic = "dtc decoded data cache ";

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

uint32_t crc32(uint32_t crc, const void *data, size_t n) {
  return n ? libdeflate_crc32(crc, data, n) : crc;
}

// One source file as the header records it; nullopt when it cannot be
// resolved (readIdx then reports the problem).
std::optional<std::string> describeSource(const char *role, const std::string &path,
                                          std::string *real) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf))
    return std::nullopt;
  struct stat st;
  if (::stat(buf, &st) != 0 || !S_ISREG(st.st_mode))
    return std::nullopt;
  *real = buf;
  return fmt::format("{0} {1}\n{0}-stat size={2} mtime={3}.{4:09} inode={5}\n", role, buf,
                     static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                     static_cast<long>(st.st_mtim.tv_nsec),
                     static_cast<unsigned long long>(st.st_ino));
}

const char *byteOrder() {
  const uint32_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first ? "little-endian" : "big-endian";
}

// Memory for the cached floats and labels when no mapping can be watched
// (every slot below taken): 64-byte aligned, huge pages for a large set
// (allocateLarge), never zeroed (readAll() fills it).
std::shared_ptr<char> allocatePayload(size_t bytes) {
  constexpr size_t kLarge = size_t(4) << 20;
  void *p = bytes >= kLarge ? allocateLarge(bytes) : std::aligned_alloc(64, roundUp(bytes + 1, 64));
  if (!p)
    throw std::bad_alloc();
  return std::shared_ptr<char>(static_cast<char *>(p), [](char *q) { freeLarge(q); });
}

// The cache files this process has mapped, for the SIGBUS handler: a file
// truncated while mapped makes the next access to a page past its new end
// fault with SIGBUS, at any step, in any thread. The handler then names the
// file and ends the run as any error does (exit status 1), instead of the
// bare "Bus error" of the default action. A slot is written whole before it
// is published (state kLive, release) and read by the handler with atomics
// and plain loads only: no lock, no allocation (async-signal-safe).
constexpr int kBusExitStatus = 1; // the driver's status for an error
constexpr int kSlots = 16;        // a process maps two (train, test) at a time
constexpr size_t kMessageMax = PATH_MAX + 256;
enum SlotState : int { kFree, kClaimed, kLive };

struct WatchedMapping {
  std::atomic<int> state{kFree};
  uintptr_t begin = 0, end = 0;
  size_t messageBytes = 0;
  char message[kMessageMax] = {};
};
static_assert(std::atomic<int>::is_always_lock_free, "the SIGBUS handler reads the slots' state");

WatchedMapping gWatched[kSlots];
struct sigaction gPreviousBus; // the handler before ours, called for other faults
std::atomic<bool> gBusReported{false};

void writeAll(int fd, const char *p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return;
    p += w;
    n -= size_t(w);
  }
}

void onBus(int sig, siginfo_t *info, void *context) {
  // Only a fault the kernel raised has an address (si_code > 0); a SIGBUS
  // sent by kill() or raise() is never the cache's.
  if (info && info->si_code > 0) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(info->si_addr);
    for (WatchedMapping &w : gWatched) {
      if (w.state.load(std::memory_order_acquire) != kLive || at < w.begin || at >= w.end)
        continue;
      // One message, from the first thread that faults; the others wait
      // for its _exit.
      if (!gBusReported.exchange(true))
        writeAll(STDERR_FILENO, w.message, w.messageBytes);
      else
        for (;;)
          ::pause();
      ::_exit(kBusExitStatus);
    }
  }
  // Not a cache file's: the handler that was there before, or the default
  // action (the process ends with SIGBUS, as it would have without us).
  // (sa_handler and sa_sigaction share their storage; an ignored fault
  // would only fault again.)
  if (gPreviousBus.sa_handler != SIG_DFL && gPreviousBus.sa_handler != SIG_IGN) {
    if (gPreviousBus.sa_flags & SA_SIGINFO)
      gPreviousBus.sa_sigaction(sig, info, context);
    else
      gPreviousBus.sa_handler(sig);
    return;
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
  ::raise(SIGBUS); // delivered when the handler returns (a fault also repeats)
}

void installBusHandler() {
  static const bool installed = [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = onBus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    return ::sigaction(SIGBUS, &sa, &gPreviousBus) == 0;
  }();
  (void)installed;
}

// A read-only shared mapping of a whole cache file, watched by the SIGBUS
// handler while it lives.
class CacheMapping {
public:
  CacheMapping(void *addr, size_t bytes, int slot) : addr_(addr), bytes_(bytes), slot_(slot) {}
  ~CacheMapping() {
    gWatched[slot_].state.store(kFree, std::memory_order_release);
    ::munmap(addr_, bytes_);
  }
  CacheMapping(const CacheMapping &) = delete;
  CacheMapping &operator=(const CacheMapping &) = delete;
  const char *data() const { return static_cast<const char *>(addr_); }

private:
  void *addr_;
  size_t bytes_;
  int slot_;
};

// Maps the cache file fd (bytes long, at path) and registers the mapping
// with the SIGBUS handler; nullptr when every slot is taken (the caller
// reads the file instead) or the mapping fails (errno set).
std::shared_ptr<CacheMapping> mapWatched(int fd, size_t bytes, const std::string &path) {
  int slot = -1;
  for (int i = 0; i < kSlots && slot < 0; ++i) {
    int free = kFree;
    if (gWatched[i].state.compare_exchange_strong(free, kClaimed, std::memory_order_acquire))
      slot = i;
  }
  if (slot < 0) {
    errno = 0;
    return nullptr;
  }
  WatchedMapping &w = gWatched[slot];
  void *addr = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (addr == MAP_FAILED) {
    const int err = errno;
    w.state.store(kFree, std::memory_order_release);
    errno = err;
    return nullptr;
  }
  const std::string message =
      fmt::format("train: error: the decoded-data cache file '{}' was truncated while this run "
                  "had it mapped; run again (the data set is then decoded afresh) or use "
                  "--data-cache off\n",
                  path);
  w.messageBytes = std::min(message.size(), kMessageMax);
  std::memcpy(w.message, message.data(), w.messageBytes);
  if (w.messageBytes == kMessageMax)
    w.message[kMessageMax - 1] = '\n';
  w.begin = reinterpret_cast<uintptr_t>(addr);
  w.end = w.begin + roundUp(bytes, kPage);
  installBusHandler();
  w.state.store(kLive, std::memory_order_release);
  return std::make_shared<CacheMapping>(addr, bytes, slot);
}

// Why a cache file or directory (st) is not trusted: owned by another user,
// or writable by others, who could then have written what it holds (a
// header and CRC-32 anyone can compute); "" when only this user can have.
std::string distrust(const struct stat &st) {
  if (st.st_uid != ::geteuid())
    return fmt::format("owned by another user (uid {}; this process runs as uid {})",
                       static_cast<unsigned long>(st.st_uid),
                       static_cast<unsigned long>(::geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fmt::format("writable by other users (mode {:04o})",
                       static_cast<unsigned>(st.st_mode & 07777));
  return "";
}

// Why the cache directory is not trusted ("" when it is, or is not there).
std::string distrustDirectory(const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "";
  return distrust(st);
}

// Reads n bytes at offset into p, computing their CRC-32; false (errno set,
// 0 for a file that ends early) when they cannot all be read.
bool readAll(int fd, char *p, size_t n, off_t offset, uint32_t *crc) {
  constexpr size_t kChunk = size_t(2) << 20;
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min(n, kChunk), offset);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0)
        errno = 0;
      return false;
    }
    *crc = crc32(*crc, p, size_t(r));
    p += r;
    n -= size_t(r);
    offset += r;
  }
  return true;
}

// The data set in the cache file at path if it matches `expected` (the
// header up to its last line) and its checks hold; nullopt otherwise, with
// *why set when a file was there but was not usable. The header is read;
// the floats and labels are mapped (mapWatched: no copy, no zeroed pages,
// one copy in the page cache for all the ranks of a node), checked through
// the mapping.
std::optional<Dataset> load(const std::string &path, const std::string &expected,
                            const std::string &source, std::string *why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT)
      *why = fmt::format("it cannot be opened ({})", std::strerror(errno));
    return std::nullopt; // not there yet
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || size_t(st.st_size) < kPage) {
    *why = "it is not a cache file";
    return std::nullopt;
  }
  if (std::string distrusted = distrust(st); !distrusted.empty()) {
    *why = "it is not trusted: it is " + distrusted;
    return std::nullopt;
  }
  const size_t fileBytes = size_t(st.st_size);
  // The header: what the sources say, then samples N features F crc32 X.
  std::string head(std::min(fileBytes, expected.size() + 128), '\0');
  uint32_t ignored = 0;
  if (!readAll(fd, head.data(), head.size(), 0, &ignored)) {
    *why = errno ? fmt::format("it cannot be read ({})", std::strerror(errno))
                 : std::string("it was truncated while being read");
    return std::nullopt;
  }
  // Any version of the format begins so (the file is at least a page).
  if (head.compare(0, std::strlen(kMagic), kMagic) != 0) {
    *why = "it is not a cache file";
    return std::nullopt;
  }
  if (head.size() < expected.size() + 1 || head.compare(0, expected.size(), expected) != 0)
    return std::nullopt; // another version of the sources (or of dtc): stale
  const char *line = head.data() + expected.size();
  const size_t room = head.size() - expected.size();
  const void *nl = std::memchr(line, '\n', room);
  long long n = -1, f = -1;
  unsigned crc = 0;
  int used = 0;
  const std::string last(line, nl ? static_cast<const char *>(nl) - line : 0);
  if (!nl ||
      std::sscanf(last.c_str(), "samples %lld features %lld crc32 %8x%n", &n, &f, &crc, &used) !=
          3 ||
      size_t(used) != last.size() || n < 0 || f < 1) {
    *why = "its header is damaged";
    return std::nullopt;
  }
  const size_t header = roundUp(expected.size() + last.size() + 1, kPage);
  unsigned long long values = 0, bytes = 0;
  if (__builtin_mul_overflow(static_cast<unsigned long long>(n),
                             static_cast<unsigned long long>(f), &values) ||
      __builtin_mul_overflow(values + static_cast<unsigned long long>(n), 4ULL, &bytes) ||
      header + bytes != fileBytes) {
    *why = "it has the wrong size (truncated?)";
    return std::nullopt;
  }
  std::shared_ptr<const void> keep;
  const char *payload = nullptr;
  if (std::shared_ptr<CacheMapping> map = mapWatched(fd, fileBytes, path)) {
    // Truncated between the fstat and the mapping: not mapped whole.
    struct stat now;
    if (::fstat(fd, &now) != 0 || now.st_size != st.st_size) {
      *why = "it was truncated while being read";
      return std::nullopt;
    }
    payload = map->data() + header;
    keep = std::shared_ptr<const void>(map, payload);
    if (crc32(0, payload, size_t(bytes)) != crc) {
      *why = "its contents fail their CRC-32";
      return std::nullopt;
    }
  } else if (errno != 0) {
    *why = fmt::format("it cannot be mapped ({})", std::strerror(errno));
    return std::nullopt;
  } else {
    std::shared_ptr<char> copy = allocatePayload(size_t(bytes));
    uint32_t got = 0;
    if (!readAll(fd, copy.get(), size_t(bytes), off_t(header), &got)) {
      *why = errno ? fmt::format("it cannot be read ({})", std::strerror(errno))
                   : std::string("it was truncated while being read");
      return std::nullopt;
    }
    if (got != crc) {
      *why = "its contents fail their CRC-32";
      return std::nullopt;
    }
    payload = copy.get();
    keep = std::shared_ptr<const void>(copy, payload);
  }
  Dataset ds;
  ds.source = source;
  ds.labelKind = LabelKind::Class;
  ds.labelWidth = 1;
  ds.size = n;
  ds.features = f;
  const float *x = reinterpret_cast<const float *>(payload);
  const int32_t *y = reinterpret_cast<const int32_t *>(payload + values * 4);
  ds.yClass.assign(y, y + n);
  ds.x.mapView(std::move(keep), x, size_t(values));
  return ds;
}

void store(const std::string &path, const std::string &expected, const Dataset &ds) {
  const std::string last =
      fmt::format("samples {} features {} crc32 {:08x}\n", ds.size, ds.features,
                  crc32(crc32(0, ds.x.data(), ds.x.size() * sizeof(float)), ds.yClass.data(),
                        ds.yClass.size() * sizeof(int32_t)));
  std::string header = expected + last;
  header.resize(roundUp(header.size(), kPage), '\0');
  // Not a file (a symlink, a FIFO) where the cache file goes in this user's
  // own directory: removed, never written through.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    ::unlink(path.c_str());
  AtomicFile out(path, "the data cache", AtomicFile::Sync::Unsynced);
  out.write(header);
  out.write(ds.x.data(), ds.x.size() * sizeof(float));
  out.write(ds.yClass.data(), ds.yClass.size() * sizeof(int32_t));
  out.commit();
}

// mkdir -p, new directories private (the cache holds the user's data).
bool makeDirectories(const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0)
    return S_ISDIR(st.st_mode);
  const std::string parent = directoryOf(dir);
  if (parent != dir && !makeDirectories(parent))
    return false;
  return ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST;
}

// An exclusive flock held for its lifetime; none (and no error) where the
// file system cannot lock: the writes are atomic either way.
class CacheLock {
public:
  explicit CacheLock(const std::string &path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~CacheLock() {
    if (fd_ >= 0)
      ::close(fd_); // releases the lock
  }
  CacheLock(const CacheLock &) = delete;
  CacheLock &operator=(const CacheLock &) = delete;

private:
  int fd_ = -1;
};

} // namespace

std::string defaultDataCacheDir() {
  if (const char *d = std::getenv("DTC_CACHE_DIR"); d && *d)
    return std::strcmp(d, "off") == 0 ? "" : d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x == '/')
    return std::string(x) + "/dtc";
  if (const char *h = std::getenv("HOME"); h && *h == '/')
    return std::string(h) + "/.cache/dtc";
  return "";
}

Dataset readIdxCached(const std::string &imagesPath, const std::string &labelsPath,
                      const std::string &cacheDir, CacheOutcome *outcome, std::string *note) {
  CacheOutcome ignored;
  std::string ignoredNote;
  CacheOutcome &result = outcome ? *outcome : ignored;
  std::string &message = note ? *note : ignoredNote;
  result = CacheOutcome::Off;
  message.clear();
  std::string realImages, realLabels;
  std::optional<std::string> images, labels;
  if (!cacheDir.empty() && cacheDir != "off") {
    images = describeSource("images", imagesPath, &realImages);
    labels = describeSource("labels", labelsPath, &realLabels);
  }
  if (!images || !labels)
    return readIdx(imagesPath, labelsPath);

  const std::string expected = fmt::format("{}1\nreader idx u8/255 f32 i32 {}\n{}{}", kMagic,
                                           byteOrder(), *images, *labels);
  const std::string path =
      fmt::format("{}/idx-{:016x}.dtcdata", cacheDir, [&] {
        const std::string key = realImages + '\0' + realLabels;
        return fnv1a(key.data(), key.size());
      }());
  // A directory others may write is not used at all: what is in it could be
  // anyone's (the header and CRC-32 are public), and what is written there
  // could be replaced.
  auto untrusted = [&](const std::string &distrusted) {
    result = CacheOutcome::NotStored;
    message = fmt::format("the data cache '{}' is not used: its directory '{}' is {}; the "
                          "data are decoded from the sources (--data-cache DIR chooses a "
                          "directory only you can write)",
                          path, cacheDir, distrusted);
    return readIdx(imagesPath, labelsPath);
  };
  if (std::string distrusted = distrustDirectory(cacheDir); !distrusted.empty())
    return untrusted(distrusted);
  std::string why;
  if (std::optional<Dataset> hit = load(path, expected, imagesPath, &why)) {
    result = CacheOutcome::Hit;
    return std::move(*hit);
  }
  if (!makeDirectories(cacheDir)) {
    const int err = errno;
    result = CacheOutcome::NotStored;
    message = fmt::format("cannot create the data cache directory '{}': {}; the data are "
                          "decoded on every run (--data-cache DIR or off chooses otherwise)",
                          cacheDir, std::strerror(err));
    return readIdx(imagesPath, labelsPath);
  }
  if (std::string distrusted = distrustDirectory(cacheDir); !distrusted.empty())
    return untrusted(distrusted); // made by another user meanwhile
  CacheLock lock(path + ".lock");
  // Another process may have written it while this one waited.
  std::string whyNow;
  if (std::optional<Dataset> hit = load(path, expected, imagesPath, &whyNow)) {
    result = CacheOutcome::Hit;
    return std::move(*hit);
  }
  Dataset ds = readIdx(imagesPath, labelsPath);
  try {
    store(path, expected, ds);
    result = CacheOutcome::Stored;
    if (!why.empty())
      message = fmt::format("the data cache '{}' was decoded afresh: {}", path, why);
  } catch (const Error &e) {
    result = CacheOutcome::NotStored;
    message = fmt::format("{}; the data are decoded on every run (--data-cache DIR or off "
                          "chooses otherwise)",
                          e.what());
  }
  return ds;
}

} // namespace dtc::rt
