//===- data.h - In-memory data sets and their readers --------------------===//
//
// A Dataset holds every sample of one split in memory: features as float
// [size, features], labels as int32 [size] (class) or float [size, labelWidth]
// (value). Readers throw dtc::rt::Error with a message naming the file.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace dtc::rt {

// Storage for the features of a data set. Blocks of 4 MiB and more are
// 2 MiB aligned and offered to the kernel as transparent huge pages
// (madvise; effective where THP is "madvise" or "always"): a batch gathers
// rows from all over the set, and with 4 KiB pages each row costs a TLB miss
// (measured: gathering a batch of 64 Fashion-MNIST rows 43 -> 32 us).
void *allocateLarge(size_t bytes);
void freeLarge(void *p) noexcept;

template <class T> struct LargeAllocator {
  using value_type = T;
  LargeAllocator() = default;
  template <class U> LargeAllocator(const LargeAllocator<U> &) {}
  T *allocate(size_t n) { return static_cast<T *>(allocateLarge(n * sizeof(T))); }
  void deallocate(T *p, size_t) noexcept { freeLarge(p); }
  template <class U> bool operator==(const LargeAllocator<U> &) const { return true; }
  template <class U> bool operator!=(const LargeAllocator<U> &) const { return false; }
};

// The features of a data set, [size, features] floats: filled in memory by a
// reader (build()), or a read-only view of a file mapping the Features keep
// alive (mapView(): the decoded-data cache, data_cache.h), which the ranks
// on a node share through the page cache. Readers of a Dataset see the same
// const floats either way.
class Features {
public:
  using Vector = std::vector<float, LargeAllocator<float>>;
  Features() = default;
  Features(std::initializer_list<float> v) : owned_(v) {}
  Features &operator=(std::initializer_list<float> v) {
    build().assign(v);
    return *this;
  }

  // Elements [begin, end) as Features of their own, sharing the storage
  // (an owned vector moves to shared ownership first).
  Features slice(size_t begin, size_t end) {
    if (!keep_) {
      auto owned = std::make_shared<Vector>(std::move(owned_));
      owned_ = Vector();
      const float *p = owned->data();
      const size_t n = owned->size();
      mapView(std::shared_ptr<const void>(owned, p), p, n);
    }
    Features f;
    f.keep_ = keep_;
    f.view_ = view_ + begin;
    f.viewSize_ = end - begin;
    return f;
  }
  // The first n elements only (after slice: the rest belongs to the slice).
  void truncate(size_t n) {
    if (keep_)
      viewSize_ = std::min(viewSize_, n);
    else
      owned_.resize(std::min(owned_.size(), n));
  }

  // The storage a reader fills (a view is dropped first).
  Vector &build() {
    view_ = nullptr;
    viewSize_ = 0;
    keep_.reset();
    return owned_;
  }
  void mapView(std::shared_ptr<const void> keep, const float *data, size_t n) {
    owned_ = Vector();
    keep_ = std::move(keep);
    view_ = data;
    viewSize_ = n;
  }
  bool isView() const { return keep_ != nullptr; }

  const float *data() const { return keep_ ? view_ : owned_.data(); }
  size_t size() const { return keep_ ? viewSize_ : owned_.size(); }
  const float *begin() const { return data(); }
  const float *end() const { return data() + size(); }
  const float &operator[](size_t i) const { return data()[i]; }
  friend bool operator==(const Features &a, const Features &b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Features &a, const Features &b) { return !(a == b); }

private:
  Vector owned_;
  std::shared_ptr<const void> keep_;
  const float *view_ = nullptr;
  size_t viewSize_ = 0;
};

// Text data (DatasetKind::Text): bytes as tokens 0..255, the tokens of one
// split (bytes [begin, end) of the whole text), cut into windows of
// `window` tokens: a sample's input is a window and its labels the token
// after each. An epoch has windows() samples. Window i starts at token
// begin + i * window (consecutive windows, --shuffle off, and evaluation);
// in an epoch of training with --shuffle on at a token drawn from the
// epoch's draw (windowDraw) and i, anywhere from begin to end - window - 1
// (nanoGPT's get_batch): reproducible, different for every window of an
// epoch's order, so for every rank.
struct TokenText {
  struct File {
    std::string path;
    int64_t begin; // its first byte in the whole text
  };
  std::shared_ptr<const std::string> bytes; // every file, one after the other
  std::shared_ptr<const std::vector<File>> files; // in that order
  int64_t begin = 0, end = 0, window = 0;

  int64_t windows() const { return window > 0 ? (end - begin - 1) / window : 0; }
  // The first token of window i (draw 0: consecutive windows).
  int64_t windowStart(int64_t i, uint64_t draw) const;
  // "PATH: byte N" of token t of the whole text, for messages.
  std::string where(int64_t t) const;
};

// The draw of an epoch's random windows (never 0).
uint64_t windowDraw(uint64_t seed, int64_t epoch);

struct Dataset {
  std::string source; // file or description, for messages
  int64_t size = 0;
  int64_t features = 0;
  LabelKind labelKind = LabelKind::Class;
  int64_t labelWidth = 1;
  Features x;
  std::vector<int32_t> yClass;
  std::vector<float> yValue;
  std::vector<int64_t> lines; // CSV: the line of each sample (for messages)
  TokenText text;             // Text: the tokens (x and yClass empty)
  bool isText() const { return text.window > 0; }
  // "line 12" (CSV) or "sample 11" (0-based), for messages.
  std::string where(int64_t i) const;
};

// Where the data comes from, after options have overridden the recipe.
struct DataSource {
  DatasetKind kind = DatasetKind::None;
  std::string dir;                 // IDX
  std::string trainPath, testPath; // CSV (testPath may be empty)
  int64_t trainSize = 0, testSize = 0; // Synthetic
  uint64_t seed = 0;                   // Synthetic: seeds the teacher and samples
  std::string cacheDir;                // IDX: the decoded-data cache ("": off; data_cache.h)
  // Text: trainPath, a file or a directory (its files in name order,
  // recursively; symbolic links and binary files, with a NUL byte, skipped).
  double validation = 0;               // the fraction of the training set held out (its end)
  std::string describe() const;        // for the header line
};

struct DataSplits {
  Dataset train, test; // test.size == 0 when there is no test split
  Dataset validation;  // the training set's last samples (DataSource::validation); size 0: none
  std::vector<std::string> notes; // for the user: what the data cache could not do
};

// IDX (MNIST family): an images file [n, d1, ...] of ubyte scaled by 1/255 and
// a labels file [n] of ubyte class labels (labelsPath "": none, yClass
// empty). gzip or raw.
Dataset readIdx(const std::string &imagesPath, const std::string &labelsPath);
// Picks dir/<name>.gz, else dir/<name>; returns the .gz name if neither exists.
std::string idxFile(const std::string &dir, const std::string &name);

// CSV: labelColumns label columns, then `features` feature columns per line,
// each a finite number (double quotes around a cell allowed); a first line
// with no number in it is a header and skipped; a UTF-8 BOM is skipped.
Dataset readCsv(const std::string &path, LabelKind kind, int64_t labelWidth,
                int64_t features);

// Text: the bytes of a file or of a directory's files (see DataSource),
// windows of `window` tokens; notes gets what was skipped.
Dataset readText(const std::string &path, int64_t window, std::vector<std::string> *notes);

// Gaussian features labelled by a fixed random linear "teacher" (Class:
// argmax over numClasses; Value: linear map + small noise). `stream` selects
// disjoint samples (0: train, 1: test) from the same teacher.
Dataset makeSynthetic(const ModelSpec &spec, int64_t size, uint64_t seed,
                      uint64_t stream);

// Checks that a data set fits the model (feature count, label kind/width,
// class range); throws Error naming ds.source otherwise.
void checkDataset(const Dataset &ds, const ModelSpec &spec);

// The last `count` samples of ds as a data set of their own, removed from
// ds (features shared, not copied; labels and line numbers copied). Text:
// the last `count` tokens.
Dataset splitOffTail(Dataset &ds, int64_t count, const std::string &source);

// Loads and checks both splits, then holds out the validation samples.
DataSplits loadData(const DataSource &src, const ModelSpec &spec);

// FNV-1a over n bytes, continuing from h (the digests and names of data).
uint64_t fnv1a(const void *data, size_t n, uint64_t h = 0xcbf29ce484222325ULL);

// The size and an FNV-1a digest of up to 64 evenly spaced samples (features
// and labels): what the ranks compare at startup and what a training state
// records of its training set (TrainingState::trainDigest).
uint64_t datasetDigest(const Dataset &ds);

} // namespace dtc::rt
