//===- data_cache_test.cpp - The decoded-data cache -----------------------===//
#include "data/data.h"
#include "data/data_cache.h"
#include "support/error.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <thread>

using namespace dtc::rt;
using dtc::test::TempDir;

namespace {

// 4 images of 3x2 and their labels, gzipped as the IDX files are.
std::vector<uint8_t> pixels(uint8_t salt) {
  std::vector<uint8_t> p(24);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = uint8_t(i * 11 + salt);
  return p;
}
const std::vector<uint8_t> kLabels = {7, 0, 3, 9};

struct Source {
  TempDir dir;
  std::string images = dir.file("train-images-idx3-ubyte.gz");
  std::string labels = dir.file("train-labels-idx1-ubyte.gz");
  std::string cache = dir.file("cache");
  explicit Source(uint8_t salt = 0) { write(salt); }
  void write(uint8_t salt) {
    dtc::test::writeGz(images, dtc::test::idxBytes({4, 3, 2}, pixels(salt)));
    dtc::test::writeGz(labels, dtc::test::idxBytes({4}, kLabels));
  }
  Dataset read(CacheOutcome *outcome, std::string *note = nullptr) const {
    return readIdxCached(images, labels, cache, outcome, note);
  }
  // The one cache file (the test fails when there is not exactly one).
  std::string cacheFile() const {
    std::string found;
    for (const std::string &name : dtc::test::listDir(cache))
      if (name.size() > 8 && name.compare(name.size() - 8, 8, ".dtcdata") == 0) {
        EXPECT_TRUE(found.empty()) << "two cache files";
        found = cache + "/" + name;
      }
    EXPECT_FALSE(found.empty()) << "no cache file";
    return found;
  }
};

void expectSameData(const Dataset &a, const Dataset &b) {
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labelKind, b.labelKind);
  EXPECT_EQ(a.labelWidth, b.labelWidth);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.yClass, b.yClass);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(datasetDigest(a), datasetDigest(b));
}

// Overwrites n bytes of path at offset.
void patch(const std::string &path, off_t offset, const std::string &bytes) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), offset), ssize_t(bytes.size()));
  ::close(fd);
}

TEST(DataCache, AMissStoresAndAHitMapsTheSameData) {
  Source src;
  const Dataset decoded = readIdx(src.images, src.labels);
  CacheOutcome outcome;
  std::string note = "stale";
  Dataset first = src.read(&outcome, &note);
  EXPECT_EQ(outcome, CacheOutcome::Stored);
  EXPECT_EQ(note, "");
  EXPECT_FALSE(first.x.isView());
  expectSameData(first, decoded);

  Dataset second = src.read(&outcome, &note);
  EXPECT_EQ(outcome, CacheOutcome::Hit);
  EXPECT_EQ(note, "");
  EXPECT_TRUE(second.x.isView());
  expectSameData(second, decoded);
  // Features of 64-byte alignment at least (the header is whole pages).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second.x.data()) % 64, 0u);
  // Header, features and labels, nothing else.
  struct stat st;
  ASSERT_EQ(::stat(src.cacheFile().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4096 + 4 * 6 * 4 + 4 * 4);
  // A copy of the data set keeps the mapping alive.
  Dataset copy = second;
  second = Dataset();
  expectSameData(copy, decoded);
}

TEST(DataCache, AChangedSourceIsDecodedAfresh) {
  Source src;
  CacheOutcome outcome;
  src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Stored);
  src.write(/*salt=*/5);
  // Same size; a different modification time (set explicitly: the test may
  // run within the file system's timestamp granularity).
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 678}};
  ASSERT_EQ(::utimensat(AT_FDCWD, src.images.c_str(), times, 0), 0);
  Dataset ds = src.read(&outcome);
  EXPECT_EQ(outcome, CacheOutcome::Stored);
  expectSameData(ds, readIdx(src.images, src.labels));
  EXPECT_FLOAT_EQ(ds.x[0], 5 / 255.0f);
  src.read(&outcome);
  EXPECT_EQ(outcome, CacheOutcome::Hit);
  src.cacheFile(); // replaced, not added to
}

TEST(DataCache, ADamagedFileIsDetectedAndReplaced) {
  struct Damage {
    const char *what, *needle;
    void (*apply)(const std::string &path);
  };
  const Damage damages[] = {
      {"a flipped feature byte", "CRC-32",
       [](const std::string &p) { patch(p, 4096 + 5, "\x7f"); }},
      {"a flipped label byte", "CRC-32",
       [](const std::string &p) { patch(p, 4096 + 96 + 2, "\x01"); }},
      {"a truncated file", "wrong size",
       [](const std::string &p) { ASSERT_EQ(::truncate(p.c_str(), 4096 + 50), 0); }},
      {"a damaged last header line", "header is damaged",
       [](const std::string &p) {
         const std::string text = dtc::test::readFile(p);
         patch(p, off_t(text.find("samples")), "sampl3s");
       }},
      {"a sample count that does not fit the file", "wrong size",
       [](const std::string &p) {
         const std::string text = dtc::test::readFile(p);
         patch(p, off_t(text.find("samples 4")), "samples 5");
       }},
      // Garbage of a cache file's size was rewritten without a note.
      {"garbage in its place", "it is not a cache file",
       [](const std::string &p) {
         const std::string text = dtc::test::readFile(p);
         dtc::test::writeFile(p, std::string(text.size(), '\x5a'));
       }},
      {"a short file in its place", "it is not a cache file",
       [](const std::string &p) { dtc::test::writeFile(p, "garbage"); }},
  };
  for (const Damage &d : damages) {
    SCOPED_TRACE(d.what);
    Source src;
    CacheOutcome outcome;
    src.read(&outcome);
    ASSERT_EQ(outcome, CacheOutcome::Stored);
    d.apply(src.cacheFile());
    std::string note;
    Dataset ds = src.read(&outcome, &note);
    EXPECT_EQ(outcome, CacheOutcome::Stored);
    EXPECT_NE(note.find(d.needle), std::string::npos) << note;
    EXPECT_NE(note.find(src.cacheFile()), std::string::npos) << note;
    expectSameData(ds, readIdx(src.images, src.labels));
    src.read(&outcome, &note);
    EXPECT_EQ(outcome, CacheOutcome::Hit);
    EXPECT_EQ(note, "");
  }
}

// Rewrites the cache file's labels as f(label) with a CRC-32 that holds: what
// anyone who can compute the (public) header and the CRC can make.
void forgeLabels(const std::string &path, int32_t (*f)(int32_t)) {
  std::string text = dtc::test::readFile(path);
  const size_t header = 4096, labels = text.size() - 4 * 4;
  for (size_t i = labels; i < text.size(); i += 4) {
    int32_t y;
    std::memcpy(&y, &text[i], 4);
    y = f(y);
    std::memcpy(&text[i], &y, 4);
  }
  const uint32_t crc = libdeflate_crc32(0, text.data() + header, text.size() - header);
  const size_t at = text.find("crc32 ") + 6;
  text.replace(at, 8, fmt::format("{:08x}", crc));
  dtc::test::writeFile(path, text);
}

TEST(DataCache, AFileOfAnotherUserIsRefusedAndSaysSo) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "a file of another user needs root (chown)";
  Source src;
  CacheOutcome outcome;
  src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Stored);
  const std::string file = src.cacheFile();
  // Another user's file with shifted labels and a CRC-32 that holds.
  forgeLabels(file, [](int32_t y) { return (y + 1) % 10; });
  ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  std::string note;
  Dataset ds = src.read(&outcome, &note);
  EXPECT_EQ(outcome, CacheOutcome::Stored); // decoded, and replaced by this user's
  EXPECT_NE(note.find("the data cache '" + file + "' was decoded afresh: it is not trusted: it "
                      "is owned by another user (uid 65534"),
            std::string::npos)
      << note;
  expectSameData(ds, readIdx(src.images, src.labels));
  EXPECT_EQ(ds.yClass, std::vector<int32_t>({7, 0, 3, 9}));
  src.read(&outcome, &note);
  EXPECT_EQ(outcome, CacheOutcome::Hit);
  EXPECT_EQ(note, "");
}

TEST(DataCache, AFileOthersMayWriteIsRefused) {
  Source src;
  CacheOutcome outcome;
  src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Stored);
  const std::string file = src.cacheFile();
  forgeLabels(file, [](int32_t y) { return (y + 1) % 10; });
  ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
  std::string note;
  Dataset ds = src.read(&outcome, &note);
  EXPECT_EQ(outcome, CacheOutcome::Stored);
  EXPECT_NE(note.find("the data cache '" + file + "' was decoded afresh: it is not trusted: it "
                      "is writable by other users (mode 0666)"),
            std::string::npos)
      << note;
  expectSameData(ds, readIdx(src.images, src.labels));
}

TEST(DataCache, ADirectoryOthersMayWriteIsNotUsed) {
  Source src;
  CacheOutcome outcome;
  src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Stored);
  const std::string file = src.cacheFile();
  forgeLabels(file, [](int32_t y) { return (y + 1) % 10; });
  struct stat before;
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  ASSERT_EQ(::chmod(src.cache.c_str(), 0777), 0);
  std::string note;
  Dataset ds = src.read(&outcome, &note);
  EXPECT_EQ(outcome, CacheOutcome::NotStored);
  EXPECT_NE(note.find("the data cache '" + file + "' is not used: its directory '" + src.cache +
                      "' is writable by other users (mode 0777)"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("--data-cache"), std::string::npos) << note;
  expectSameData(ds, readIdx(src.images, src.labels));
  // Neither read nor written there.
  struct stat after;
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  // The same directory of another user, however private.
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(src.cache.c_str(), 0700), 0);
    ASSERT_EQ(::chown(src.cache.c_str(), 65534, 65534), 0);
    ds = src.read(&outcome, &note);
    EXPECT_EQ(outcome, CacheOutcome::NotStored);
    EXPECT_NE(note.find("is owned by another user (uid 65534"), std::string::npos) << note;
    expectSameData(ds, readIdx(src.images, src.labels));
  }
}

// text as a regular expression that matches it literally.
std::string literally(const std::string &text) {
  std::string re;
  for (char c : text) {
    if (std::strchr(".[]()*+?{}|^$\\", c))
      re += '\\';
    re += c;
  }
  return re;
}

// Replaces src's files by n pseudo-random 28 x 28 images, each labelled 4.
void writeImages(const Source &src, uint32_t n) {
  std::vector<uint8_t> pixels(size_t(n) * 784);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = uint8_t(i * 2654435761u >> 13);
  dtc::test::writeGz(src.images, dtc::test::idxBytes({n, 28, 28}, pixels));
  dtc::test::writeGz(src.labels, dtc::test::idxBytes({n}, std::vector<uint8_t>(n, 4)));
}

// Sums the features (every page of them).
double sumOf(const Dataset &ds) {
  double sum = 0;
  for (float v : ds.x)
    sum += v;
  return sum;
}

TEST(DataCache, AFileTruncatedWhileMappedEndsTheRunWithAnErrorNamingIt) {
  // A large enough set that the truncated pages are whole pages past the
  // new end (what faults), the features alone 4 MB.
  Source src;
  constexpr uint32_t kImages = 2000;
  writeImages(src, kImages);
  CacheOutcome outcome;
  src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Stored);
  const Dataset hit = src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Hit);
  ASSERT_TRUE(hit.x.isView());
  const std::string file = src.cacheFile();
  const double sum = sumOf(hit);
  EXPECT_GT(sum, 0);
  ASSERT_EQ(::truncate(file.c_str(), 4096), 0);
  // Killed by SIGBUS before; now train's error and exit status. (fork: the
  // child touches the parent's mapping.)
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(std::exit(sumOf(hit) > 0 ? 3 : 4), ::testing::ExitedWithCode(1),
              literally("train: error: the decoded-data cache file '" + file +
                        "' was truncated while this run had it mapped; run again (the data set "
                        "is then decoded afresh) or use --data-cache off\n"));
  EXPECT_EXIT(std::exit(hit.yClass[kImages - 1] == 4 ? 3 : 4), ::testing::ExitedWithCode(3), "")
      << "the labels are a copy";
  // The next run decodes afresh, with a note, and maps the new file.
  std::string note;
  Dataset again = src.read(&outcome, &note);
  EXPECT_EQ(outcome, CacheOutcome::Stored);
  EXPECT_NE(note.find("wrong size"), std::string::npos) << note;
  EXPECT_EQ(sumOf(again), sum);
  Dataset mapped = src.read(&outcome);
  EXPECT_EQ(outcome, CacheOutcome::Hit);
  EXPECT_EQ(sumOf(mapped), sum);
}

// Under AddressSanitizer its own SIGBUS handler, to which dtc's hands the
// faults that are not the cache's, reports the fault and exits 1.
#if defined(__SANITIZE_ADDRESS__)
#define DTC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTC_TEST_ASAN 1
#endif
#endif
#ifdef DTC_TEST_ASAN
#define EXPECT_SIGBUS(statement)                                                                  \
  EXPECT_EXIT(statement, ::testing::ExitedWithCode(1), "AddressSanitizer: BUS")
#else
#define EXPECT_SIGBUS(statement) EXPECT_EXIT(statement, ::testing::KilledBySignal(SIGBUS), "")
#endif

TEST(DataCache, AFaultOutsideTheCacheStillKillsWithSigbus) {
  Source src;
  CacheOutcome outcome;
  src.read(&outcome);
  const Dataset hit = src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Hit); // the handler is installed
  // A file of the test's own, mapped and truncated: not the cache's fault.
  const std::string other = src.dir.file("other");
  dtc::test::writeFile(other, std::string(3 * 4096, 'x'));
  const int fd = ::open(other.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void *p = ::mmap(nullptr, 3 * 4096, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(::truncate(other.c_str(), 0), 0);
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_SIGBUS(std::exit(static_cast<volatile const char *>(p)[8192]));
  // Nor is a SIGBUS sent to the process.
  EXPECT_SIGBUS(::raise(SIGBUS));
  ::munmap(p, 3 * 4096);
  EXPECT_EQ(hit.yClass, std::vector<int32_t>({7, 0, 3, 9}));
}

TEST(DataCache, MoreHitsAtOnceThanWatchedMappingsAreReadInstead) {
  Source src;
  CacheOutcome outcome;
  const Dataset decoded = src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Stored);
  std::vector<Dataset> hits;
  for (int i = 0; i < 40; ++i) {
    hits.push_back(src.read(&outcome));
    EXPECT_EQ(outcome, CacheOutcome::Hit);
    expectSameData(hits.back(), decoded);
  }
  hits.clear(); // the slots free again
  for (int i = 0; i < 40; ++i) {
    Dataset ds = src.read(&outcome);
    EXPECT_EQ(outcome, CacheOutcome::Hit);
    expectSameData(ds, decoded);
  }
}

TEST(DataCache, AnUnwritableCacheDecodesAndSaysSo) {
  Source src;
  dtc::test::writeFile(src.cache, "a file where the directory should be");
  CacheOutcome outcome;
  std::string note;
  Dataset ds = src.read(&outcome, &note);
  EXPECT_EQ(outcome, CacheOutcome::NotStored);
  EXPECT_NE(note.find(src.cache), std::string::npos) << note;
  EXPECT_NE(note.find("--data-cache"), std::string::npos) << note;
  expectSameData(ds, readIdx(src.images, src.labels));
}

TEST(DataCache, OffDecodesAndWritesNothing) {
  Source src;
  for (const char *off : {"", "off"}) {
    CacheOutcome outcome;
    Dataset ds = readIdxCached(src.images, src.labels, off, &outcome);
    EXPECT_EQ(outcome, CacheOutcome::Off);
    expectSameData(ds, readIdx(src.images, src.labels));
  }
  struct stat st;
  EXPECT_NE(::stat(src.cache.c_str(), &st), 0);
}

TEST(DataCache, ErrorsInTheSourcesWinOverTheCache) {
  Source src;
  CacheOutcome outcome;
  src.read(&outcome);
  ASSERT_EQ(outcome, CacheOutcome::Stored);
  // A source gone: its error, not the cached copy.
  ASSERT_EQ(::unlink(src.labels.c_str()), 0);
  EXPECT_THROW(src.read(&outcome), Error);
  // A source replaced by garbage: readIdx's error.
  dtc::test::writeFile(src.labels, "not an IDX file");
  try {
    src.read(&outcome);
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(src.labels), std::string::npos) << e.what();
  }
}

TEST(DataCache, ProcessesStartingTogetherWriteOneFile) {
  Source src;
  // Large enough (8 MB of pixels) that decoding outlasts the threads' start.
  constexpr uint32_t kImages = 10000;
  writeImages(src, kImages);
  const Dataset decoded = readIdx(src.images, src.labels);
  constexpr int kReaders = 4;
  Dataset got[kReaders];
  CacheOutcome outcomes[kReaders];
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i)
    readers.emplace_back([&, i] { got[i] = src.read(&outcomes[i]); });
  for (std::thread &t : readers)
    t.join();
  int stored = 0;
  for (int i = 0; i < kReaders; ++i) {
    expectSameData(got[i], decoded);
    stored += outcomes[i] == CacheOutcome::Stored;
  }
  EXPECT_EQ(stored, 1); // the others waited on the lock and mapped its file
  for (const std::string &name : dtc::test::listDir(src.cache))
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  src.cacheFile();
}

TEST(DataCache, LoadDataGoesThroughTheCache) {
  Source src;
  dtc::test::writeGz(src.dir.file("t10k-images-idx3-ubyte.gz"),
                     dtc::test::idxBytes({4, 3, 2}, pixels(9)));
  dtc::test::writeGz(src.dir.file("t10k-labels-idx1-ubyte.gz"),
                     dtc::test::idxBytes({4}, kLabels));
  ModelSpec spec{};
  spec.name = "m";
  spec.inputNumel = 6;
  spec.labelKind = LabelKind::Class;
  spec.labelNumel = 1;
  spec.numClasses = 10;
  DataSource ds;
  ds.kind = DatasetKind::IDX;
  ds.dir = src.dir.path();
  ds.cacheDir = src.cache;
  DataSplits first = loadData(ds, spec);
  DataSplits second = loadData(ds, spec);
  EXPECT_TRUE(second.train.x.isView());
  EXPECT_TRUE(second.test.x.isView());
  expectSameData(first.train, second.train);
  expectSameData(first.test, second.test);
  EXPECT_NE(second.train.x, second.test.x);
  EXPECT_EQ(dtc::test::listDir(src.cache).size(), 4u); // 2 files, 2 locks
}

TEST(DataCache, DefaultDirectoryFromTheEnvironment) {
  struct Saved {
    const char *name;
    std::string value;
    bool set;
  };
  Saved saved[] = {{"DTC_CACHE_DIR", "", false}, {"XDG_CACHE_HOME", "", false},
                   {"HOME", "", false}};
  for (Saved &s : saved)
    if (const char *v = std::getenv(s.name)) {
      s.value = v;
      s.set = true;
    }
  ::setenv("HOME", "/home/u", 1);
  ::unsetenv("DTC_CACHE_DIR");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(defaultDataCacheDir(), "/home/u/.cache/dtc");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(defaultDataCacheDir(), "/xdg/dtc");
  ::setenv("XDG_CACHE_HOME", "relative", 1); // not absolute: ignored, as XDG says
  EXPECT_EQ(defaultDataCacheDir(), "/home/u/.cache/dtc");
  ::setenv("DTC_CACHE_DIR", "/c", 1);
  EXPECT_EQ(defaultDataCacheDir(), "/c");
  ::setenv("DTC_CACHE_DIR", "off", 1);
  EXPECT_EQ(defaultDataCacheDir(), "");
  ::unsetenv("DTC_CACHE_DIR");
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("HOME");
  EXPECT_EQ(defaultDataCacheDir(), "");
  for (const Saved &s : saved)
    if (s.set)
      ::setenv(s.name, s.value.c_str(), 1);
    else
      ::unsetenv(s.name);
}

} // namespace
