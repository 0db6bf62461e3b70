//===- cuda_launch_test.cpp - The nvcc-linked train program, run whole ---===//
//
// dtcrt_test_train_cuda (test_train_cuda.cu, linked by nvcc exactly as dtc
// links generated CUDA programs) run as users do:
//   Link.*   always: --device auto runs (on the CPU when there is no GPU,
//            saying so), --device cuda without a GPU is a clear error.
//   Train.*  with a GPU: CUDA runs against CPU runs of the same program.
//   Nccl.*   NCCL: one rank; two ranks (mpirun, torchrun's variables) and a
//            stopped rank with two GPUs.
// Without the GPUs a test needs it skips (fails under DTC_REQUIRE_GPU,
// cuda_test_util.h).
//
//===----------------------------------------------------------------------===//
#include "checkpoint/checkpoint.h"
#include "cuda_test_util.h"
#include "job.h"
#include "test_models.h"
#include "test_util.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <sstream>

using dtc::test::Job;
using dtc::test::readFile;
using dtc::test::runJob;
using dtc::test::TempDir;

namespace {

// The program: the one built beside this test, or DTCRT_TEST_TRAIN_CUDA's
// (the GPU bundle carries both, relinked, to another machine).
const std::string kTrain = [] {
  const char *p = std::getenv("DTCRT_TEST_TRAIN_CUDA");
  return std::string(p && *p ? p : DTCRT_TEST_TRAIN_CUDA);
}();

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Job train(const std::vector<std::string> &args, std::vector<std::string> env = {},
          double timeout = 120) {
  return runJob(std::vector<std::string>{kTrain} + args, env, timeout);
}

std::string header(const std::string &out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model ", 0) == 0)
      return line;
  return "";
}

struct Epoch {
  double trainLoss, testLoss, testAccuracy;
};
std::vector<Epoch> epochs(const std::string &out) {
  static const std::regex re(
      R"(epoch \d+/\d+ train_loss (\S+) test_loss (\S+)(?: test_accuracy (\S+))? images/s)");
  std::vector<Epoch> e;
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    e.push_back({std::stod((*it)[1]), std::stod((*it)[2]),
                 (*it)[3].matched ? std::stod((*it)[3]) : 0.0});
  return e;
}

void expectSameEpochs(const std::string &a, const std::string &b, double tol) {
  auto ea = epochs(a), eb = epochs(b);
  ASSERT_EQ(ea.size(), eb.size()) << a << b;
  ASSERT_FALSE(ea.empty()) << a;
  for (size_t i = 0; i < ea.size(); ++i) {
    EXPECT_NEAR(ea[i].trainLoss, eb[i].trainLoss, tol) << a << b;
    EXPECT_NEAR(ea[i].testLoss, eb[i].testLoss, tol) << a << b;
    EXPECT_NEAR(ea[i].testAccuracy, eb[i].testAccuracy, 0.011) << a << b;
  }
}

#define EXPECT_JOB_OK(job)                                                     \
  do {                                                                         \
    EXPECT_FALSE((job).timedOut) << (job).out;                                 \
    EXPECT_EQ((job).rc, 0) << (job).out;                                       \
    EXPECT_EQ((job).leftovers, 0) << (job).out;                                \
  } while (0)

//===--- always ---------------------------------------------------------------===//

TEST(Link, DeviceAutoRunsOnTheGpuOrSaysWhyNot) {
  Job job = train({"--device", "auto", "--max-steps", "3", "--data", "synthetic:64,16"});
  EXPECT_JOB_OK(job);
  const std::string h = header(job.out);
  std::string why;
  if (dtc::test::cudaDeviceCount(&why) > 0) {
    EXPECT_NE(h.find(" backend local device cuda:0 ("), std::string::npos) << job.out;
  } else {
    // Registered by including dtc/cuda.h (no explicit enableCuda call), and
    // no device: the CPU steps run.
    EXPECT_NE(h.find(" backend local device cpu (no CUDA device found (cudaGetDeviceCount: " +
                     why + "))"),
              std::string::npos)
        << job.out;
  }
  EXPECT_EQ(epochs(job.out).size(), 2u) << job.out; // 2 steps per epoch at batch 32
}

TEST(Link, DeviceCudaWithoutAGpuIsAClearError) {
  Job job = train({"--device", "cuda", "--max-steps", "3", "--data", "synthetic:64,16"});
  EXPECT_FALSE(job.timedOut);
  std::string why;
  if (dtc::test::cudaDeviceCount(&why) > 0) {
    EXPECT_EQ(job.rc, 0) << job.out;
    return;
  }
  EXPECT_EQ(job.rc, 1) << job.out;
  EXPECT_EQ(job.out, "train: error: --device cuda: no CUDA device found (cudaGetDeviceCount: " +
                         why + ")\n");
}

//===--- one GPU ---------------------------------------------------------------===//

// The same training on the CPU and on the GPU: losses agree to float
// rounding (the sums run in other orders), over 3 epochs of 16 steps.
TEST(Train, CudaMatchesTheCpu) {
  DTC_NEED_GPUS(1);
  for (const char *model : {"softmax", "linreg"}) {
    const std::vector<std::string> args = {"--epochs", "3", "--data", "synthetic:500,200",
                                           "--batch", "32", "--progress", "off"};
    const std::vector<std::string> env = {std::string("DTCRT_TEST_MODEL=") + model};
    Job cpu = train(args + std::vector<std::string>{"--device", "cpu"}, env);
    Job gpu = train(args + std::vector<std::string>{"--device", "cuda", "--log-interval", "5"},
                    env);
    EXPECT_JOB_OK(cpu);
    EXPECT_JOB_OK(gpu);
    EXPECT_NE(header(gpu.out).find(" device cuda:0 ("), std::string::npos) << gpu.out;
    expectSameEpochs(cpu.out, gpu.out, 2e-4);
  }
}

TEST(Train, SplitBucketsAndAWideModel) {
  DTC_NEED_GPUS(1);
  const std::vector<std::string> args = {"--epochs", "1", "--data", "synthetic:300,100",
                                         "--batch", "64", "--progress", "off", "--lr", "0.01"};
  Job cpu = train(args + std::vector<std::string>{"--device", "cpu"}, {"DTCRT_TEST_MODEL=wide"});
  Job gpu = train(args + std::vector<std::string>{"--device", "cuda"}, {"DTCRT_TEST_MODEL=wide"});
  EXPECT_JOB_OK(cpu);
  EXPECT_JOB_OK(gpu);
  expectSameEpochs(cpu.out, gpu.out, 1e-3);
}

TEST(Train, GradcheckOnTheGpu) {
  DTC_NEED_GPUS(1);
  for (const char *model : {"softmax", "linreg"}) {
    Job job = train({"--device", "cuda", "--gradcheck"},
                    {std::string("DTCRT_TEST_MODEL=") + model});
    EXPECT_JOB_OK(job);
    EXPECT_NE(job.out.find("gradcheck passed\n"), std::string::npos) << job.out;
  }
}

// Parameters saved from the GPU load on the CPU, metrics rows come per step
// with a logging interval that does not divide the epoch, and --epochs 0
// evaluates the same on both.
TEST(Train, SaveMetricsAndEvaluation) {
  DTC_NEED_GPUS(1);
  TempDir dir;
  const std::string saved = dir.file("gpu.safetensors"), csv = dir.file("gpu.csv");
  Job gpu = train({"--device", "cuda", "--epochs", "2", "--data", "synthetic:100,40", "--batch",
                   "16", "--log-interval", "3", "--save", saved, "--metrics", csv});
  EXPECT_JOB_OK(gpu);
  std::istringstream rows(readFile(csv));
  int count = 0;
  for (std::string line; std::getline(rows, line);)
    ++count;
  EXPECT_EQ(count, 1 + 2 * 7);
  Job evalCpu = train({"--device", "cpu", "--epochs", "0", "--data", "synthetic:100,40",
                       "--init", saved});
  Job evalGpu = train({"--device", "cuda", "--epochs", "0", "--data", "synthetic:100,40",
                       "--init", saved});
  EXPECT_JOB_OK(evalCpu);
  EXPECT_JOB_OK(evalGpu);
  static const std::regex re(R"(eval test_loss (\S+) test_accuracy (\S+))");
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(evalCpu.out, a, re)) << evalCpu.out;
  ASSERT_TRUE(std::regex_search(evalGpu.out, b, re)) << evalGpu.out;
  EXPECT_NEAR(std::stod(a[1]), std::stod(b[1]), 1e-4);
  EXPECT_EQ(a[2], b[2]);
}

//===--- NCCL -------------------------------------------------------------------===//

TEST(Nccl, OneRankForcedThroughNcclMatchesLocal) {
  DTC_NEED_GPUS(1);
  const std::vector<std::string> args = {"--device", "cuda", "--epochs", "2", "--data",
                                         "synthetic:500,200", "--progress", "off"};
  Job local = train(args);
  Job nccl = train(args + std::vector<std::string>{"--comm", "nccl"});
  EXPECT_JOB_OK(local);
  EXPECT_JOB_OK(nccl);
  EXPECT_NE(header(nccl.out).find(" ranks 1 backend nccl device cuda:0"), std::string::npos)
      << nccl.out;
  expectSameEpochs(local.out, nccl.out, 1e-6);
}

#ifdef DTCRT_MPIEXEC
std::vector<std::string> mpirun(int ranks) {
  std::vector<std::string> cmd = {DTCRT_MPIEXEC, DTCRT_MPIEXEC_NUMPROC_FLAG, std::to_string(ranks)};
  std::istringstream flags(DTCRT_MPIEXEC_FLAGS);
  for (std::string f; flags >> f;)
    cmd.push_back(f);
  return cmd;
}

// 2 ranks x batch 8 (NCCL, bootstrapped through MPI) train what 1 rank x
// batch 16 trains, uneven last steps included (N = 101).
TEST(Nccl, TwoRanksUnderMpirunTrainLikeOneRank) {
  DTC_NEED_GPUS(2);
  const std::vector<std::string> common = {"--device", "cuda", "--epochs", "3", "--data",
                                           "synthetic:101,50", "--shuffle", "off",
                                           "--progress", "off"};
  Job one = train(common + std::vector<std::string>{"--batch", "16"});
  Job two = runJob(mpirun(2) + std::vector<std::string>{kTrain} + common +
                       std::vector<std::string>{"--batch", "8"},
                   {}, 180);
  EXPECT_JOB_OK(one);
  EXPECT_JOB_OK(two);
  EXPECT_NE(header(two.out).find(" ranks 2 backend nccl device cuda:"), std::string::npos)
      << two.out;
  expectSameEpochs(one.out, two.out, 1e-4);
}

TEST(Nccl, AStoppedRankTimesOutAndEndsTheJob) {
  DTC_NEED_GPUS(2);
  Job job = runJob(mpirun(2) + std::vector<std::string>{"env", "DTCRT_TEST_SIGNAL=STOP",
                                                        "DTCRT_TEST_SIGNAL_RANK=1",
                                                        "DTCRT_TEST_SIGNAL_STEP=3", kTrain,
                                                        "--device", "cuda", "--comm-timeout",
                                                        "5", "--progress", "off"},
                   {}, 120);
  EXPECT_FALSE(job.timedOut) << job.out;
  EXPECT_NE(job.rc, 0);
  EXPECT_NE(job.out.find("train: error: rank 0: all-reduce of bucket 0 (fc.weight, fc.bias) did "
                         "not complete within 5 s; another rank may have died or stopped"),
            std::string::npos)
      << job.out;
  EXPECT_EQ(job.leftovers, 0) << job.out;
}
#endif

// torchrun's variables without MPI: the NCCL id goes through the TCP
// rendezvous on MASTER_ADDR:MASTER_PORT.
TEST(Nccl, TwoRanksFromTorchrunVariables) {
  DTC_NEED_GPUS(2);
  const std::vector<std::string> common = {"--device", "cuda", "--epochs", "2", "--data",
                                           "synthetic:128,50", "--shuffle", "off",
                                           "--progress", "off"};
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  std::vector<Job> jobs(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      jobs[size_t(r)] = train(common + std::vector<std::string>{"--batch", "8"},
                              {"RANK=" + std::to_string(r), "WORLD_SIZE=2",
                               "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=2",
                               "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port},
                              180);
    });
  for (auto &t : ranks)
    t.join();
  Job one = train(common + std::vector<std::string>{"--batch", "16"});
  EXPECT_JOB_OK(jobs[0]);
  EXPECT_JOB_OK(jobs[1]);
  EXPECT_JOB_OK(one);
  EXPECT_NE(header(jobs[0].out).find(" ranks 2 backend nccl device cuda:0"), std::string::npos)
      << jobs[0].out;
  EXPECT_EQ(header(jobs[1].out), "") << "only rank 0 prints";
  expectSameEpochs(one.out, jobs[0].out, 1e-4);
}

} // namespace
