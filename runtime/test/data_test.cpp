//===- data_test.cpp - IDX/CSV/synthetic readers, sampler, batches -------===//
#include "data/data.h"
#include "support/error.h"
#include "data/sampler.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace dtc::rt;
using dtc::test::TempDir;

namespace {

// Expects fn to throw dtc::rt::Error whose message contains every needle.
template <class Fn> void expectError(Fn fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error &e) {
    for (const auto &n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
  }
}

ModelSpec specFor(int64_t inputNumel, LabelKind kind, int64_t numClassesOrWidth) {
  ModelSpec s{};
  s.name = "m";
  s.inputNumel = inputNumel;
  s.labelKind = kind;
  s.labelNumel = kind == LabelKind::Class ? 1 : numClassesOrWidth;
  s.numClasses = kind == LabelKind::Class ? numClassesOrWidth : 0;
  return s;
}

// 3 images of 2x2 and their labels.
const std::vector<uint8_t> kPixels = {0, 255, 51, 102, 1, 2, 3, 4, 10, 20, 30, 40};
const std::vector<uint8_t> kLabels = {7, 0, 3};

void writeIdxPair(const TempDir &dir, const std::string &prefix, bool gz) {
  auto write = gz ? dtc::test::writeGz : dtc::test::writeFile;
  const std::string ext = gz ? ".gz" : "";
  write(dir.file(prefix + "-images-idx3-ubyte" + ext), dtc::test::idxBytes({3, 2, 2}, kPixels));
  write(dir.file(prefix + "-labels-idx1-ubyte" + ext), dtc::test::idxBytes({3}, kLabels));
}

//===--- IDX --------------------------------------------------------------===//

TEST(Idx, ReadsGzippedAndRawFiles) {
  for (bool gz : {true, false}) {
    TempDir dir;
    writeIdxPair(dir, "train", gz);
    std::string images = idxFile(dir.path(), "train-images-idx3-ubyte");
    EXPECT_EQ(images, dir.file(gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte"));
    Dataset ds = readIdx(images, idxFile(dir.path(), "train-labels-idx1-ubyte"));
    EXPECT_EQ(ds.size, 3);
    EXPECT_EQ(ds.features, 4);
    ASSERT_EQ(ds.x.size(), 12u);
    for (size_t i = 0; i < kPixels.size(); ++i)
      EXPECT_FLOAT_EQ(ds.x[i], kPixels[i] / 255.0f);
    EXPECT_EQ(ds.yClass, std::vector<int32_t>({7, 0, 3}));
  }
}

TEST(Idx, LoadDataReadsBothSplitsAndChecksTheModel) {
  TempDir dir;
  writeIdxPair(dir, "train", true);
  writeIdxPair(dir, "t10k", false);
  DataSource src;
  src.kind = DatasetKind::IDX;
  src.dir = dir.path();
  DataSplits d = loadData(src, specFor(4, LabelKind::Class, 10));
  EXPECT_EQ(d.train.size, 3);
  EXPECT_EQ(d.test.size, 3);
  expectError([&] { loadData(src, specFor(5, LabelKind::Class, 10)); },
              {dir.file("train-images-idx3-ubyte.gz"), "4 features", "takes 5"});
  expectError([&] { loadData(src, specFor(4, LabelKind::Class, 5)); },
              {"label 7", "5 classes"});
}

TEST(Idx, MissingFile) {
  TempDir dir;
  expectError([&] { readIdx(dir.file("nope.gz"), dir.file("nope2.gz")); },
              {"cannot open dataset file '" + dir.file("nope.gz") + "': No such file or directory"});
}

TEST(Idx, BadMagic) {
  TempDir dir;
  std::string bad = dtc::test::idxBytes({3, 2, 2}, kPixels);
  bad[0] = 0x1f; // not 0x0000....
  dtc::test::writeFile(dir.file("img"), bad);
  dtc::test::writeFile(dir.file("lbl"), dtc::test::idxBytes({3}, kLabels));
  expectError([&] { readIdx(dir.file("img"), dir.file("lbl")); }, {dir.file("img"), "bad magic"});
  bad = dtc::test::idxBytes({3, 2, 2}, kPixels);
  bad[2] = 0x0d; // float elements: unsupported
  dtc::test::writeFile(dir.file("img"), bad);
  expectError([&] { readIdx(dir.file("img"), dir.file("lbl")); }, {dir.file("img"), "type 0x0d"});
}

TEST(Idx, Truncated) {
  TempDir dir;
  std::string img = dtc::test::idxBytes({3, 2, 2}, kPixels);
  dtc::test::writeGz(dir.file("img.gz"), img.substr(0, img.size() - 1));
  dtc::test::writeGz(dir.file("lbl.gz"), dtc::test::idxBytes({3}, kLabels));
  expectError([&] { readIdx(dir.file("img.gz"), dir.file("lbl.gz")); },
              {dir.file("img.gz"), "truncated"});
  dtc::test::writeGz(dir.file("img.gz"), img.substr(0, 6)); // inside the header
  expectError([&] { readIdx(dir.file("img.gz"), dir.file("lbl.gz")); }, {"truncated"});
}

TEST(Idx, CorruptGzip) {
  TempDir dir;
  std::vector<uint8_t> many(4000);
  for (size_t i = 0; i < many.size(); ++i)
    many[i] = uint8_t(i * 7919 % 251);
  dtc::test::writeGz(dir.file("img.gz"), dtc::test::idxBytes({1000, 2, 2}, many));
  std::string gz = dtc::test::readFile(dir.file("img.gz"));
  for (size_t i = 20; i < gz.size() - 10; i += 3)
    gz[i] = char(gz[i] ^ 0x5a);
  dtc::test::writeFile(dir.file("img.gz"), gz);
  dtc::test::writeGz(dir.file("lbl.gz"), dtc::test::idxBytes({1000}, std::vector<uint8_t>(1000)));
  expectError([&] { readIdx(dir.file("img.gz"), dir.file("lbl.gz")); }, {dir.file("img.gz")});
}

TEST(Idx, CountMismatch) {
  TempDir dir;
  dtc::test::writeGz(dir.file("img.gz"), dtc::test::idxBytes({3, 2, 2}, kPixels));
  dtc::test::writeGz(dir.file("lbl.gz"), dtc::test::idxBytes({2}, {1, 2}));
  expectError([&] { readIdx(dir.file("img.gz"), dir.file("lbl.gz")); },
              {"3 images but 2 labels", dir.file("lbl.gz")});
}

//===--- CSV --------------------------------------------------------------===//

TEST(Csv, ClassLabelsWithHeader) {
  TempDir dir;
  dtc::test::writeFile(dir.file("d.csv"), "label,a,b,c\n2, 0.5,1e-1,-3\r\n\n0,1,2,3\n");
  Dataset ds = readCsv(dir.file("d.csv"), LabelKind::Class, 1, 3);
  EXPECT_EQ(ds.size, 2);
  EXPECT_EQ(ds.yClass, std::vector<int32_t>({2, 0}));
  EXPECT_EQ(std::vector<float>(ds.x.begin(), ds.x.end()), std::vector<float>({0.5f, 0.1f, -3.0f, 1, 2, 3}));
}

TEST(Csv, ValueLabelsWithoutHeader) {
  TempDir dir;
  dtc::test::writeFile(dir.file("d.csv"), "1.5,2.5,9\n-1,-2,8\n");
  Dataset ds = readCsv(dir.file("d.csv"), LabelKind::Value, 2, 1);
  EXPECT_EQ(ds.size, 2);
  EXPECT_EQ(ds.yValue, std::vector<float>({1.5f, 2.5f, -1, -2}));
  EXPECT_EQ(std::vector<float>(ds.x.begin(), ds.x.end()), std::vector<float>({9, 8}));
}

TEST(Csv, Errors) {
  TempDir dir;
  const std::string f = dir.file("d.csv");
  dtc::test::writeFile(f, "1,2,3\n1,2,x3\n");
  expectError([&] { readCsv(f, LabelKind::Class, 1, 2); }, {f, "line 2", "column 3", "'x3'"});
  dtc::test::writeFile(f, "1,2,3\n1,2,3,4\n");
  expectError([&] { readCsv(f, LabelKind::Class, 1, 2); },
              {f, "line 2", "3 features per sample", "model takes 2"});
  dtc::test::writeFile(f, "1.5,2,3\n");
  expectError([&] { readCsv(f, LabelKind::Class, 1, 2); }, {f, "not an integer"});
  expectError([&] { readCsv(dir.file("none.csv"), LabelKind::Class, 1, 2); },
              {"cannot open dataset file '" + dir.file("none.csv") + "'"});
}

// Binary files given as CSV are named as such, not by the numbers their
// bytes lack ("2 features per sample" before): an IDX file by its element
// type, anything else by its NUL byte.
TEST(Csv, BinaryAndIdxFilesAreNamedAsSuch) {
  TempDir dir;
  const std::string f = dir.file("d.csv");
  const std::string floats("\0\0\x0d\x03\0\0\0\x02\0\0\0\x02\0\0\0\x02", 16);
  dtc::test::writeFile(f, floats + std::string(32, '\x3f'));
  expectError([&] { readCsv(f, LabelKind::Class, 1, 4); },
              {"dataset file '" + f + "' is an IDX file (float32 elements, type 0x0d), not CSV",
               "IDX data are read as unsigned bytes (0x08) only"});
  std::string bytes = floats + std::string(8, '\x01');
  bytes[2] = '\x08';
  dtc::test::writeFile(f, bytes);
  expectError([&] { readCsv(f, LabelKind::Class, 1, 4); },
              {"is an IDX file (unsigned byte elements, type 0x08), not CSV",
               "--data takes the directory of the IDX files"});
  dtc::test::writeFile(f, std::string("1,2,3\n4,5\0,6\n", 13));
  expectError([&] { readCsv(f, LabelKind::Class, 1, 2); },
              {f, "line 2: a NUL byte (at byte 3 of the line): a binary file, not CSV"});
  // IDX files of other element types, as --predict inputs: named by type.
  const std::string idx = dir.file("x.idx");
  dtc::test::writeFile(idx, floats + std::string(32, '\x3f'));
  expectError([&] { readIdx(idx, ""); },
              {idx, "unsupported IDX element type 0x0d, float32 (only unsigned bytes, 0x08)"});
}

TEST(Csv, HeadersQuotesAndTheCellsNoHeaderMayHide) {
  TempDir dir;
  const std::string f = dir.file("d.csv");
  // A byte order mark and quoted numbers are data, not a header.
  dtc::test::writeFile(f, "\xEF\xBB\xBF" "1,0.5\n\"2\",\"0.25\"\n");
  Dataset ds = readCsv(f, LabelKind::Class, 1, 1);
  EXPECT_EQ(ds.size, 2) << "a row was dropped as a header";
  EXPECT_EQ(ds.yClass, std::vector<int32_t>({1, 2}));
  // A quoted header with commas inside is a header.
  dtc::test::writeFile(f, "\"label\",\"x, first\"\n3,1\n");
  EXPECT_EQ(readCsv(f, LabelKind::Class, 1, 1).size, 1);
  // Out of range, non-finite and partly numeric first lines are errors.
  dtc::test::writeFile(f, "1e39,2\n");
  expectError([&] { readCsv(f, LabelKind::Value, 1, 1); },
              {f, "line 1", "column 1", "'1e39' is outside the float range"});
  dtc::test::writeFile(f, "1,2\n0,nan\n");
  expectError([&] { readCsv(f, LabelKind::Value, 1, 1); },
              {f, "line 2", "column 2", "'nan' is not a finite number"});
  dtc::test::writeFile(f, "1,inf\n");
  expectError([&] { readCsv(f, LabelKind::Value, 1, 1); }, {"'inf' is not a finite number"});
  dtc::test::writeFile(f, "label,0.5\n");
  expectError([&] { readCsv(f, LabelKind::Value, 1, 1); },
              {f, "line 1", "column 1", "'label' is not a number"});
}

TEST(Csv, LabelErrorsNameTheLine) {
  TempDir dir;
  dtc::test::writeFile(dir.file("t.csv"), "label,x\n1,0.5\n\n7,0.25\n");
  DataSource src;
  src.kind = DatasetKind::CSV;
  src.trainPath = dir.file("t.csv");
  expectError([&] { loadData(src, specFor(1, LabelKind::Class, 2)); },
              {dir.file("t.csv"), "line 4", "label 7 is outside the model's 2 classes"});
}

TEST(DataFiles, NonRegularFilesAreRefused) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Each would block (the FIFO) or read forever (/dev/zero) without the check.
  expectError([&] { readCsv(fifo, LabelKind::Class, 1, 2); }, {fifo, "is not a regular file"});
  expectError([&] { readCsv("/dev/zero", LabelKind::Class, 1, 2); },
              {"/dev/zero", "is not a regular file"});
  expectError([&] { readIdx(fifo, fifo); }, {fifo, "is not a regular file"});
  expectError([&] { readIdx("/dev/zero", "/dev/zero"); }, {"is not a regular file"});
}

TEST(Idx, DimensionsWhoseProductOverflowsAreRefused) {
  TempDir dir;
  // 2^31 images of 2^32-1 x 2^32-1 pixels: the product overflows int64.
  dtc::test::writeGz(dir.file("i.gz"), dtc::test::idxBytes({0x80000000u, 0xffffffffu, 0xffffffffu}, {}));
  dtc::test::writeGz(dir.file("l.gz"), dtc::test::idxBytes({0x80000000u}, {}));
  expectError([&] { readIdx(dir.file("i.gz"), dir.file("l.gz")); },
              {dir.file("i.gz"), "implausible size"});
  dtc::test::writeGz(dir.file("i.gz"), dtc::test::idxBytes({4, 0, 28}, {}));
  expectError([&] { readIdx(dir.file("i.gz"), dir.file("l.gz")); }, {"no pixels"});
}

TEST(Csv, LoadDataWithoutTestSplit) {
  TempDir dir;
  dtc::test::writeFile(dir.file("t.csv"), "1,0.5\n0,0.25\n");
  DataSource src;
  src.kind = DatasetKind::CSV;
  src.trainPath = dir.file("t.csv");
  DataSplits d = loadData(src, specFor(1, LabelKind::Class, 2));
  EXPECT_EQ(d.train.size, 2);
  EXPECT_EQ(d.test.size, 0);
  dtc::test::writeFile(dir.file("t.csv"), "a,b\n");
  expectError([&] { loadData(src, specFor(1, LabelKind::Class, 2)); }, {"no training samples"});
}

//===--- synthetic --------------------------------------------------------===//

TEST(Synthetic, DeterministicAndLearnable) {
  ModelSpec spec = specFor(4, LabelKind::Class, 3);
  Dataset a = makeSynthetic(spec, 300, 5, 0), b = makeSynthetic(spec, 300, 5, 0);
  Dataset test = makeSynthetic(spec, 300, 5, 1), other = makeSynthetic(spec, 300, 6, 0);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.yClass, b.yClass);
  EXPECT_NE(a.x, test.x);
  EXPECT_NE(a.x, other.x);
  std::set<int32_t> classes(a.yClass.begin(), a.yClass.end());
  EXPECT_EQ(classes, std::set<int32_t>({0, 1, 2}));
  double mean = 0, var = 0;
  for (float v : a.x)
    mean += v;
  mean /= a.x.size();
  for (float v : a.x)
    var += (v - mean) * (v - mean);
  var /= a.x.size();
  EXPECT_NEAR(mean, 0, 0.1);
  EXPECT_NEAR(var, 1, 0.1);

  Dataset v = makeSynthetic(specFor(4, LabelKind::Value, 2), 10, 5, 0);
  EXPECT_EQ(v.labelWidth, 2);
  EXPECT_EQ(v.yValue.size(), 20u);
}

//===--- sampler and batches ----------------------------------------------===//

TEST(Sampler, ShuffleOffIsFileOrderWithShortLastBatch) {
  Sampler s(10, 4, 123, /*shuffle=*/false);
  ASSERT_EQ(s.numBatches(), 3);
  std::vector<int64_t> seen;
  std::vector<int64_t> sizes;
  for (int64_t epoch = 1; epoch <= 2; ++epoch) {
    s.setEpoch(epoch);
    seen.clear();
    sizes.clear();
    for (int64_t b = 0; b < s.numBatches(); ++b) {
      int64_t n;
      const int64_t *idx = s.batch(b, &n);
      sizes.push_back(n);
      seen.insert(seen.end(), idx, idx + n);
    }
    EXPECT_EQ(sizes, std::vector<int64_t>({4, 4, 2}));
    EXPECT_EQ(seen, std::vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
}

std::vector<int64_t> permutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> p(n);
  epochPermutation(seed, epoch, n, p.data());
  return p;
}

TEST(Sampler, ShuffleIsADeterministicPermutationPerEpoch) {
  auto p1 = permutation(42, 1, 1000);
  std::vector<int64_t> sorted = p1;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p1, permutation(42, 1, 1000));
  EXPECT_NE(p1, permutation(42, 2, 1000));
  EXPECT_NE(p1, permutation(43, 1, 1000));
  // Pinned (also reproduced by an independent Python mt19937_64): a change
  // here changes every shuffled run's batches.
  EXPECT_EQ(permutation(42, 1, 10), std::vector<int64_t>({1, 0, 2, 5, 8, 4, 9, 6, 7, 3}));

  Sampler s(1000, 64, 42, /*shuffle=*/true);
  s.setEpoch(1);
  int64_t n;
  const int64_t *idx = s.batch(0, &n);
  EXPECT_EQ(std::vector<int64_t>(idx, idx + n), std::vector<int64_t>(p1.begin(), p1.begin() + 64));
}

TEST(Sampler, RanksReadDisjointShardsOfTheSamePermutation) {
  // N = 10, W = 3, b = 2: step 0 holds positions 0-5, step 1 the last 4
  // (>= W, so it is kept): rank 0 gets positions 6 and 9, ranks 1, 2 one each.
  const int64_t N = 10, W = 3;
  auto perm = permutation(7, 2, N);
  std::set<int64_t> all;
  for (int r = 0; r < W; ++r) {
    Sampler s(N, 2, 7, true, r, int(W));
    s.setEpoch(2);
    EXPECT_EQ(s.numBatches(), 2);
    EXPECT_EQ(s.numSamples(), r == 0 ? 4 : 3);
    std::vector<int64_t> got;
    for (int64_t b = 0; b < s.numBatches(); ++b) {
      int64_t n;
      const int64_t *idx = s.batch(b, &n);
      got.insert(got.end(), idx, idx + n);
    }
    ASSERT_EQ(int64_t(got.size()), s.numSamples());
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_EQ(got[k], perm[r + k * W]);
    all.insert(got.begin(), got.end());
  }
  EXPECT_EQ(all.size(), size_t(N)); // disjoint, and nothing dropped
}

// The ranks' step k together is step k of one process with batch W*b.
TEST(Sampler, RanksTogetherSeeWhatOneProcessWithTheGlobalBatchSees) {
  for (int64_t N : {96, 97, 49, 100, 101, 103, 7}) {
    for (int W : {2, 3, 4}) {
      const int64_t b = 8;
      Sampler one(N, W * b, 5, true);
      one.setEpoch(3);
      std::vector<Sampler> ranks;
      for (int r = 0; r < W; ++r) {
        ranks.emplace_back(N, b, 5, true, r, W);
        ranks.back().setEpoch(3);
      }
      const int64_t R = N % (W * b);
      const bool dropLast = R > 0 && R < W;
      ASSERT_EQ(ranks[0].numBatches(), one.numBatches() - (dropLast ? 1 : 0))
          << "N " << N << " W " << W;
      EXPECT_EQ(ranks[0].droppedSamples(), dropLast ? R : 0);
      for (int64_t k = 0; k < ranks[0].numBatches(); ++k) {
        int64_t n1;
        const int64_t *i1 = one.batch(k, &n1);
        std::multiset<int64_t> want(i1, i1 + n1), got;
        for (int r = 0; r < W; ++r) {
          EXPECT_EQ(ranks[size_t(r)].numBatches(), ranks[0].numBatches());
          EXPECT_EQ(ranks[size_t(r)].globalBatch(k), n1);
          int64_t n;
          const int64_t *idx = ranks[size_t(r)].batch(k, &n);
          EXPECT_GE(n, 1);
          got.insert(idx, idx + n);
        }
        EXPECT_EQ(got, want) << "N " << N << " W " << W << " step " << k;
      }
    }
  }
}

TEST(Sampler, UnevenLastStepAndGradSeed) {
  // N = 101, W = 2, b = 8: 6 full steps of 16, then R = 5: rank 0 gets 3
  // samples (positions 96, 98, 100), rank 1 gets 2 (97, 99).
  Sampler r0(101, 8, 0, false, 0, 2), r1(101, 8, 0, false, 1, 2);
  ASSERT_EQ(r0.numBatches(), 7);
  ASSERT_EQ(r1.numBatches(), 7);
  for (int64_t k = 0; k < 6; ++k) {
    EXPECT_EQ(r0.gradSeed(k), 0.5f);
    EXPECT_EQ(r1.gradSeed(k), 0.5f);
    EXPECT_EQ(r0.globalBatch(k), 16);
  }
  int64_t n0, n1;
  const int64_t *i0 = r0.batch(6, &n0), *i1 = r1.batch(6, &n1);
  EXPECT_EQ(std::vector<int64_t>(i0, i0 + n0), std::vector<int64_t>({96, 98, 100}));
  EXPECT_EQ(std::vector<int64_t>(i1, i1 + n1), std::vector<int64_t>({97, 99}));
  EXPECT_EQ(r0.globalBatch(6), 5);
  EXPECT_FLOAT_EQ(r0.gradSeed(6), 3.0f / 5);
  EXPECT_FLOAT_EQ(r1.gradSeed(6), 2.0f / 5);
  EXPECT_EQ(r0.droppedSamples(), 0);

  // The all-reduce sums seed_r * mean_r over the W ranks: that must be the
  // mean over the R samples, whatever the per-sample values.
  auto value = [](int64_t i) { return std::sin(double(i)) * 10 + double(i); };
  for (int64_t N : {101, 99, 37}) {
    for (int W : {2, 3, 5}) {
      const int64_t b = 4;
      std::vector<Sampler> ranks;
      for (int r = 0; r < W; ++r)
        ranks.emplace_back(N, b, 11, true, r, W);
      for (int64_t k = 0; k < ranks[0].numBatches(); ++k) {
        double average = 0, globalSum = 0;
        int64_t globalCount = 0;
        for (int r = 0; r < W; ++r) {
          int64_t n;
          const int64_t *idx = ranks[size_t(r)].batch(k, &n);
          double mean = 0;
          for (int64_t j = 0; j < n; ++j) {
            mean += value(idx[j]) / double(n);
            globalSum += value(idx[j]);
          }
          globalCount += n;
          average += double(ranks[size_t(r)].gradSeed(k)) * mean;
        }
        EXPECT_NEAR(average, globalSum / double(globalCount), 1e-5)
            << "N " << N << " W " << W << " step " << k;
      }
    }
  }
}

TEST(Sampler, LastStepWithFewerSamplesThanRanksIsDroppedEverywhere) {
  // N = 33, W = 4, b = 4: 2 steps of 16, then 1 sample: no step for it.
  for (int r = 0; r < 4; ++r) {
    Sampler s(33, 4, 0, false, r, 4);
    EXPECT_EQ(s.numBatches(), 2);
    EXPECT_EQ(s.numSamples(), 8);
    EXPECT_EQ(s.droppedSamples(), 1);
    int64_t n;
    s.batch(1, &n);
    EXPECT_EQ(n, 4);
    EXPECT_EQ(s.gradSeed(1), 0.25f);
  }
  // One rank never drops anything.
  Sampler single(33, 4, 0, false);
  EXPECT_EQ(single.numBatches(), 9);
  EXPECT_EQ(single.droppedSamples(), 0);
  EXPECT_EQ(single.gradSeed(8), 1.0f); // the short last batch (1 sample)
}

TEST(Sampler, AnEpochStartedInsideContinuesItsOrder) {
  // N = 1000, W = 2, b = 16: step k of an epoch started at position 640
  // (after 20 steps) is step 20 + k of the whole epoch.
  for (int r = 0; r < 2; ++r) {
    Sampler whole(1000, 16, 9, true, r, 2), resumed(1000, 16, 9, true, r, 2);
    whole.setEpoch(3);
    resumed.setEpoch(3, 640);
    ASSERT_EQ(resumed.numBatches(), whole.numBatches() - 20);
    for (int64_t k = 0; k < resumed.numBatches(); ++k) {
      int64_t n1, n2;
      const int64_t *a = whole.batch(20 + k, &n1), *b = resumed.batch(k, &n2);
      ASSERT_EQ(n1, n2);
      EXPECT_EQ(std::vector<int64_t>(a, a + n1), std::vector<int64_t>(b, b + n2)) << k;
      EXPECT_EQ(resumed.gradSeed(k), whole.gradSeed(20 + k));
      EXPECT_EQ(resumed.positionAfter(k), whole.positionAfter(20 + k));
    }
    EXPECT_EQ(resumed.positionAfter(resumed.numBatches() - 1), 1000);
  }
  // On 1 rank from the position 2 ranks reached: the rest of the order.
  Sampler two(1000, 16, 9, true, 0, 2), one(1000, 16, 9, true);
  two.setEpoch(1);
  one.setEpoch(1, two.positionAfter(19));
  std::vector<int64_t> perm(1000);
  epochPermutation(9, 1, 1000, perm.data());
  int64_t n;
  const int64_t *first = one.batch(0, &n);
  EXPECT_EQ(std::vector<int64_t>(first, first + n),
            std::vector<int64_t>(perm.begin() + 640, perm.begin() + 656));
  EXPECT_EQ(one.numBatches(), 23); // 360 samples left: 22 of 16, one of 8
  // An epoch started at its end has no steps; one past it is an error.
  one.setEpoch(2, 1000);
  EXPECT_EQ(one.numBatches(), 0);
  EXPECT_THROW(one.setEpoch(2, 1001), Error);
}

TEST(Batch, GathersRowsAndLabels) {
  Dataset ds;
  ds.size = 4;
  ds.features = 2;
  ds.x = {0, 1, 10, 11, 20, 21, 30, 31};
  ds.yClass = {5, 6, 7, 8};
  BatchBuffer buf(3, ds);
  const int64_t idx[] = {3, 1};
  buf.gather(ds, idx, 2);
  StepArgs args{};
  buf.bind(args);
  EXPECT_EQ(args.batch, 2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(args.x) % 64, 0u);
  EXPECT_EQ(std::vector<float>(args.x, args.x + 4), std::vector<float>({30, 31, 10, 11}));
  EXPECT_EQ(std::vector<int32_t>(args.yClass, args.yClass + 2), std::vector<int32_t>({8, 6}));
  EXPECT_EQ(args.yValue, nullptr);
  const int64_t tooMany[] = {0, 1, 2, 3};
  EXPECT_THROW(buf.gather(ds, tooMany, 4), Error);
}

} // namespace

TEST(Validation, TheLastSamplesAreHeldOutWithTheirFeaturesShared) {
  Dataset ds;
  ds.source = "d";
  ds.size = 5;
  ds.features = 2;
  ds.x = {0, 1, 10, 11, 20, 21, 30, 31, 40, 41};
  ds.yClass = {0, 1, 2, 3, 4};
  Dataset v = splitOffTail(ds, 2, "held out");
  EXPECT_EQ(ds.size, 3);
  EXPECT_EQ(v.size, 2);
  EXPECT_EQ(std::vector<float>(ds.x.begin(), ds.x.end()), std::vector<float>({0, 1, 10, 11, 20, 21}));
  EXPECT_EQ(std::vector<float>(v.x.begin(), v.x.end()), std::vector<float>({30, 31, 40, 41}));
  EXPECT_EQ(ds.yClass, std::vector<int32_t>({0, 1, 2}));
  EXPECT_EQ(v.yClass, std::vector<int32_t>({3, 4}));
  EXPECT_EQ(v.source, "held out");
  // The slice shares the storage: it outlives the set it came from.
  ds = Dataset();
  EXPECT_EQ(v.x[3], 41.0f);
}

TEST(Validation, LoadDataHoldsOutTheFractionAndRefusesEmptySplits) {
  ModelSpec spec = specFor(1, LabelKind::Class, 10);
  spec.labelNumel = 1;
  TempDir dir;
  dtc::test::writeFile(dir.file("t.csv"), "1,0.5\n2,1.5\n3,2.5\n4,3.5\n");
  DataSource src;
  src.kind = DatasetKind::CSV;
  src.trainPath = dir.file("t.csv");
  src.validation = 0.5;
  DataSplits d = loadData(src, spec);
  EXPECT_EQ(d.train.size, 2);
  EXPECT_EQ(d.validation.size, 2);
  EXPECT_EQ(d.validation.yClass, std::vector<int32_t>({3, 4}));
  EXPECT_EQ(d.validation.where(0), "line 3"); // its CSV lines go with it
  src.validation = 0.1; // 0.4 of a sample
  expectError([&] { loadData(src, spec); }, {"validation 0.1", "holds out 0"});
}

//===--- text ---------------------------------------------------------------===//

namespace {
ModelSpec textSpec(int64_t window, int64_t idLimit = 256, int64_t classes = 256) {
  ModelSpec s{};
  s.name = "lm";
  s.inputRank = 1;
  s.inputNumel = window;
  s.inputType = ElementType::I32;
  s.inputIdLimit = idLimit;
  s.labelKind = LabelKind::Class;
  s.labelNumel = window;
  s.numClasses = classes;
  s.ignoreIndex = -100;
  return s;
}
} // namespace

TEST(Text, ADirectoryIsItsTextFilesInPathOrder) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.file("sub").c_str(), 0755), 0);
  dtc::test::writeFile(dir.file("b"), "BBBB");
  dtc::test::writeFile(dir.file("a"), "AAAA");
  dtc::test::writeFile(dir.file("sub/c"), "CC");
  dtc::test::writeFile(dir.file("a.dat"), std::string("\0\1\2", 3)); // binary: skipped
  ASSERT_EQ(::symlink(dir.file("a").c_str(), dir.file("a.u8").c_str()), 0); // a link: skipped
  std::vector<std::string> notes;
  Dataset ds = readText(dir.path(), 3, &notes);
  EXPECT_EQ(std::string(*ds.text.bytes), "AAAABBBBCC");
  EXPECT_EQ(ds.size, 3); // (10 - 1) / 3 windows
  EXPECT_EQ(ds.features, 3);
  EXPECT_EQ(ds.labelWidth, 3);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("skipped 1 binary files (with a NUL byte, as a.dat) and 1 symbolic"),
            std::string::npos)
      << notes[0];
  EXPECT_EQ(ds.text.where(5), dir.file("b") + ": byte 1");
  EXPECT_EQ(ds.text.where(8), dir.file("sub/c") + ": byte 0");
}

TEST(Text, TooShortEmptyAndMissing) {
  TempDir dir;
  dtc::test::writeFile(dir.file("t"), "abcd");
  expectError([&] { readText(dir.file("t"), 4, nullptr); },
              {"has 4 bytes, fewer than one window of 4 tokens", "(5)"});
  EXPECT_EQ(readText(dir.file("t"), 3, nullptr).size, 1);
  ASSERT_EQ(::mkdir(dir.file("empty").c_str(), 0755), 0);
  expectError([&] { readText(dir.file("empty"), 3, nullptr); }, {"has no text files"});
  expectError([&] { readText(dir.file("nope"), 3, nullptr); }, {"cannot open", "nope"});
}

// A binary file (a NUL byte) is what a directory skips with a note; given
// alone it was read as text without one: refused, naming the file.
TEST(Text, ABinaryFileAloneIsRefusedAsInADirectory) {
  TempDir dir;
  dtc::test::writeFile(dir.file("t.dat"), std::string("abcdefgh\0ijkl", 13));
  expectError([&] { readText(dir.file("t.dat"), 3, nullptr); },
              {"text file '" + dir.file("t.dat") + "' is binary (a NUL byte at byte 8)",
               "a directory's binary files are skipped"});
  ASSERT_EQ(::mkdir(dir.file("d").c_str(), 0755), 0);
  dtc::test::writeFile(dir.file("d/t.dat"), std::string("abcdefgh\0ijkl", 13));
  expectError([&] { readText(dir.file("d"), 3, nullptr); }, {"has no text files"});
}

TEST(Text, ConsecutiveWindowsAndTheirNextTokens) {
  TempDir dir;
  dtc::test::writeFile(dir.file("t"), "0123456789");
  Dataset ds = readText(dir.file("t"), 4, nullptr);
  ASSERT_EQ(ds.size, 2);
  BatchBuffer buf(2, ds);
  const int64_t idx[] = {1, 0};
  buf.gather(ds, idx, 2);
  StepArgs args{};
  buf.bind(args);
  EXPECT_EQ(args.x, nullptr);
  ASSERT_NE(args.xIds, nullptr);
  EXPECT_EQ(std::vector<int32_t>(args.xIds, args.xIds + 8),
            std::vector<int32_t>({'4', '5', '6', '7', '0', '1', '2', '3'}));
  EXPECT_EQ(std::vector<int32_t>(args.yClass, args.yClass + 8),
            std::vector<int32_t>({'5', '6', '7', '8', '1', '2', '3', '4'}));
}

TEST(Text, DrawnWindowsAreReproducibleInRangeAndVaryByEpochAndIndex) {
  TokenText t;
  t.begin = 100;
  t.end = 1100;
  t.window = 16;
  const uint64_t d1 = windowDraw(7, 1), d2 = windowDraw(7, 2);
  EXPECT_NE(d1, 0u);
  EXPECT_EQ(d1, windowDraw(7, 1));
  std::set<int64_t> starts;
  int64_t same = 0;
  for (int64_t i = 0; i < 500; ++i) {
    const int64_t s = t.windowStart(i, d1);
    EXPECT_GE(s, t.begin);
    EXPECT_LE(s + t.window, t.end - 1); // the labels fit
    starts.insert(s);
    same += s == t.windowStart(i, d2);
  }
  EXPECT_GT(starts.size(), 350u); // not one window again and again
  EXPECT_LT(same, 10);            // another epoch, other windows
  EXPECT_EQ(t.windowStart(3, 0), 100 + 3 * 16);
}

TEST(Text, TheValidationSplitIsTheEndOfTheText) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i)
    text += char('a' + i % 26);
  dtc::test::writeFile(dir.file("t"), text);
  DataSource src;
  src.kind = DatasetKind::Text;
  src.trainPath = dir.file("t");
  src.validation = 0.2;
  DataSplits d = loadData(src, textSpec(4));
  EXPECT_EQ(d.train.text.begin, 0);
  EXPECT_EQ(d.train.text.end, 80);
  EXPECT_EQ(d.train.size, 19);
  EXPECT_EQ(d.validation.text.begin, 80);
  EXPECT_EQ(d.validation.text.end, 100);
  EXPECT_EQ(d.validation.size, 4);
  EXPECT_EQ(d.test.size, 0);
  // A window of validation tokens starts where training's tokens end.
  EXPECT_EQ(d.validation.text.windowStart(0, 0), 80);
  src.validation = 0.97; // 3 tokens left for training
  expectError([&] { loadData(src, textSpec(4)); },
              {"holds out 97", "need one window of 4 tokens and its last label (5) each"});
  EXPECT_NE(datasetDigest(d.train), datasetDigest(d.validation));
}

TEST(Text, TokensOutsideTheModelNameTheirFileAndOffset) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.file("d").c_str(), 0755), 0);
  dtc::test::writeFile(dir.file("d/1"), "hello ");
  dtc::test::writeFile(dir.file("d/2"), "w\xc3\xb6rld");
  Dataset ds = readText(dir.file("d"), 4, nullptr);
  checkDataset(ds, textSpec(4)); // 256 rows and classes: every byte fits
  expectError([&] { checkDataset(ds, textSpec(4, 128)); },
              {dir.file("d/2") + ": byte 1", "token 195 is outside the 128 rows of the model's "
                                              "embedding"});
  expectError([&] { checkDataset(ds, textSpec(4, 256, 111)); },
              {dir.file("d/1") + ": byte 4", "token 111", "label of the token before it",
               "outside the model's 111 classes"});
  ModelSpec ignoring = textSpec(4, 256, 111);
  ignoring.ignoreIndex = 111; // 'o' is ignored: the next label outside is 'w'
  expectError([&] { checkDataset(ds, ignoring); },
              {dir.file("d/2") + ": byte 0", "token 119"});
  ModelSpec floats = specFor(4, LabelKind::Class, 256);
  expectError([&] { checkDataset(ds, floats); }, {"is text, token ids", "takes f32 features"});
  ModelSpec otherLabels = textSpec(4);
  otherLabels.labelNumel = 1;
  expectError([&] { checkDataset(ds, otherLabels); }, {"next token", "expects 1 class labels"});
  // A model of token ids refuses other data.
  Dataset csv;
  csv.source = "x.csv";
  expectError([&] { checkDataset(csv, textSpec(4)); }, {"takes i32 token ids", "text"});
}
