//===- data_cache.cpp - Decoded data sets cached next to their sources ----===//
#include "data_cache.h"

#include "error.h"
#include "files.h"

#include <fmt/format.h>
#include <libdeflate.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
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

struct Mapping {
  void *addr = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (addr != MAP_FAILED)
      ::munmap(addr, bytes);
  }
};

// The data set in the cache file at path if it matches `expected` (the
// header up to its last line) and its checks hold; nullopt otherwise, with
// *why set when a file was there but was not usable.
std::optional<Dataset> load(const std::string &path, const std::string &expected,
                            const std::string &source, std::string *why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return std::nullopt; // not there yet
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || size_t(st.st_size) < kPage) {
    ::close(fd);
    *why = "it is not a cache file";
    return std::nullopt;
  }
  auto map = std::make_shared<Mapping>();
  map->bytes = size_t(st.st_size);
  map->addr = ::mmap(nullptr, map->bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (map->addr == MAP_FAILED) {
    *why = fmt::format("it cannot be mapped ({})", std::strerror(errno));
    return std::nullopt;
  }
  const char *p = static_cast<const char *>(map->addr);
  // Any version of the format begins so (the file is at least a page).
  if (std::memcmp(p, kMagic, std::strlen(kMagic)) != 0) {
    *why = "it is not a cache file";
    return std::nullopt;
  }
  if (map->bytes < expected.size() + 1 || std::memcmp(p, expected.data(), expected.size()) != 0)
    return std::nullopt; // another version of the sources (or of dtc): stale
  // The last line: samples N features F crc32 X.
  const char *line = p + expected.size();
  const size_t room = std::min<size_t>(map->bytes - expected.size(), 128);
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
      header + bytes != map->bytes) {
    *why = "it has the wrong size (truncated?)";
    return std::nullopt;
  }
  const char *payload = p + header;
  if (crc32(0, payload, size_t(bytes)) != crc) {
    *why = "its contents fail their CRC-32";
    return std::nullopt;
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
  ds.x.mapView(std::shared_ptr<const void>(map, map->addr), x, size_t(values));
  return ds;
}

void store(const std::string &path, const std::string &expected, const Dataset &ds) {
  const std::string last =
      fmt::format("samples {} features {} crc32 {:08x}\n", ds.size, ds.features,
                  crc32(crc32(0, ds.x.data(), ds.x.size() * sizeof(float)), ds.yClass.data(),
                        ds.yClass.size() * sizeof(int32_t)));
  std::string header = expected + last;
  header.resize(roundUp(header.size(), kPage), '\0');
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
