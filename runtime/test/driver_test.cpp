//===- driver_test.cpp - runMain end to end with hand-written models -----===//
//
// The models of test_models.h (what dtc would generate for a linear layer
// trained with softmax cross-entropy or MSE) driven through runMain like a
// real `train`, in this process (one rank, the local communicator).
//
//===----------------------------------------------------------------------===//
#include "comm/comm_impl.h"
#include "dtc/kernels.h"
#include "dtc/runtime.h"
#include "train/executor.h"
#include "train/gradcheck.h"
#include "train/session.h"
#include "test_models.h"
#include "test_util.h"
#include "support/tracer.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

using namespace dtc;
using namespace dtc::rt;
using dtc::test::Linear;
using dtc::test::LinReg;
using dtc::test::SoftmaxReg;
using dtc::test::readFile;
using dtc::test::TempDir;

namespace {

//===--- running train ----------------------------------------------------===//

struct TrainRun {
  int rc;
  std::string out, err;
};

TrainRun runTrain(const ModelSpec &spec, std::vector<std::string> args) {
  args.insert(args.begin(), "train");
  std::vector<char *> argv;
  for (auto &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int rc = runMain(int(args.size()), argv.data(), spec);
  TrainRun r{rc, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
  return r;
}

struct EpochLine {
  int epoch, epochs;
  double trainLoss, testLoss, testAccuracy;
};

// Parses the per-epoch lines (the format documented for tests/scripts).
std::vector<EpochLine> epochLines(const std::string &out, bool withAccuracy = true) {
  static const std::regex cls(
      R"(epoch (\d+)/(\d+) train_loss (\d+\.\d{4}) test_loss (\d+\.\d{4}) test_accuracy (\d\.\d{4}) images/s \d+ time \d+\.\d\ds)");
  static const std::regex reg(
      R"(epoch (\d+)/(\d+) train_loss (\d+\.\d{4}) test_loss (\d+\.\d{4}) images/s \d+ time \d+\.\d\ds)");
  std::vector<EpochLine> lines;
  std::istringstream in(out);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("epoch ", 0) != 0)
      continue;
    EXPECT_TRUE(std::regex_match(line, m, withAccuracy ? cls : reg)) << "bad line: " << line;
    if (m.empty())
      continue;
    lines.push_back({std::stoi(m[1]), std::stoi(m[2]), std::stod(m[3]), std::stod(m[4]),
                     withAccuracy ? std::stod(m[5]) : 0.0});
  }
  return lines;
}

std::vector<std::string> csvLines(const std::string &path) {
  std::vector<std::string> lines;
  std::istringstream in(readFile(path));
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  return lines;
}

//===--- tests ------------------------------------------------------------===//

TEST(Driver, TrainsSoftmaxRegressionOnSyntheticData) {
  TrainRun r = runTrain(SoftmaxReg::spec(), {"--progress", "off"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.rfind("model softmax_reg params 15 batch 32 epochs 5 optimizer "
                        "sgd(lr=0.05, momentum=0.9, weight_decay=0) data synthetic "
                        "(500 train, 200 test samples) ranks 1 backend local\n",
                        0),
            0u)
      << r.out;
  auto lines = epochLines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(lines[i].epoch, i + 1);
  EXPECT_EQ(lines[0].epochs, 5);
  EXPECT_LT(lines[4].trainLoss, lines[0].trainLoss);
  EXPECT_LT(lines[4].testLoss, lines[0].testLoss);
  EXPECT_GT(lines[4].testAccuracy, lines[0].testAccuracy);
  EXPECT_GT(lines[4].testAccuracy, 0.9);
  // Against the untrained model (lr 0).
  TrainRun untrained = runTrain(SoftmaxReg::spec(), {"--progress", "off", "--epochs", "1", "--lr", "0"});
  auto base = epochLines(untrained.out);
  ASSERT_EQ(base.size(), 1u);
  EXPECT_LT(base[0].testAccuracy, 0.7);
  EXPECT_LT(lines[4].testLoss, 0.5 * base[0].testLoss);
}

TEST(Driver, TrainsRegressionWithValueLabels) {
  TrainRun r = runTrain(LinReg::spec(), {"--progress", "off", "--epochs", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto lines = epochLines(r.out, /*withAccuracy=*/false);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_LT(lines[2].testLoss, 0.5 * lines[0].testLoss);
  EXPECT_LT(lines[2].testLoss, 0.01);
}

TEST(Driver, GradcheckPasses) {
  for (const ModelSpec &spec : {SoftmaxReg::spec(), LinReg::spec()}) {
    TrainRun r = runTrain(spec, {"--gradcheck"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_TRUE(std::regex_search(
        r.out, std::regex(R"(\ngradcheck fc\.weight max_abs_err \S+ max_rel_err \S+ checked \d+ ok\n)")))
        << r.out;
    EXPECT_NE(r.out.find("max_rel_err"), std::string::npos);
    EXPECT_NE(r.out.find("gradcheck passed\n"), std::string::npos) << r.out;
  }
}

TEST(Driver, GradcheckSamplesSpreadElementsOfLargeParameters) {
  TrainRun r = runTrain(Linear<20, 3, false>::spec(), {"--gradcheck"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fc.weight max_abs_err"), std::string::npos);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(fc\.weight .* checked 16 ok)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(fc\.bias .* checked 3 ok)"))) << r.out;
}

TEST(Driver, GradcheckCatchesAWrongGradientAndRestoresParameters) {
  ModelSpec spec = Linear<4, 3, false, /*BiasGradBug=*/1>::spec();
  TrainRun r = runTrain(spec, {"--gradcheck"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(gradcheck fc\.weight .* ok\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(gradcheck fc\.bias .* FAIL\n)"))) << r.out;
  EXPECT_NE(r.out.find("gradcheck FAILED\n"), std::string::npos);

  // Direct: the persistent block is bit-identical afterwards.
  Options opts = defaultOptions(spec);
  auto comm = createLocalCommunicator();
  Session s(spec, opts, loadData(opts.data, spec), *comm);
  std::string before(s.persistent.data(), s.persistent.size());
  ::testing::internal::CaptureStdout();
  EXPECT_FALSE(runGradcheck(s));
  ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(std::string(s.persistent.data(), s.persistent.size()), before);
}

TEST(Driver, SaveThenInitRoundTrips) {
  TempDir dir;
  const std::string a = dir.file("a.safetensors"), b = dir.file("b.safetensors");
  ModelSpec spec = SoftmaxReg::spec();
  TrainRun trained = runTrain(spec, {"--progress", "off", "--epochs", "2", "--save", a});
  ASSERT_EQ(trained.rc, 0) << trained.err;
  EXPECT_NE(trained.out.find("saved parameters to " + a), std::string::npos);
  // lr 0: parameters stay as loaded, so the evaluation must match exactly.
  TrainRun resumed = runTrain(spec, {"--progress", "off", "--epochs", "1", "--lr", "0", "--init", a,
                                "--save", b});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  TrainRun fresh = runTrain(spec, {"--progress", "off", "--epochs", "1", "--lr", "0"});
  ASSERT_EQ(fresh.rc, 0) << fresh.err;
  auto t = epochLines(trained.out), r = epochLines(resumed.out), f = epochLines(fresh.out);
  ASSERT_EQ(t.size(), 2u);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(r[0].testLoss, t[1].testLoss);
  EXPECT_EQ(r[0].testAccuracy, t[1].testAccuracy);
  EXPECT_NE(f[0].testLoss, t[1].testLoss);
  EXPECT_EQ(readFile(a), readFile(b));
}

TEST(Driver, EpochMeansAreWeightedBySampleCount) {
  // lr 0: the parameters never change, so one big batch and many small ones
  // (with short last batches: 500 % 32, 200 % 32) must report the same means.
  auto run = [](const char *batch) {
    TrainRun r = runTrain(SoftmaxReg::spec(),
                          {"--progress", "off", "--epochs", "1", "--lr", "0", "--batch", batch});
    EXPECT_EQ(r.rc, 0) << r.err;
    auto lines = epochLines(r.out);
    EXPECT_EQ(lines.size(), 1u);
    return lines.empty() ? EpochLine{} : lines[0];
  };
  EpochLine whole = run("500"), small = run("32");
  EXPECT_NEAR(small.trainLoss, whole.trainLoss, 1.5e-4);
  EXPECT_NEAR(small.testLoss, whole.testLoss, 1.5e-4);
  EXPECT_NEAR(small.testAccuracy, whole.testAccuracy, 1.5e-4);
}

TEST(Driver, MetricsFileAndMaxSteps) {
  TempDir dir;
  const std::string m = dir.file("m.csv");
  TrainRun r = runTrain(SoftmaxReg::spec(),
                   {"--progress", "off", "--metrics", m, "--lr", "0.02", "--max-steps", "20"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto rows = csvLines(m);
  ASSERT_EQ(rows.size(), 21u);
  EXPECT_EQ(rows[0], "epoch,step,batch,loss,accuracy,lr,seconds");
  // 500 samples / 32: 15 full batches, then a short one of 20.
  EXPECT_EQ(rows[1].rfind("1,1,32,", 0), 0u) << rows[1];
  EXPECT_EQ(rows[16].rfind("1,16,20,", 0), 0u) << rows[16];
  EXPECT_EQ(rows[17].rfind("2,17,32,", 0), 0u) << rows[17];
  EXPECT_EQ(rows[20].rfind("2,20,32,", 0), 0u) << rows[20];
  EXPECT_NE(rows[20].find(",0.02,"), std::string::npos) << rows[20];
  EXPECT_EQ(epochLines(r.out).size(), 2u); // the cut-short epoch still reports
}

TEST(Driver, SameSeedReproducesAndShuffleChangesOrder) {
  TempDir dir;
  auto lossColumn = [&](std::vector<std::string> extra) {
    const std::string m = dir.file("m.csv");
    extra.insert(extra.end(), {"--progress", "off", "--metrics", m, "--epochs", "2"});
    TrainRun r = runTrain(SoftmaxReg::spec(), extra);
    EXPECT_EQ(r.rc, 0) << r.err;
    std::vector<std::string> losses;
    for (auto &row : csvLines(m))
      losses.push_back(row.substr(0, row.rfind(','))); // drop seconds
    return losses;
  };
  auto a = lossColumn({}), b = lossColumn({});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, lossColumn({"--seed", "2"}));
  auto off1 = lossColumn({"--shuffle", "off"}), off2 = lossColumn({"--shuffle", "off", "--seed", "1"});
  EXPECT_EQ(off1, off2);
  EXPECT_NE(a, off1);
}

TEST(Driver, CsvDataAndEvalOff) {
  TempDir dir;
  std::string train = "label,a,b,c,d\n", test;
  for (int i = 0; i < 60; ++i) {
    int c = i % 3;
    std::string row = std::to_string(c) + "," + (c == 0 ? "2" : "0") + "," +
                      (c == 1 ? "2" : "0") + "," + (c == 2 ? "2" : "0") + "," +
                      std::to_string(i % 5 * 0.1) + "\n";
    train += row;
    if (i < 12)
      test += row;
  }
  dtc::test::writeFile(dir.file("train.csv"), train);
  dtc::test::writeFile(dir.file("test.csv"), test);
  const std::string data = dir.file("train.csv") + "," + dir.file("test.csv");
  TrainRun r = runTrain(SoftmaxReg::spec(),
                   {"--data", data, "--progress", "off", "--epochs", "3", "--batch", "8"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("data " + data + " (60 train, 12 test samples)"), std::string::npos)
      << r.out;
  auto lines = epochLines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].testAccuracy, 1.0);

  TrainRun noEval = runTrain(SoftmaxReg::spec(), {"--data", data, "--progress", "off", "--epochs",
                                             "1", "--eval", "off", "--quiet"});
  ASSERT_EQ(noEval.rc, 0) << noEval.err;
  EXPECT_TRUE(std::regex_match(
      noEval.out, std::regex(R"(epoch 1/1 train_loss \d+\.\d{4} images/s \d+ time \d+\.\d\ds\n)")))
      << noEval.out;

  dtc::test::writeFile(dir.file("bad.csv"), "1,2,3\n");
  TrainRun bad = runTrain(SoftmaxReg::spec(), {"--data", dir.file("bad.csv")});
  EXPECT_NE(bad.rc, 0);
  EXPECT_EQ(bad.err.rfind("train: error: dataset file '" + dir.file("bad.csv") + "'", 0), 0u)
      << bad.err;
  EXPECT_NE(bad.err.find("2 features per sample"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("model takes 4"), std::string::npos) << bad.err;
}

TEST(Driver, CommandLineErrors) {
  const ModelSpec spec = SoftmaxReg::spec();
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--epochs", "-1"}, {"--epochs", "two"}, {"--batch", "-1"},
        {"--shuffle", "maybe"}, {"--progress", "sometimes"}, {"--lr", "-1"},
        {"--threads", "0"}, {"--no-such-option"}, {"stray"}, {"--gradcheck-eps", "0"},
        {"--comm", "tcp"}, {"--comm-timeout", "0"}, {"--trace-steps", "0"},
        {"--device", "gpu"}, {"--log-interval", "0"}, {"--tf32", "maybe"}}) {
    TrainRun r = runTrain(spec, args);
    EXPECT_EQ(r.rc, 2) << args[0];
    EXPECT_EQ(r.err.rfind("train: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  TrainRun missing = runTrain(spec, {"--data", "/nonexistent/train.csv"});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_EQ(missing.err, "train: error: cannot open dataset file '/nonexistent/train.csv': No "
                         "such file or directory\n");
  TrainRun badSynthetic = runTrain(spec, {"--data", "synthetic:0"});
  EXPECT_EQ(badSynthetic.rc, 1);
  EXPECT_EQ(badSynthetic.err.rfind("train: error: --data: expected synthetic[:TRAIN[,TEST]]", 0), 0u)
      << badSynthetic.err;
  TrainRun noInit = runTrain(spec, {"--init", "/nonexistent/x.safetensors"});
  EXPECT_EQ(noInit.rc, 1);
  EXPECT_EQ(noInit.err.rfind("train: error: cannot open checkpoint '/nonexistent/x.safetensors'", 0),
            0u)
      << noInit.err;
}

// Every number from the command line is range-checked (finite for reals)
// with a message naming the option, and sizes computed from it cannot
// overflow: these crashed, hung or were accepted before.
TEST(Options, EveryNumberIsRangeCheckedAndFinite) {
  const ModelSpec spec = SoftmaxReg::spec();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch", "4611686018427387904"}, "--batch: expected a batch size from 1 to 2^40"},
      {{"--comm-timeout", "inf"}, "--comm-timeout: expected a number of seconds above 0"},
      {{"--comm-timeout", "9e9"}, "--comm-timeout: expected a number of seconds above 0, at most 2592000 (30 days), got '9e9'"},
      {{"--lr", "inf"}, "--lr: expected a finite learning rate"},
      {{"--lr", "nan"}, "--lr: expected a finite learning rate"},
      {{"--gradcheck-eps", "nan"}, "--gradcheck-eps: expected a finite step"},
      {{"--gradcheck-atol", "inf"}, "--gradcheck-atol: expected a finite tolerance"},
      {{"--threads", "100000"}, "--threads: expected a number of threads from 1 to 1024"},
      {{"--epochs", "1e3"}, "--epochs: expected a number of epochs"},
      {{"--max-steps", "0"}, "--max-steps: expected a number of steps from 1"},
      {{"--log-interval", "10000000"}, "--log-interval: expected a number of steps"},
      {{"--save", ""}, "--save: expected a path, got an empty string"},
      {{"--sample", "5", "--prompt", ""},
       "--prompt: the prompt is empty; give the text to continue (at least one byte), or leave "
       "--prompt out to start from a newline"},
      {{"--save="}, "--save: expected a value after '=', got nothing"},
      {{"--data="}, "--data: expected a value after '='"},
  };
  for (const auto &[args, message] : cases) {
    TrainRun r = runTrain(spec, args);
    EXPECT_EQ(r.rc, 2) << args[0];
    EXPECT_NE(r.err.find("train: error: " + message), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // Within the range but more than memory: refused before anything is allocated.
  TrainRun huge = runTrain(spec, {"--batch", "1099511627776"});
  EXPECT_EQ(huge.rc, 1);
  EXPECT_NE(huge.err.find("train: error: --batch 1099511627776: a step of 1099511627776 samples "
                          "needs"),
            std::string::npos)
      << huge.err;
  EXPECT_NE(huge.err.find("more than this machine's"), std::string::npos) << huge.err;
  TrainRun synthetic = runTrain(spec, {"--data", "synthetic:100000000000"});
  EXPECT_EQ(synthetic.rc, 1);
  EXPECT_NE(synthetic.err.find("synthetic data of 100000000000 samples x 4 features is too large"),
            std::string::npos)
      << synthetic.err;
  EXPECT_NO_THROW(checkStepMemory(spec, 32, true));
  EXPECT_THROW(checkStepMemory(spec, int64_t(1) << 62, false), Error) << "overflow, any device";
}

// A cosine or linear decay that would end before the warmup does (the rate
// falling to --min-lr right after it) was accepted: refused naming both
// values and where they came from. A decay of the warmup's length, or 0
// (the run's last step, even one the warmup outlasts), is not refused.
TEST(Options, ADecayShorterThanTheWarmupIsRefused) {
  ModelSpec spec = SoftmaxReg::spec();
  const std::vector<std::string> run = {"--data", "synthetic:40,8", "--batch", "8",
                                        "--progress", "off", "--eval", "off"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), run.begin(), run.end());
    return runTrain(spec, args);
  };
  for (const char *kind : {"cosine", "linear"}) {
    TrainRun r = with({"--lr-schedule", kind, "--warmup-steps", "100", "--decay-steps", "50"});
    EXPECT_EQ(r.rc, 2) << kind;
    EXPECT_NE(r.err.find(std::string("train: error: --decay-steps 50 is shorter than "
                                     "--warmup-steps 100: the ") +
                         kind + " decay would be over before the warmup ends"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("give --decay-steps of at least 100"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  for (const char *decay : {"100", "0"}) {
    TrainRun r = with({"--lr-schedule", "cosine", "--warmup-steps", "100", "--decay-steps", decay});
    EXPECT_EQ(r.rc, 0) << decay << ": " << r.err;
  }
  // The step schedule has no decay to end.
  EXPECT_EQ(with({"--lr-schedule", "step", "--warmup-steps", "100", "--decay-steps", "50"}).rc, 0);
  // Values from the recipe are named as such.
  spec.recipe.schedule.kind = 1;
  spec.recipe.schedule.warmup = 10;
  spec.recipe.schedule.decaySteps = 20;
  TrainRun r = with({"--warmup-steps", "30"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("train: error: --decay-steps 20 (the recipe's decay_steps) is shorter "
                       "than --warmup-steps 30: the cosine decay"),
            std::string::npos)
      << r.err;
}

TEST(Driver, HelpAndVersion) {
  TrainRun help = runTrain(SoftmaxReg::spec(), {"--help"});
  EXPECT_EQ(help.rc, 0);
  for (const char *opt : {"--data", "--epochs", "--batch", "--lr", "--seed", "--shuffle", "--save",
                          "--init", "--metrics", "--progress", "--threads", "--max-steps",
                          "--eval", "--gradcheck", "--gradcheck-eps", "--gradcheck-atol",
                          "--gradcheck-rtol", "--quiet", "--version", "--comm", "--comm-timeout",
                          "--trace", "--trace-steps", "--device", "--log-interval", "--tf32"})
    EXPECT_NE(help.out.find(opt), std::string::npos) << opt;
  TrainRun version = runTrain(SoftmaxReg::spec(), {"--version"});
  EXPECT_EQ(version.rc, 0);
  EXPECT_NE(version.out.find("softmax_reg"), std::string::npos) << version.out;
}

TEST(Driver, FashionMnistIdx) {
  const std::string dir = DTCRT_FASHION_MNIST_DIR;
  if (!std::ifstream(dir + "/train-images-idx3-ubyte.gz").good())
    GTEST_SKIP() << "no Fashion-MNIST at " << dir;
  ModelSpec spec = Linear<784, 10, false>::spec();
  TrainRun r = runTrain(spec, {"--data", dir, "--progress", "off", "--epochs", "1", "--batch", "64",
                          "--lr", "0.01", "--max-steps", "300"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("(60000 train, 10000 test samples)"), std::string::npos) << r.out;
  auto lines = epochLines(r.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_GT(lines[0].testAccuracy, 0.7);

  TrainRun wrong = runTrain(Linear<100, 10, false>::spec(), {"--data", dir, "--max-steps", "1"});
  EXPECT_EQ(wrong.rc, 1);
  EXPECT_NE(wrong.err.find("has 784 features per sample but model 'softmax_reg' takes 100"),
            std::string::npos)
      << wrong.err;
}

} // namespace

TEST(Driver, EpochsZeroOnlyEvaluatesAndSyntheticOverridesTheRecipe) {
  const ModelSpec spec = SoftmaxReg::spec();
  TrainRun r = runTrain(spec, {"--progress", "off", "--epochs", "0", "--data", "synthetic:64,32"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("(64 train, 32 test samples)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\neval test_loss "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("epoch 1/"), std::string::npos) << r.out;
}

namespace {

// Sets environment variables for the scope of the object.
class ScopedEnv {
public:
  ScopedEnv(std::initializer_list<std::pair<const char *, const char *>> vars) {
    for (auto [k, v] : vars) {
      const char *old = std::getenv(k);
      saved_.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
      ::setenv(k, v, 1);
    }
  }
  ~ScopedEnv() {
    for (auto &[k, v] : saved_)
      v ? ::setenv(k.c_str(), v->c_str(), 1) : ::unsetenv(k.c_str());
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

} // namespace

// torchrun's ranks meet through gloo at MASTER_ADDR:MASTER_PORT: without
// them, the run stops with what is missing (a whole gloo job:
// runtime.Launch.Gloo*).
TEST(Driver, TorchrunWorldSizeWithoutRendezvousIsRefused) {
  ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_RANK", "0"}});
  TrainRun r = runTrain(SoftmaxReg::spec(), {"--progress", "off", "--epochs", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "train: error: WORLD_SIZE=2 (torchrun) needs RANK, MASTER_ADDR and "
                   "MASTER_PORT too, but MASTER_ADDR and MASTER_PORT are missing or not a valid "
                   "number; or start the job with mpirun: mpirun -np 2 train\n");
  EXPECT_EQ(r.out, "");
}

TEST(Driver, TorchrunWorldSizeOneIsFine) {
  ScopedEnv env({{"WORLD_SIZE", "1"}, {"RANK", "0"}, {"LOCAL_RANK", "0"}});
  TrainRun r = runTrain(SoftmaxReg::spec(), {"--progress", "off", "--epochs", "1"});
  EXPECT_EQ(r.rc, 0) << r.err;
}

TEST(Driver, CommLocalUnderAMultiRankLauncherIsRefused) {
  ScopedEnv env({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}});
  TrainRun r = runTrain(SoftmaxReg::spec(), {"--comm", "local"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "train: error: --comm local, but mpirun started 2 ranks; run a single "
                   "process without mpirun, or use --comm auto\n");
}

TEST(Driver, MissingMpiPluginIsAClearError) {
  ScopedEnv env({{"DTC_MPI_PLUGIN", "/nonexistent/libdtcrt_mpi.so"}});
  TrainRun r = runTrain(SoftmaxReg::spec(), {"--comm", "mpi"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.rfind("train: error: cannot load the MPI plugin '/nonexistent/libdtcrt_mpi.so' "
                        "(needed because --comm mpi): /nonexistent/libdtcrt_mpi.so: cannot open "
                        "shared object file: No such file or directory",
                        0),
            0u)
      << r.err;
  // Without a launcher, auto never loads it.
  TrainRun local = runTrain(SoftmaxReg::spec(), {"--progress", "off", "--epochs", "1"});
  EXPECT_EQ(local.rc, 0) << local.err;
}

TEST(Driver, TraceOfTheFirstStepsIsChromeTraceJson) {
  using Split = Linear<64, 8, false, 0, /*SplitBuckets=*/true>;
  TempDir dir;
  const std::string path = dir.file("t.json");
  TrainRun r = runTrain(Split::spec(), {"--progress", "off", "--epochs", "2", "--trace", path,
                                        "--trace-steps", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("wrote a trace of 3 steps to " + path + "\n"), std::string::npos) << r.out;
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  nlohmann::json doc = nlohmann::json::parse(readFile(path));
  std::map<std::string, int> count;
  std::map<int, std::vector<std::string>> namesByTid;
  for (const auto &e : doc.at("traceEvents")) {
    if (e.at("ph") == "M")
      continue;
    ASSERT_EQ(e.at("ph"), "X");
    EXPECT_EQ(e.at("pid"), 0);
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    EXPECT_GE(e.at("ts").get<double>(), 0.0);
    const std::string name = e.at("name");
    ++count[name];
    namesByTid[e.at("tid").get<int>()].push_back(name);
    if (name == "allreduce bucket 0")
      EXPECT_EQ(e.at("args").at("bytes"), 8 * 4);
    if (name == "allreduce bucket 1")
      EXPECT_EQ(e.at("args").at("bytes"), 64 * 8 * 4);
  }
  EXPECT_EQ(count["step 1"], 1);
  EXPECT_EQ(count["step 3"], 1);
  EXPECT_EQ(count["step 4"], 0); // only --trace-steps steps
  for (const char *name : {"allreduce bucket 0", "allreduce bucket 1", "wait bucket 0",
                           "wait bucket 1", "matmul", "weight grad", "sgd"})
    EXPECT_EQ(count[name], 3) << name;
  for (const auto &n : namesByTid[2])
    EXPECT_EQ(n.rfind("allreduce bucket ", 0), 0u) << n;
  EXPECT_EQ(namesByTid[2].size(), 6u);
  EXPECT_EQ(namesByTid[1].size(), doc.at("traceEvents").size() - 6 - 3); // 3 metadata events
}

TEST(Driver, TraceWithFewerStepsThanAskedIsWrittenAtTheEnd) {
  TempDir dir;
  const std::string path = dir.file("trace");
  TrainRun r = runTrain(SoftmaxReg::spec(), {"--progress", "off", "--epochs", "1", "--data",
                                             "synthetic:40,10", "--batch", "16", "--trace", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(readFile(path));
  int steps = 0;
  for (const auto &e : doc.at("traceEvents"))
    steps += e.at("name").get<std::string>().rfind("step ", 0) == 0;
  EXPECT_EQ(steps, 3);
}

//===--- devices ------------------------------------------------------------===//
//
// libdtcrt_cuda is not linked here: a stand-in backend runs the "CUDA" steps
// (the CPU steps, on host memory) through an executor that works like the
// CUDA one (outputs deferred to slots read once per --log-interval, two
// batch slots used in turn, its own copy of the parameters), so that the
// driver's device path is tested without a GPU.

namespace {

class HostDeviceExecutor final : public Executor {
public:
  explicit HostDeviceExecutor(Session &s)
      : s_(s), slots_(s.opts.logInterval), persistent_(s.persistent.size()),
        arena_(size_t(arenaBytes(s.spec, s.opts.batch))),
        outputs_(size_t(slots_ * s.spec.numOutputs), -1.0f),
        batches_{BatchBuffer(s.opts.batch, s.data.train), BatchBuffer(s.opts.batch, s.data.train)} {
    std::memcpy(persistent_.data(), s.persistent.data(), s.persistent.size());
    args_.persistent = persistent_.data();
    args_.arena = arena_.data();
    args_.hyper = &s.hyper;
    args_.comm = &s.comm;
  }
  std::string describe() const override { return "fake:0"; }
  int64_t outputSlots() const override { return slots_; }
  int stage(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw) override {
    const int h = next_;
    next_ ^= 1;
    batches_[h].gather(ds, idx, n, draw);
    return h;
  }
  void train(int b, int64_t slot, float gradSeed) override {
    run(s_.spec.trainStepCuda, b, slot, gradSeed, nullptr);
  }
  void accumulate(int b, int64_t slot, float gradSeed) override {
    run(s_.spec.accumulateStepCuda, b, slot, gradSeed, nullptr);
  }
  void eval(int b, int64_t slot) override { run(s_.spec.evalStepCuda, b, slot, 1, nullptr); }
  void grad(int b, float *grads) override { run(s_.spec.gradStepCuda, b, 0, 1, grads); }
  void readOutputs(int64_t count, float *out) override {
    EXPECT_LE(count, slots_);
    ++reads;
    std::copy(outputs_.begin(), outputs_.begin() + count * s_.spec.numOutputs, out);
    std::fill(outputs_.begin(), outputs_.end(), -1.0f); // slots must be rewritten
  }
  void setParam(int64_t offset, float value) override {
    std::memcpy(persistent_.data() + offset, &value, sizeof value);
  }
  void persistentToHost() override {
    std::memcpy(s_.persistent.data(), persistent_.data(), size_t(s_.spec.persistentBytes));
  }
  void shareBuffers() override {} // one rank
  void setTracer(Tracer *t) override { args_.trace = t; }

  static inline int reads = 0;

private:
  void run(StepFn step, int b, int64_t slot, float gradSeed, float *grads) {
    ASSERT_TRUE(b == 0 || b == 1);
    ASSERT_LT(slot, slots_);
    batches_[b].bind(args_);
    args_.outputs = outputs_.data() + slot * s_.spec.numOutputs;
    args_.gradSeed = gradSeed;
    args_.paramGrads = grads;
    step(args_);
  }

  Session &s_;
  int64_t slots_;
  AlignedBuffer persistent_, arena_;
  std::vector<float> outputs_;
  BatchBuffer batches_[2];
  int next_ = 0;
  StepArgs args_{};
};

class FakeBackend final : public DeviceBackend {
public:
  FakeBackend(int devices, std::string why) : devices_(devices), why_(std::move(why)) {
    registerDeviceBackend(this);
  }
  ~FakeBackend() override { registerDeviceBackend(nullptr); }
  const char *name() const override { return "fake"; }
  int deviceCount(std::string *why) override {
    *why = why_;
    return devices_;
  }
  std::unique_ptr<CommBase> createCommunicator(std::unique_ptr<CommBase> base, bool,
                                               const LaunchInfo &, const Options &) override {
    return base;
  }
  std::unique_ptr<Executor> createExecutor(Session &s) override {
    return std::make_unique<HostDeviceExecutor>(s);
  }

private:
  int devices_;
  std::string why_;
};

template <class M> ModelSpec withDeviceSteps() {
  ModelSpec s = M::spec();
  s.trainStepCuda = s.trainStep;
  s.evalStepCuda = s.evalStep;
  s.gradStepCuda = s.gradStep;
  return s;
}

std::string firstLine(const std::string &s) { return s.substr(0, s.find('\n')); }

// The run's output without timings (images/s, time, the seconds column).
std::string withoutTimes(const std::string &s) {
  static const std::regex times(R"( images/s \d+ time \d+\.\d+s|,[0-9.]+\n|saved parameters to \S+)");
  return std::regex_replace(s, times, "");
}

} // namespace

TEST(Device, CudaNeedsCudaSteps) {
  TrainRun r = runTrain(SoftmaxReg::spec(), {"--device", "cuda"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "train: error: --device cuda: model 'softmax_reg' was compiled without CUDA "
                   "steps (compile it with dtc --target=cuda)\n");
  // A CPU program's header does not mention devices.
  TrainRun cpu = runTrain(SoftmaxReg::spec(), {"--device", "cpu", "--epochs", "1"});
  ASSERT_EQ(cpu.rc, 0) << cpu.err;
  EXPECT_EQ(firstLine(cpu.out).find("device"), std::string::npos) << cpu.out;
}

TEST(Device, WithoutTheCudaRuntimeAutoRunsOnTheCpu) {
  ASSERT_EQ(deviceBackend(), nullptr);
  const ModelSpec spec = withDeviceSteps<SoftmaxReg>();
  TrainRun r = runTrain(spec, {"--epochs", "1", "--progress", "off"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string header = firstLine(r.out);
  EXPECT_NE(header.find(" ranks 1 backend local device cpu (this program was not linked with "
                        "the CUDA runtime (libdtcrt_cuda.a))"),
            std::string::npos)
      << header;
  TrainRun cuda = runTrain(spec, {"--device", "cuda"});
  EXPECT_EQ(cuda.rc, 1);
  EXPECT_EQ(cuda.err, "train: error: --device cuda: this program was not linked with the CUDA "
                      "runtime (libdtcrt_cuda.a)\n");
  TrainRun cpu = runTrain(spec, {"--device", "cpu", "--epochs", "1", "--progress", "off"});
  ASSERT_EQ(cpu.rc, 0) << cpu.err;
  EXPECT_NE(firstLine(cpu.out).find(" backend local device cpu"), std::string::npos) << cpu.out;
}

TEST(Device, WithoutADeviceAutoRunsOnTheCpuAndCudaIsAnError) {
  FakeBackend backend(0, "cudaGetDeviceCount: no CUDA-capable device is detected");
  const ModelSpec spec = withDeviceSteps<SoftmaxReg>();
  TrainRun r = runTrain(spec, {"--epochs", "1", "--progress", "off"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(firstLine(r.out).find(" device cpu (no CUDA device found (cudaGetDeviceCount: no "
                                  "CUDA-capable device is detected))"),
            std::string::npos)
      << r.out;
  TrainRun cuda = runTrain(spec, {"--device", "cuda"});
  EXPECT_EQ(cuda.rc, 1);
  EXPECT_EQ(cuda.err, "train: error: --device cuda: no CUDA device found (cudaGetDeviceCount: no "
                      "CUDA-capable device is detected)\n");
  EXPECT_EQ(cuda.out, "");
}

TEST(Device, CommNcclNeedsADevice) {
  TrainRun r = runTrain(SoftmaxReg::spec(), {"--comm", "nccl"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.rfind("train: error: --comm nccl: NCCL connects CUDA devices, but this run "
                        "uses the CPU",
                        0),
            0u)
      << r.err;
  FakeBackend backend(1, "");
  TrainRun mpi = runTrain(withDeviceSteps<SoftmaxReg>(), {"--comm", "mpi"});
  EXPECT_EQ(mpi.rc, 1);
  EXPECT_EQ(mpi.err.rfind("train: error: --comm mpi all-reduces host memory, but this run uses "
                          "a CUDA device",
                          0),
            0u)
      << mpi.err;
}

// Deferred outputs (--log-interval 3 over 7 steps per epoch), two batch
// slots and the executor's own parameters give exactly the CPU's results.
TEST(Device, DeviceRunsMatchTheCpuExactly) {
  FakeBackend backend(1, "");
  TempDir dir;
  for (const ModelSpec &spec : {withDeviceSteps<SoftmaxReg>(), withDeviceSteps<LinReg>()}) {
    std::vector<std::string> common = {"--epochs", "2", "--data", "synthetic:100,40", "--batch",
                                       "16", "--progress", "off", "--log-interval", "3"};
    auto run = [&](const char *device, const std::string &tag) {
      std::vector<std::string> args = common;
      for (std::string a : {std::string("--device"), std::string(device),
                            std::string("--metrics"), dir.file(tag + ".csv"),
                            std::string("--save"), dir.file(tag + ".safetensors")})
        args.push_back(a);
      return runTrain(spec, args);
    };
    HostDeviceExecutor::reads = 0;
    TrainRun dev = run("cuda", "dev");
    ASSERT_EQ(dev.rc, 0) << dev.err;
    // Per epoch: 7 steps in 3 reads, and 40 test samples in 1 read.
    EXPECT_EQ(HostDeviceExecutor::reads, 2 * (3 + 1));
    TrainRun cpu = run("cpu", "cpu");
    ASSERT_EQ(cpu.rc, 0) << cpu.err;
    EXPECT_NE(firstLine(dev.out).find(" backend local device fake:0"), std::string::npos)
        << dev.out;
    const std::string devBody = dev.out.substr(dev.out.find('\n'));
    const std::string cpuBody = cpu.out.substr(cpu.out.find('\n'));
    EXPECT_EQ(epochLines(devBody, spec.numOutputs == 2).size(), 2u);
    EXPECT_EQ(withoutTimes(devBody), withoutTimes(cpuBody));
    EXPECT_EQ(withoutTimes(readFile(dir.file("dev.csv"))),
              withoutTimes(readFile(dir.file("cpu.csv"))));
    EXPECT_EQ(csvLines(dir.file("dev.csv")).size(), 1u + 14u);
    EXPECT_EQ(readFile(dir.file("dev.safetensors")), readFile(dir.file("cpu.safetensors")));
  }
}

TEST(Device, MaxStepsAndEvaluationOnlyOnTheDevice) {
  FakeBackend backend(1, "");
  const ModelSpec spec = withDeviceSteps<SoftmaxReg>();
  for (const char *steps : {"1", "4", "5"}) {
    TrainRun dev = runTrain(spec, {"--device", "cuda", "--max-steps", steps, "--log-interval",
                                   "4", "--data", "synthetic:64,16", "--batch", "8"});
    TrainRun cpu = runTrain(spec, {"--device", "cpu", "--max-steps", steps, "--data",
                                   "synthetic:64,16", "--batch", "8"});
    ASSERT_EQ(dev.rc, 0) << dev.err;
    EXPECT_EQ(withoutTimes(dev.out.substr(dev.out.find('\n'))),
              withoutTimes(cpu.out.substr(cpu.out.find('\n'))));
  }
  TrainRun eval = runTrain(spec, {"--device", "cuda", "--epochs", "0", "--log-interval", "2"});
  ASSERT_EQ(eval.rc, 0) << eval.err;
  TrainRun evalCpu = runTrain(spec, {"--device", "cpu", "--epochs", "0"});
  EXPECT_EQ(eval.out.substr(eval.out.find('\n')), evalCpu.out.substr(evalCpu.out.find('\n')));
}

TEST(Device, NonFiniteLossIsReportedAtItsStep) {
  FakeBackend backend(1, "");
  const ModelSpec spec = withDeviceSteps<LinReg>();
  TrainRun dev = runTrain(spec, {"--device", "cuda", "--lr", "1e30", "--log-interval", "50"});
  TrainRun cpu = runTrain(spec, {"--device", "cpu", "--lr", "1e30"});
  EXPECT_EQ(dev.rc, 1);
  EXPECT_EQ(cpu.rc, 1);
  EXPECT_NE(cpu.err.find("the loss became"), std::string::npos) << cpu.err;
  EXPECT_EQ(dev.err, cpu.err);
}

TEST(Device, GradcheckRunsTheDeviceSteps) {
  FakeBackend backend(1, "");
  TrainRun ok = runTrain(withDeviceSteps<SoftmaxReg>(), {"--device", "cuda", "--gradcheck"});
  EXPECT_EQ(ok.rc, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("gradcheck passed\n"), std::string::npos) << ok.out;
  TrainRun bad = runTrain(withDeviceSteps<Linear<4, 3, false, 1>>(), {"--device", "cuda",
                                                                      "--gradcheck"});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_TRUE(std::regex_search(bad.out, std::regex(R"(gradcheck fc\.bias .* FAIL\n)")))
      << bad.out;
}

namespace {

// --overlap: on and off as given; auto overlaps only with a core for the
// communication thread besides the compute threads.
TEST(Options, OverlapAutoNeedsACoreForTheCommunicationThread) {
  using O = rt::Options::Overlap;
  EXPECT_TRUE(rt::overlapAllreduces(O::On, 1, 1));
  EXPECT_FALSE(rt::overlapAllreduces(O::Off, 8, 1));
  EXPECT_FALSE(rt::overlapAllreduces(O::Auto, 1, 1)); // 2 ranks x 1 thread on 2 cores
  EXPECT_FALSE(rt::overlapAllreduces(O::Auto, 4, 4)); // the default --threads: every core
  EXPECT_TRUE(rt::overlapAllreduces(O::Auto, 2, 1));  // 2 ranks x 1 thread on 4 cores
}

// The trace records where the all-reduces start.
TEST(Tracer, RecordsMetadataInOtherData) {
  rt::Tracer t(0);
  t.setMetadata("overlap", "off");
  nlohmann::json doc = nlohmann::json::parse(t.json());
  EXPECT_EQ(doc.at("otherData").at("overlap"), "off");
}

} // namespace
