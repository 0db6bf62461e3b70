//===- calibrate.cpp - train --calibrate ----------------------------------===//
//
// The measurements of calibrate.h. The kernels (GEMMs, convolutions,
// elementwise loops) are measured one rank at a time, the others waiting in
// a barrier: what one rank's kernels take with the node to themselves. The
// collectives and the contention factors are measured by every rank at
// once, a barrier before each size, sharing the machine as the ranks do in
// training; the factors carry what that sharing costs the kernels. Each
// result is the median of its samples after one warm-up (a small size's
// sample the mean of enough calls to last ~0.2 ms), then the maximum over
// the ranks.
//
//===----------------------------------------------------------------------===//
#include "train/calibrate.h"

#include "comm/comm_impl.h"
#include "data/data_cache.h"
#include "dtc/kernels.h"
#include "kernels/gemm/engine.h"
#include "kernels/simd.h"
#include "options/options.h"
#include "support/buffer.h"
#include "support/error.h"
#include "support/files.h"
#include "support/resident.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <malloc.h>
#include <system_error>
#include <unistd.h>

namespace dtc::rt {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The median over `samples` samples of fn's seconds, after one warm-up
// call; each sample times `inner` calls and takes their mean.
template <class Fn> double medianSeconds(int samples, int64_t inner, Fn &&fn) {
  fn();
  std::vector<double> t(static_cast<size_t>(samples));
  for (double &s : t) {
    const Clock::time_point t0 = Clock::now();
    for (int64_t i = 0; i < inner; ++i)
      fn();
    s = secondsSince(t0) / double(inner);
  }
  return median(std::move(t));
}

// Repetitions of a computation of `work` (flops or bytes): calls per sample
// so that a sample has at least `perSample` of it, and fewer samples for
// large sizes (the same on every rank: they depend on the size alone).
int64_t innerCalls(double work, double perSample) {
  return std::max<int64_t>(1, int64_t(std::ceil(perSample / std::max(work, 1.0))));
}
int samplesFor(double work, double large, double medium) {
  return work >= large ? 3 : work >= medium ? 5 : 9;
}

// "model name" of /proc/cpuinfo ("" when it has none, as on ARM).
std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, 10, "model name") == 0) {
      size_t colon = line.find(':');
      if (colon == std::string::npos)
        return "";
      size_t begin = line.find_first_not_of(" \t", colon + 1);
      return begin == std::string::npos ? "" : line.substr(begin);
    }
  return "";
}

// The ranks on rank 0's machine: those whose kernel booted as rank 0's did
// (/proc/sys/kernel/random/boot_id), whatever the launcher calls hosts
// (network namespaces and containers on one machine are separate hosts to
// MPI, and share its caches); MPI's local ranks where a rank cannot read it.
int machineRanks(CommBase &comm) {
  constexpr int64_t kId = 40;
  char id[kId] = {};
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  in.read(id, kId - 1);
  std::vector<char> ids(size_t(kId * comm.size()));
  comm.allgather(id, ids.data(), kId);
  int same = 0, unknown = 0;
  for (int r = 0; r < comm.size(); ++r) {
    const char *other = ids.data() + kId * r;
    unknown += other[0] == 0;
    same += std::memcmp(other, ids.data(), kId) == 0;
  }
  return unknown == 0 ? same : comm.localSize();
}

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0)
    return "";
  return name;
}

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", unsigned(c));
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string seconds(double s) { return fmt::format("{:.6g}", s); }

// Runs fn on rank 0; an Error there becomes an error of every rank (rank
// 0's message there, "rank 0 failed <what>" on the others), so that the
// ranks end together.
template <class Fn> void onRankZero(CommBase &comm, const char *what, Fn fn) {
  std::string error;
  if (comm.rank() == 0) {
    try {
      fn();
    } catch (const Error &e) {
      error = e.what();
      if (error.empty())
        error = "error";
    }
  }
  broadcastString(comm, error);
  if (!error.empty())
    throw CollectiveError(comm.rank() == 0 ? error : fmt::format("rank 0 failed {}", what));
}

// Where the profile goes: FILE, else the cache directory's
// machine-<N>ranks.json (the directory created). Rank 0 only.
std::string resolvePath(const Options &opts, int ranks) {
  if (!opts.calibratePath.empty())
    return opts.calibratePath;
  const std::string path = defaultMachinePath(ranks);
  if (path.empty()) {
    const char *env = std::getenv("DTC_CACHE_DIR");
    throw Error(fmt::format("--calibrate: no cache directory to write machine-{}ranks.json in "
                            "({}); give the file: --calibrate FILE",
                            ranks,
                            env && std::strcmp(env, "off") == 0
                                ? "DTC_CACHE_DIR is off"
                                : "none of DTC_CACHE_DIR, XDG_CACHE_HOME (absolute) and HOME "
                                  "(absolute) is set"));
  }
  const std::string dir = directoryOf(path);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error(fmt::format("--calibrate: cannot create the cache directory '{}': {}; give "
                            "the file: --calibrate FILE",
                            dir, ec.message()));
  return path;
}

// y[i] = a x[i] + y[i] over [lo, hi): a generated fused loop's work (built
// for the host there; here with an AVX2 clone).
DTC_SIMD_CLONES void axpyRange(float a, const float *__restrict x, float *__restrict y, int64_t lo,
                               int64_t hi) {
  for (int64_t i = lo; i < hi; ++i)
    y[i] = a * x[i] + y[i];
}

void fill(float *p, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i)
    p[i] = scale * float(int((i * 7919) % 17) - 8);
}

constexpr int64_t kGemmSizes[] = {16, 64, 256, 1024, 4096};
constexpr double kMaxGemmFlops = 4.3e9;

void measureGemm(MachineProfile &p) {
  struct Shape {
    int64_t m, n, k;
  };
  std::vector<Shape> shapes;
  int64_t maxA = 0, maxB = 0, maxC = 0;
  for (int64_t m : kGemmSizes)
    for (int64_t n : kGemmSizes)
      for (int64_t k : kGemmSizes)
        if (2.0 * double(m) * double(n) * double(k) <= kMaxGemmFlops) {
          shapes.push_back({m, n, k});
          maxA = std::max(maxA, m * k);
          maxB = std::max(maxB, k * n);
          maxC = std::max(maxC, m * n);
        }
  AlignedBuffer a(size_t(maxA) * 4), b(size_t(maxB) * 4), c(size_t(maxC) * 4);
  fill(a.as<float>(), maxA, 1e-2f);
  fill(b.as<float>(), maxB, 1e-2f);
  // gemm: each shape called again and again on the same buffers. gemm_cold:
  // the same with each call's operands the next ones along the buffers
  // (wrapping around), so that A, B and C come from beyond the caches a
  // repeated call keeps them in, as in a step that touches more memory
  // between two uses of them (CostModel.cpp, Machine::gemmSeconds).
  p.gemmColdBytes = (maxA + maxB + maxC) * 4;
  auto next = [](int64_t &at, int64_t size, int64_t most) {
    at += (size + 15) / 16 * 16; // (64-byte aligned, as the arena's)
    if (at + size > most)
      at = 0;
  };
  for (bool cold : {false, true})
    for (const Shape &s : shapes) {
      const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
      int64_t atA = 0, atB = 0, atC = 0;
      const double t = medianSeconds(samplesFor(flops, 1e9, 1e8), innerCalls(flops, 1e7), [&] {
        if (cold) {
          next(atA, s.m * s.k, maxA);
          next(atB, s.k * s.n, maxB);
          next(atC, s.m * s.n, maxC);
        }
        gemm_engine::gemm(false, false, s.m, s.n, s.k, 1.0f, a.as<float>() + atA, s.k,
                          b.as<float>() + atB, s.n, 0.0f, c.as<float>() + atC, s.n);
      });
      (cold ? p.gemmCold : p.gemm).push_back({s.m, s.n, s.k, t});
    }
}

void measureConv(MachineProfile &p) {
  struct Shape {
    int64_t c, o, h, w;
  };
  const Shape shapes[] = {{1, 32, 28, 28}, {32, 64, 14, 14}, {64, 128, 7, 7}, {64, 64, 32, 32}};
  const int64_t batch = 32, kh = 3, kw = 3;
  for (const Shape &s : shapes) {
    const int64_t ho = s.h, wo = s.w; // stride 1, padding 1
    const int64_t window[Window2d::kValues] = {s.c, s.h, s.w, s.o, kh, kw, 1,  1,
                                               1,   1,   1,   1,   1,  ho, wo, 0};
    AlignedBuffer x(size_t(batch * s.c * s.h * s.w) * 4), weight(size_t(s.o * s.c * kh * kw) * 4),
        bias(size_t(s.o) * 4), y(size_t(batch * s.o * ho * wo) * 4),
        cols(size_t(s.c * kh * kw * ho * wo) * 4);
    fill(x.as<float>(), batch * s.c * s.h * s.w, 1e-2f);
    fill(weight.as<float>(), s.o * s.c * kh * kw, 1e-2f);
    const int64_t flops = 2 * batch * s.o * ho * wo * s.c * kh * kw;
    const double t =
        medianSeconds(samplesFor(double(flops), 1e9, 1e8), innerCalls(double(flops), 1e7), [&] {
          kern::conv2d(HostContext{}, x.as<float>(), weight.as<float>(), bias.as<float>(),
                       y.as<float>(), cols.as<float>(), batch, window);
        });
    p.conv.push_back({flops, t});
  }
}

void measureElementwise(MachineProfile &p) {
  constexpr int64_t kMin = 1 << 10, kMax = int64_t(64) << 20; // bytes of an array
  AlignedBuffer x(static_cast<size_t>(kMax)), y(static_cast<size_t>(kMax));
  fill(x.as<float>(), kMax / 4, 1e-6f);
  const HostContext ctx{};
  for (int64_t arrayBytes = kMin; arrayBytes <= kMax; arrayBytes *= 4) {
    const int64_t n = arrayBytes / 4, bytes = 3 * 4 * n;
    const float *xs = x.as<float>();
    float *ys = y.as<float>();
    const double t =
        medianSeconds(samplesFor(double(bytes), 1e8, 1e7), innerCalls(double(bytes), 4e6), [&] {
          kern::forRanges(ctx, n, 1,
                          [&](int64_t lo, int64_t hi) { axpyRange(1e-3f, xs, ys, lo, hi); });
        });
    p.elementwise.push_back({bytes, t});
  }
}

// The optimizer updates as a step calls them, on one parameter of n floats:
// kern::sgdUpdate without and with momentum, kern::adamUpdate; arrays of
// 1 KiB .. 16 MiB (Adam's 112 MB a call at the largest: far past the
// caches, where a large model's update runs). A step's updates run at their
// own rate, not the streaming loop's: an in-cache SGD update moved its bytes
// about twice as fast as y = a x + y at the same bytes, Adam's square roots
// and divisions slower.
void measureUpdates(MachineProfile &p) {
  constexpr int64_t kMin = 1 << 10, kMax = int64_t(16) << 20; // bytes of an array
  AlignedBuffer w(static_cast<size_t>(kMax)), g(static_cast<size_t>(kMax)),
      m(static_cast<size_t>(kMax)), v(static_cast<size_t>(kMax));
  fill(w.as<float>(), kMax / 4, 1e-2f);
  fill(g.as<float>(), kMax / 4, 1e-3f);
  // (m and v start at zero, as AlignedBuffer's memory.)
  Hyper h{};
  h.lr = 1e-4f;
  h.beta1 = 0.9f;
  h.beta2 = 0.999f;
  h.eps = 1e-8f;
  h.step = 1;
  const HostContext ctx{};
  for (int states = 0; states < 3; ++states) {
    h.momentum = states == 1 ? 0.9f : 0.0f;
    for (int64_t arrayBytes = kMin; arrayBytes <= kMax; arrayBytes *= 4) {
      const int64_t n = arrayBytes / 4, bytes = (3 + 2 * states) * 4 * n;
      const UpdateItem item{w.as<float>(), g.as<float>(), states >= 1 ? m.as<float>() : nullptr,
                            states == 2 ? v.as<float>() : nullptr, n};
      const double t =
          medianSeconds(samplesFor(double(bytes), 1e8, 1e7), innerCalls(double(bytes), 4e6), [&] {
            if (states == 2)
              kern::adamUpdate(ctx, &item, 1, h, nullptr, true);
            else
              kern::sgdUpdate(ctx, &item, 1, h, nullptr);
          });
      p.updates[states].push_back({bytes, t});
    }
  }
}

// The normalizations and pooling as steps call them (kNormNames), by the
// bytes of their input x: batch norm and max pooling of N samples of 32
// channels of 28x28 (the CNN's first block) in torch's NCHW and in the
// blocked nChw16c of dtc-blocked-layout, N = 1 .. 64 (x 0.1 .. 6.4 MB);
// layer norm of rows of 256, 64 .. 16384 rows (64 KiB .. 16 MiB). They run
// at rates of their own against the streaming loop's (on an AMD EPYC, 5x
// its time for the bytes they move, and pooling 8x; on an Intel Xeon,
// pooling 3x): a table of fixed factors measured on one host mispriced the
// CNN by a third on another. norms: each call again on the same arrays;
// norms_cold: each call's arrays the next ones along kNormColdBytes of
// buffers (as gemm_cold: a step touches its working set between two uses
// of them, and a CNN's batch norms at one thread took 1.6x the repeated
// call's time in its step on an Intel Xeon, about a third of the way to
// the cold one).
constexpr int64_t kNormColdBytes = int64_t(192) << 20; // 4 arrays of 48 MiB

void measureNorms(MachineProfile &p) {
  constexpr int64_t kC = 32, kHW = 28, kMostN = 64, kD = 256, kMostRows = 16384;
  constexpr int64_t kMost = std::max(kMostN * kC * kHW * kHW, kMostRows * kD); // floats
  constexpr int64_t kArray = std::max(kMost, kNormColdBytes / 4 / 4);           // floats
  AlignedBuffer x(size_t(kArray) * 4), dy(size_t(kArray) * 4), y(size_t(kArray) * 4),
      dx(size_t(kArray) * 4), small(size_t(6 * kMostRows) * 4);
  fill(x.as<float>(), kArray, 1e-2f);
  fill(dy.as<float>(), kArray, 1e-3f);
  // (Statistics of up to kMostRows rows; parameters of up to kD channels.)
  float *mean = small.as<float>(), *var = mean + kMostRows, *weight = var + kMostRows,
        *bias = weight + kMostRows, *dweight = bias + kMostRows, *dbias = dweight + kMostRows;
  fill(weight, kMostRows, 1.0f);
  p.normsColdBytes = 4 * kArray * 4;
  const HostContext ctx{};
  // The arrays of the call being timed: the buffers' starts (norms), or the
  // next `floats` along each (norms_cold, 64-byte aligned, wrapping).
  float *xs = nullptr, *dys = nullptr, *ys = nullptr, *dxs = nullptr;
  for (bool cold : {false, true}) {
    auto time = [&](int name, int64_t inputBytes, auto &&call) {
      const int64_t floats = (inputBytes / 4 + 15) / 16 * 16;
      int64_t at = 0;
      auto point = [&] {
        xs = x.as<float>() + at;
        dys = dy.as<float>() + at;
        ys = y.as<float>() + at;
        dxs = dx.as<float>() + at;
      };
      point();
      const double moved = 3.0 * double(inputBytes); // (for the repetitions only)
      (cold ? p.normsCold : p.norms)[name].push_back(
          {inputBytes, medianSeconds(samplesFor(moved, 1e8, 1e7), innerCalls(moved, 4e6), [&] {
             if (cold) {
               at = at + 2 * floats <= kArray ? at + floats : 0;
               point();
             }
             call();
           })});
    };
    for (int64_t n = 1; n <= kMostN; n *= 4) {
      const int64_t bytes = n * kC * kHW * kHW * 4;
      for (int blocked = 0; blocked < 2; ++blocked) {
        const int64_t lanes = blocked ? 16 : 1;
        const int64_t layout = blocked ? Window2d::kInBlocked | Window2d::kOutBlocked : 0;
        // C, H, W, O, kH, kW, sH, sW, pH, pW, dH, dW, groups, Ho, Wo, layout
        const int64_t window[Window2d::kValues] = {kC, kHW, kHW, kC, 2, 2, 2, 2,
                                                   0,  0,   1,   1,  1, kHW / 2, kHW / 2, layout};
        const int base = blocked ? kNormBlocked : 0;
        time(base + 0, bytes, [&] {
          kern::batchNorm(ctx, xs, weight, bias, ys, mean, var, n, kC, kHW * kHW, 1e-5f, true,
                          lanes);
        });
        time(base + 1, bytes, [&] {
          kern::batchNormGrad(ctx, xs, dys, mean, var, weight, ys, dxs, dweight, dbias, n, kC,
                              kHW * kHW, 1e-5f, lanes);
        });
        // (pooled dy: the first quarter of dy)
        time(base + 2, bytes, [&] {
          kern::batchNormGradMaxPool(ctx, xs, dys, mean, var, weight, ys, dxs, dweight, dbias, n,
                                     kC, kHW * kHW, 1e-5f, lanes, window);
        });
        time(base + 3, bytes, [&] { kern::maxPool2d(ctx, xs, ys, n, window); });
        time(base + 4, bytes, [&] { kern::maxPool2dGrad(ctx, xs, dys, dxs, n, window); });
      }
    }
    for (int64_t rows = 64; rows <= kMostRows; rows *= 4) {
      const int64_t bytes = rows * kD * 4;
      time(kNormLayer, bytes, [&] {
        kern::layerNorm(ctx, xs, weight, bias, ys, mean, var, rows, kD, 1e-5f);
      });
      time(kNormLayer + 1, bytes, [&] {
        kern::layerNormGrad(ctx, xs, dys, mean, var, weight, dxs, dweight, dbias, rows, kD);
      });
    }
  }
}

// Runs fn on each rank in turn (rank 0 first), the others waiting in a
// barrier (a communication thread in MPI_Barrier: with mpi_yield_when_idle,
// which Open MPI sets on an oversubscribed node, it yields its core).
template <class Fn> void oneRankAtATime(CommBase &comm, Fn &&fn) {
  for (int r = 0; r < comm.size(); ++r) {
    comm.barrier();
    if (comm.rank() == r)
      fn();
  }
  comm.barrier();
}

// The largest of every rank's `v`.
double maxAcross(CommBase &comm, double v) {
  if (comm.size() == 1)
    return v;
  std::vector<double> all(size_t(comm.size()));
  comm.allgather(&v, all.data(), sizeof v);
  return *std::max_element(all.begin(), all.end());
}

// The reference GEMM (kReferenceGemm^3) on buffers of its own.
struct ReferenceGemm {
  static constexpr int64_t n = kReferenceGemm;
  AlignedBuffer a{size_t(n * n) * 4}, b{size_t(n * n) * 4}, c{size_t(n * n) * 4};
  ReferenceGemm() {
    fill(a.as<float>(), n * n, 1e-2f);
    fill(b.as<float>(), n * n, 1e-2f);
  }
  void operator()() {
    gemm_engine::gemm(false, false, n, n, n, 1.0f, a.as<float>(), n, b.as<float>(), n, 0.0f,
                      c.as<float>(), n);
  }
};


// The GEMMs, convolutions and elementwise loops, in passes over all of
// them; each time is the median of 3 passes' medians. A pass takes a
// second or two: on a host whose cores are sometimes busy with other work
// (a shared virtual machine), one pass's rates measured half another's,
// and a step's hundreds of milliseconds see their mean. A slow period of
// several seconds, though, spans two passes of three: two busy loops for
// the first 6 s of a calibration at 1 rank x 2 threads made the GEMMs
// twice as slow, and the GPT's predicted step 37.5 ms where it trains in
// 22. So each pass lies between two measurements of the reference GEMM
// (the median of 21), and a pass whose slower one is more than kPassDrift
// times the fastest of all of them is left out and made again, until 3
// are kept (kMostPasses in all; then the last 3, the host being that
// unsteady). One rank at a time: measured by all ranks at once, a shape's
// time depended on whether the slowest rank happened to share a core
// while it ran (three ranks on two cores measured the 32x14x14
// convolution at 35-42 GFLOP/s in half of the calibrations and 86-112 in
// the other half); `compute` (below), measured over whole rounds on every
// rank at once, carries that sharing.
void measureKernels(CommBase &comm, MachineProfile &p) {
  constexpr int kPasses = 3, kMostPasses = 8;
  std::vector<MachineProfile> passes;
  std::vector<size_t> kept; // of passes
  int leftOut = 0;
  oneRankAtATime(comm, [&] {
    ReferenceGemm reference;
    std::vector<double> slower; // each pass's slower reference
    double fastest = HUGE_VAL;
    for (;;) {
      kept = steadyPasses(slower, fastest);
      if (kept.size() >= size_t(kPasses))
        break;
      if (passes.size() == size_t(kMostPasses)) {
        kept.clear();
        for (size_t i = kMostPasses - kPasses; i < size_t(kMostPasses); ++i)
          kept.push_back(i); // the last kPasses
        break;
      }
      MachineProfile q;
      const double before = medianSeconds(21, 1, reference);
      measureGemm(q);
      if (passes.empty()) {
        // The GEMM engine keeps per-thread workspaces once it has run larger
        // shapes on the step's threads (here a glibc arena of the worker
        // thread: 3 MB more at 2 threads, none at 1); they belong to the
        // process's base. Freed memory is returned first (malloc_trim): what
        // the engine freed is not its own.
        malloc_trim(0);
        p.processBytes = std::max(p.processBytes, residentBytes());
      }
      measureConv(q);
      measureElementwise(q);
      measureUpdates(q);
      measureNorms(q);
      const double after = medianSeconds(21, 1, reference);
      passes.push_back(std::move(q));
      slower.push_back(std::max(before, after));
      fastest = std::min({fastest, before, after});
    }
    leftOut = int(passes.size() - kept.size());
    p.referenceFastest = fastest;
  });
  p.kernelPasses = int(maxAcross(comm, double(passes.size())));
  p.passesLeftOut = int(maxAcross(comm, double(leftOut)));
  // list(profile): one of a profile's lists.
  auto middle = [&](auto list, auto seconds) {
    auto &into = list(p);
    into = list(passes[kept[0]]);
    for (size_t i = 0; i < into.size(); ++i) {
      double t[kPasses];
      for (int j = 0; j < kPasses; ++j)
        t[j] = list(passes[kept[size_t(j)]])[i].*seconds;
      std::sort(t, t + kPasses);
      into[i].*seconds = t[kPasses / 2];
    }
  };
  middle([](MachineProfile &q) -> auto & { return q.gemm; }, &MachineProfile::Gemm::seconds);
  middle([](MachineProfile &q) -> auto & { return q.gemmCold; }, &MachineProfile::Gemm::seconds);
  p.gemmColdBytes = passes[kept[0]].gemmColdBytes;
  middle([](MachineProfile &q) -> auto & { return q.conv; }, &MachineProfile::Work::seconds);
  middle([](MachineProfile &q) -> auto & { return q.elementwise; },
         &MachineProfile::Work::seconds);
  for (int states = 0; states < 3; ++states)
    middle([states](MachineProfile &q) -> auto & { return q.updates[states]; },
           &MachineProfile::Work::seconds);
  for (int name = 0; name < kNorms; ++name) {
    middle([name](MachineProfile &q) -> auto & { return q.norms[name]; },
           &MachineProfile::Work::seconds);
    middle([name](MachineProfile &q) -> auto & { return q.normsCold[name]; },
           &MachineProfile::Work::seconds);
  }
  p.normsColdBytes = passes[kept[0]].normsColdBytes;
}

void measureCollectives(CommBase &comm, MachineProfile &p) {
  // (256 KiB: the size of a block's parameters in small models, which
  // stages 2 and 3 reduce and gather one block at a time.)
  const int64_t sizes[] = {int64_t(4) << 10,  int64_t(64) << 10, int64_t(256) << 10,
                           int64_t(1) << 20,  int64_t(4) << 20,  int64_t(16) << 20,
                           int64_t(64) << 20};
  constexpr int kSizes = sizeof(sizes) / sizeof(sizes[0]);
  const int64_t ranks = comm.size();
  AlignedBuffer buffer(static_cast<size_t>(sizes[kSizes - 1]));
  float *data = buffer.as<float>();
  fill(data, sizes[kSizes - 1] / 4, 1e-6f);
  auto samples = [](int64_t bytes) {
    return bytes >= (int64_t(16) << 20) ? 5 : bytes >= (int64_t(1) << 20) ? 7 : 21;
  };
  // collectives: each one back to back. collectives_cold: each started
  // right after kAfter reference GEMMs on this thread, as a step starts one
  // after its kernels, and timed from its start to its wait's return: the
  // communication thread has gone to sleep meanwhile (with deferred
  // starts, the GPT's stage-3 gathers of 165 KB took 35-42 us in a step,
  // 8-11 us back to back). The buffer is the one of the back-to-back
  // calls: on buffers out of the caches, the same took 1.5-5x as long, and
  // priced so the seed MLP's all-reduce of gradients its backward has just
  // written read 18% slow.
  constexpr int kAfter = 3;
  ReferenceGemm gemm;
  for (int kind = 0; kind < 3; ++kind)
    for (int i = 0; i < kSizes; ++i) {
      const int bucket = i;
      const int64_t floats = sizes[i] / 4, shard = floats / ranks;
      float *mine = data + comm.rank() * shard;
      // (reduce-scatter: the input, shard x ranks floats, reduced in place;
      // all-gather: the gathered output, shard x ranks floats)
      const int64_t bytes = kind == 0 ? floats * 4 : shard * ranks * 4;
      auto call = [&] {
        comm.wait(kind == 0   ? comm.allreduceStart(bucket, data, floats)
                  : kind == 1 ? comm.reduceScatterStart(bucket, data, mine, shard)
                              : comm.allgatherStart(bucket, data, shard));
      };
      comm.barrier();
      const double t = medianSeconds(samples(bytes), 1, call);
      std::vector<double> cold;
      comm.barrier();
      for (int r = 0; r < samples(bytes); ++r) {
        for (int g = 0; g < kAfter; ++g)
          gemm();
        const Clock::time_point began = Clock::now();
        call();
        cold.push_back(secondsSince(began));
      }
      std::vector<MachineProfile::Work> *lists[3][2] = {
          {&p.allReduce, &p.allReduceCold},
          {&p.reduceScatter, &p.reduceScatterCold},
          {&p.allGather, &p.allGatherCold}};
      lists[kind][0]->push_back({bytes, t});
      lists[kind][1]->push_back({bytes, median(cold)});
    }
}

// Rounds of `perRound` reference GEMMs (the same number on every rank, as
// a step's work is), each ended by a step's synchronization: this rank's
// seconds a GEMM in each of `rounds` rounds after one to settle.
std::vector<double> sustainedRounds(CommBase &comm, int rounds, double syncSeconds,
                                    int64_t perRound) {
  ReferenceGemm gemm;
  constexpr int64_t kSyncFloats = 1024;
  AlignedBuffer sync(size_t(kSyncFloats) * 4);
  fill(sync.as<float>(), kSyncFloats, 1e-6f);
  std::vector<double> times;
  comm.barrier();
  for (int round = 0; round <= rounds; ++round) {
    const Clock::time_point began = Clock::now();
    for (int64_t i = 0; i < perRound; ++i)
      gemm();
    if (comm.size() > 1)
      comm.wait(comm.allreduceStart(0, sync.as<float>(), kSyncFloats));
    if (round > 0)
      times.push_back(std::max(0.0, secondsSince(began) - syncSeconds) / double(perRound));
  }
  return times;
}

// The median round (a round can fall in a slow phase of a shared host, or
// a fast one), the largest over the ranks.
double sustainedGemmSeconds(CommBase &comm, int rounds, double syncSeconds, int64_t perRound) {
  return maxAcross(comm, median(sustainedRounds(comm, rounds, syncSeconds, perRound)));
}

// GEMMs a round: rounds of `seconds` at `gemmSeconds` a GEMM.
int64_t gemmsFor(double seconds, double gemmSeconds) {
  return std::clamp<int64_t>(int64_t(seconds / std::max(gemmSeconds, 1e-9)), 5, 100000);
}

// The rounds' lengths of compute_rounds, in seconds alone.
constexpr double kComputeRounds[] = {0.005, 0.01, 0.02, 0.05, 0.1};

// The reference GEMM's median alone (of 21), one rank at a time, as the
// kernels were measured: this rank's.
double referenceBurst(CommBase &comm) {
  ReferenceGemm gemm;
  double burst = 0;
  oneRankAtATime(comm, [&] { burst = medianSeconds(21, 1, gemm); });
  return burst;
}

// What the short measurements above do not see, as factors (docs/runtime.md,
// "Calibration"): a step's kernels run back to back for tens of
// milliseconds, on every rank at once, and (unless starts are deferred)
// beside the communication thread's collectives, where the kernels were
// measured one rank at a time. With more ranks and threads than cores
// (ranks sharing a node's cores, a loaded host) a sustained run on every
// rank gets less of a core than a median of short ones on one.
//   compute                 rounds of 50 ms of 256^3 GEMMs back to back,
//                           every rank at once, each round ended as a step
//                           ends, by a small blocking all-reduce
//                           (sustainedGemmSeconds, the file's
//                           sustained_gemm_256): a round's time (less that
//                           all-reduce's) against its GEMMs' median on one
//                           rank at a time, as the kernels were measured
//                           (the median of nine rounds). Ranks
//                           that meet at every step keep the scheduler's
//                           placement within it: 3 ranks on 2 cores measured
//                           x1.75-2.05 so (one rank has a core, two share the
//                           other), x1.56-1.8 in one continuous run, where
//                           the scheduler moves them.
//   compute_rounds          the same by the round's length (kComputeRounds:
//                           5 to 100 ms alone), the median of eleven rounds:
//                           the scheduler keeps the placement for tens of
//                           milliseconds, then moves the ranks about (3 ranks
//                           on 2 cores: x2.0 at 3-20 ms, x1.85 at 50, x1.65
//                           at 100 ms), so a step's factor depends on how
//                           long it computes between its synchronizations
//   compute_communicating   the same GEMMs while 1 MiB all-reduces run one
//                           after another (6 of them, the GEMMs going on
//                           until they are done), against the same median
//                           (at least `compute`)
//   communication_beside    reduce-scatters of 256 KiB, 1, 4 and 16 MiB
//                           beside compute (each started, GEMMs until it has
//                           finished; the mean of the middle 9 of 15),
//                           next to the ones measureCollectives measured
//                           alone: how much longer a collective takes while
//                           the rank computes than while it waits
//   communication           the 256 KiB one's factor (beside / alone)
// Without collectives (1 rank) or with deferred starts (the collectives run
// at their waits, beside no compute) compute_communicating is compute,
// communication_beside empty and communication 1.
//
// One measurement of the factors (measureContention) against `burst`, the
// reference GEMM's time alone (the ranks' largest). `slowest`: this rank's
// slowest reference GEMM alone, measured again between the parts.
void contentionOnce(CommBase &comm, MachineProfile &p, double burst, double &slowest) {
  auto check = [&] { slowest = std::max(slowest, referenceBurst(comm)); };
  ReferenceGemm gemm;
  constexpr int kBucket = 0;
  constexpr int64_t kFloats = (int64_t(1) << 20) / 4;
  AlignedBuffer buffer(size_t(kFloats) * 4);
  fill(buffer.as<float>(), kFloats, 1e-6f);
  constexpr int64_t kSyncFloats = 1024;
  double syncAlone = 0;
  for (const MachineProfile::Work &w : p.allReduce)
    if (w.amount == kSyncFloats * 4)
      syncAlone = w.seconds;
  p.sustainedGemm = sustainedGemmSeconds(comm, 9, syncAlone, gemmsFor(0.05, burst));
  check();
  p.computeContention = std::max(1.0, p.sustainedGemm / burst);
  // The same by a round's length: a step's kernels between two of its
  // synchronizations (the median round, as the program reports the median
  // step).
  for (double seconds : kComputeRounds) {
    const int64_t perRound = gemmsFor(seconds, burst);
    const double gemmSeconds = sustainedGemmSeconds(comm, 11, syncAlone, perRound);
    p.computeRounds.push_back({double(perRound) * burst, std::max(1.0, gemmSeconds / burst)});
    check();
  }
  p.communicatingContention = p.computeContention;
  if (comm.size() == 1 || comm.deferredStarts())
    return;
  const int64_t calls = std::clamp<int64_t>(int64_t(0.2 / burst), 20, 100000);
  constexpr int kAllReduces = 6;
  comm.barrier();
  int started = 1, finished = 0;
  int64_t done = 0;
  Clock::time_point t0 = Clock::now();
  Clock::time_point since = t0;
  Request r = comm.allreduceStart(kBucket, buffer.as<float>(), kFloats);
  while (finished < kAllReduces || done < calls) {
    gemm();
    ++done;
    if (finished == started ||
        comm.finishedAt(CollectiveKind::Allreduce, kBucket) <= since)
      continue;
    comm.wait(r);
    ++finished;
    if (started < kAllReduces) {
      since = Clock::now();
      r = comm.allreduceStart(kBucket, buffer.as<float>(), kFloats);
      ++started;
    }
  }
  p.communicatingContention =
      std::max(p.computeContention, secondsSince(t0) / (double(done) * burst));
  check();
  // Collectives beside compute: a reduce-scatter started and GEMMs until it
  // has finished; its time (start to finish) against the same measured
  // alone, at 256 KiB (latency- and CPU-bound on any link) up to 16 MiB
  // (on a slow link, bound by the link, which drains the socket's buffers
  // while the GEMMs run). A round's time depends on whether the
  // communication thread waits for a core (tens of milliseconds) or not:
  // the mean of the middle three fifths, what a step's many collectives
  // meet on average.
  constexpr int kRounds = 15;
  constexpr int64_t kLargest = (int64_t(16) << 20) / 4;
  AlignedBuffer all(size_t(kLargest) * 4);
  fill(all.as<float>(), kLargest, 1e-6f);
  for (int64_t bytes : {int64_t(256) << 10, int64_t(1) << 20, int64_t(4) << 20,
                        int64_t(16) << 20}) {
    const int64_t shard = bytes / 4 / comm.size();
    double alone = 0;
    for (const MachineProfile::Work &w : p.reduceScatter)
      if (w.amount == shard * comm.size() * 4)
        alone = w.seconds;
    if (alone <= 0)
      continue;
    float *mine = all.as<float>() + comm.rank() * shard;
    std::vector<double> durations;
    for (int i = 0; i < kRounds; ++i) {
      comm.barrier();
      const Clock::time_point began = Clock::now();
      Request rs = comm.reduceScatterStart(kBucket, all.as<float>(), mine, shard);
      while (comm.finishedAt(CollectiveKind::ReduceScatter, kBucket) < began &&
             secondsSince(began) < 2.0) // (then the wait's timeout applies)
        gemm();
      comm.wait(rs);
      durations.push_back(std::chrono::duration<double>(
                              comm.finishedAt(CollectiveKind::ReduceScatter, kBucket) - began)
                              .count());
    }
    std::sort(durations.begin(), durations.end());
    double sum = 0;
    for (int i = kRounds / 5; i < kRounds - kRounds / 5; ++i)
      sum += durations[size_t(i)];
    const double beside =
        std::max(alone, sum / double(kRounds - 2 * (kRounds / 5)));
    p.communicationBeside.push_back({shard * comm.size() * 4, alone, beside});
    check();
  }
}

// The factors, measured again when the host changed speed under them, as
// the kernel passes are (measureKernels): the reference GEMM alone before,
// between the parts of (sustained, each round length, beside all-reduces,
// each reduce-scatter size) and after the measurement, on each rank, the
// slowest against the fastest of the kernel passes' on that rank. A
// measurement whose slowest is more than kPassDrift times that is made
// again (kMostContentionTries in all; then the steadiest is kept). A slow
// period of the host under the sustained GEMMs (and the burst with them)
// left the factors about right but made sustained_gemm_256 twice the
// host's usual: a program planned from the file then read "host x0.52"
// after training, its speed against a calibration that was not the host's.
void measureContention(CommBase &comm, MachineProfile &p) {
  constexpr int kMostContentionTries = 3;
  const MachineProfile base = p;
  MachineProfile steadiest;
  double least = HUGE_VAL;
  for (int tries = 1;; ++tries) {
    MachineProfile q = base;
    double slowest = referenceBurst(comm);
    contentionOnce(comm, q, maxAcross(comm, slowest), slowest); // (the same GEMMs on every rank)
    const double drift = maxAcross(comm, slowest / std::max(p.referenceFastest, 1e-12));
    if (drift < least) {
      least = drift;
      steadiest = std::move(q);
    }
    const bool steady = drift <= kPassDrift;
    if (steady || tries == kMostContentionTries) {
      p = std::move(steadiest);
      p.contentionTries = tries;
      p.contentionSteady = steady;
      return;
    }
  }
}

// Every rank's times replaced by their maximum over the ranks (and the
// process's resident set likewise).
void maxOverRanks(CommBase &comm, MachineProfile &p) {
  if (comm.size() == 1)
    return;
  std::vector<double *> slots;
  for (std::vector<MachineProfile::Gemm> *list : {&p.gemm, &p.gemmCold})
    for (MachineProfile::Gemm &g : *list)
      slots.push_back(&g.seconds);
  for (std::vector<MachineProfile::Work> *list :
       {&p.conv, &p.elementwise, &p.updates[0], &p.updates[1], &p.updates[2], &p.allReduce,
        &p.reduceScatter, &p.allGather, &p.allReduceCold, &p.reduceScatterCold,
        &p.allGatherCold})
    for (MachineProfile::Work &w : *list)
      slots.push_back(&w.seconds);
  for (auto *lists : {&p.norms, &p.normsCold})
    for (std::vector<MachineProfile::Work> &list : *lists)
      for (MachineProfile::Work &w : list)
        slots.push_back(&w.seconds);
  // (sustainedGemm is the ranks' largest already, and `compute` with it.)
  for (double *factor :
       {&p.computeContention, &p.communicatingContention, &p.communicationContention})
    slots.push_back(factor);
  for (MachineProfile::Beside &b : p.communicationBeside) {
    slots.push_back(&b.alone);
    slots.push_back(&b.beside);
  }
  std::vector<double> mine;
  mine.push_back(double(p.processBytes));
  for (double *s : slots)
    mine.push_back(*s);
  std::vector<double> all(mine.size() * size_t(comm.size()));
  comm.allgather(mine.data(), all.data(), int64_t(mine.size() * sizeof(double)));
  for (size_t i = 0; i < mine.size(); ++i)
    for (int r = 0; r < comm.size(); ++r)
      mine[i] = std::max(mine[i], all[size_t(r) * mine.size() + i]);
  p.processBytes = int64_t(mine[0]);
  for (size_t i = 0; i < slots.size(); ++i)
    *slots[i] = mine[i + 1];
}

std::string mib(int64_t bytes) {
  return bytes >= (int64_t(1) << 20) ? fmt::format("{} MiB", bytes >> 20)
                                     : fmt::format("{} KiB", bytes >> 10);
}

// "3.1 ms", "12.4 us"
std::string duration(double s) {
  return s >= 1      ? fmt::format("{:.3g} s", s)
         : s >= 1e-3 ? fmt::format("{:.3g} ms", s * 1e3)
                     : fmt::format("{:.3g} us", s * 1e6);
}

// "all-reduce 4 MiB 3.1 ms" (the 4 MiB entry, else the last).
std::string collectiveSummary(const char *name, const std::vector<MachineProfile::Work> &list) {
  if (list.empty())
    return "";
  const MachineProfile::Work *pick = &list.back();
  for (const MachineProfile::Work &w : list)
    if (w.amount >= (int64_t(4) << 20)) {
      pick = &w;
      break;
    }
  return fmt::format(", {} {} {}", name, mib(pick->amount), duration(pick->seconds));
}

// The first words of the summary line: the rates' range over the sizes.
std::string rateRange(const std::vector<double> &rates) {
  if (rates.empty())
    return "-";
  const auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
  return fmt::format("{:.3g}-{:.3g}", *lo, *hi);
}

// "x13.4 at 256 KiB .. x1.13 at 16 MiB" (the factor of each end), or
// "x1.00" where none was measured.
std::string besideSummary(const MachineProfile &p) {
  const std::vector<MachineProfile::Beside> &b = p.communicationBeside;
  if (b.empty())
    return fmt::format("x{:.2f}", p.communicationContention);
  return fmt::format("x{:.3g} at {} .. x{:.3g} at {}", b.front().beside / b.front().alone,
                     mib(b.front().bytes), b.back().beside / b.back().alone, mib(b.back().bytes));
}

// "x2.04 at 5 ms .. x1.66 at 100 ms" (compute_rounds' ends).
std::string roundsSummary(const MachineProfile &p) {
  const std::vector<MachineProfile::Round> &r = p.computeRounds;
  if (r.empty())
    return "no rounds";
  return fmt::format("x{:.2f} at {:.0f} ms .. x{:.2f} at {:.0f} ms", r.front().factor,
                     r.front().alone * 1e3, r.back().factor, r.back().alone * 1e3);
}

std::string summary(const MachineProfile &p, double elapsed, const std::string &path) {
  std::vector<double> gemm, conv;
  for (const MachineProfile::Gemm &g : p.gemm)
    gemm.push_back(2.0 * double(g.m) * double(g.n) * double(g.k) / g.seconds / 1e9);
  for (const MachineProfile::Work &w : p.conv)
    conv.push_back(double(w.amount) / w.seconds / 1e9);
  const MachineProfile::Work &stream = p.elementwise.back();
  // "updates 61/58/45 GB/s (16 MiB)": SGD, with momentum, Adam at the largest.
  std::string updates = "updates ";
  for (int states = 0; states < 3; ++states) {
    const MachineProfile::Work &u = p.updates[states].back();
    updates += fmt::format("{}{:.3g}", states ? "/" : "", double(u.amount) / u.seconds / 1e9);
  }
  updates += fmt::format(" GB/s ({})", mib(p.updates[0].back().amount / 3));
  // ", kernels: 5 passes, 2 left out (the host changed speed under them)"
  const std::string again =
      (p.passesLeftOut == 0 ? ""
                            : fmt::format(", kernels: {} passes, {} left out (the host changed "
                                          "speed under them)",
                                          p.kernelPasses, p.passesLeftOut)) +
      (p.contentionTries == 1 ? ""
       : p.contentionSteady
           ? fmt::format(", sustained: measured {} times (the host changed speed under {})",
                         p.contentionTries, p.contentionTries - 1)
           : fmt::format(", sustained: measured {} times (the host changed speed under each; "
                         "the steadiest kept)",
                         p.contentionTries));
  return fmt::format("calibrated {} rank{} x {} thread{} ({}{}): GEMM {} GFLOP/s, conv {} GFLOP/s, "
                     "elementwise {:.3g} GB/s ({}), {}{}{}{}, sustained x{:.2f} ({}; beside "
                     "collectives x{:.2f}; collectives beside it {}), process {:.1f} MB, {:.1f} "
                     "s{}; wrote {}",
                     p.ranks, p.ranks == 1 ? "" : "s", p.threads, p.threads == 1 ? "" : "s",
                     p.backend, p.deferredStarts ? ", deferred starts" : "", rateRange(gemm),
                     rateRange(conv), double(stream.amount) / stream.seconds / 1e9,
                     mib(stream.amount / 3), updates, collectiveSummary("all-reduce", p.allReduce),
                     collectiveSummary("reduce-scatter", p.reduceScatter),
                     collectiveSummary("all-gather", p.allGather), p.computeContention,
                     roundsSummary(p), p.communicatingContention, besideSummary(p),
                     double(p.processBytes) / 1e6, elapsed, again, path);
}

} // namespace

std::vector<size_t> steadyPasses(const std::vector<double> &slower, double fastest) {
  std::vector<size_t> kept;
  for (size_t i = 0; i < slower.size(); ++i)
    if (slower[i] <= kPassDrift * fastest)
      kept.push_back(i);
  return kept;
}

std::string machineJson(const MachineProfile &p) {
  std::string out = "{\n";
  out += "  \"format\": \"dtc-machine/1\",\n";
  out += "  \"written_by\": \"train --calibrate\",\n";
  out += fmt::format("  \"date\": {},\n", jsonString(p.date));
  out += fmt::format("  \"host\": {},\n", jsonString(p.host));
  out += fmt::format("  \"cpu\": {},\n", jsonString(p.cpu));
  out += fmt::format("  \"ranks\": {},\n", p.ranks);
  out += fmt::format("  \"local_ranks\": {},\n", p.localRanks);
  out += fmt::format("  \"machine_ranks\": {},\n", p.machineRanks);
  out += fmt::format("  \"threads\": {},\n", p.threads);
  out += fmt::format("  \"backend\": {},\n", jsonString(p.backend));
  out += fmt::format("  \"deferred_starts\": {},\n", p.deferredStarts ? "true" : "false");
  out += fmt::format("  \"process_bytes\": {},\n", p.processBytes);
  auto list = [&](const std::vector<std::string> &items, const char *indent) {
    std::string s = "[";
    for (size_t i = 0; i < items.size(); ++i)
      s += fmt::format("{}\n{}  {}", i ? "," : "", indent, items[i]);
    return s + (items.empty() ? "]" : fmt::format("\n{}]", indent));
  };
  auto works = [&](const std::vector<MachineProfile::Work> &ws, const char *key,
                   const char *indent) {
    std::vector<std::string> items;
    for (const MachineProfile::Work &w : ws)
      items.push_back(
          fmt::format("{{\"{}\": {}, \"seconds\": {}}}", key, w.amount, seconds(w.seconds)));
    return list(items, indent);
  };
  auto shapes = [&](const std::vector<MachineProfile::Gemm> &gs) {
    std::vector<std::string> items;
    for (const MachineProfile::Gemm &g : gs)
      items.push_back(fmt::format("{{\"m\": {}, \"n\": {}, \"k\": {}, \"seconds\": {}}}", g.m,
                                  g.n, g.k, seconds(g.seconds)));
    return list(items, "  ");
  };
  out += fmt::format("  \"gemm\": {},\n", shapes(p.gemm));
  out += fmt::format("  \"gemm_cold\": {{\"bytes\": {}, \"shapes\": {}}},\n", p.gemmColdBytes,
                     shapes(p.gemmCold));
  out += fmt::format("  \"conv\": {},\n", works(p.conv, "flops", "  "));
  out += fmt::format("  \"elementwise\": {},\n", works(p.elementwise, "bytes", "  "));
  out += "  \"updates\": {\n";
  for (int states = 0; states < 3; ++states)
    out += fmt::format("    \"{}\": {}{}\n", kUpdateNames[states],
                       works(p.updates[states], "bytes", "    "), states < 2 ? "," : "");
  out += "  },\n";
  auto norms = [&](const std::vector<MachineProfile::Work>(&lists)[kNorms], const char *indent) {
    const std::string inner = std::string(indent) + "  ";
    std::string s = "{\n";
    for (int name = 0; name < kNorms; ++name)
      s += fmt::format("{}\"{}\": {}{}\n", inner, kNormNames[name],
                       works(lists[name], "bytes", inner.c_str()), name + 1 < kNorms ? "," : "");
    return s + indent + "}";
  };
  out += fmt::format("  \"norms\": {},\n", norms(p.norms, "  "));
  out += fmt::format("  \"norms_cold\": {{\"bytes\": {}, \"lists\": {}}},\n", p.normsColdBytes,
                     norms(p.normsCold, "  "));
  auto collectives = [&](const char *key, const std::vector<MachineProfile::Work> &allReduce,
                         const std::vector<MachineProfile::Work> &reduceScatter,
                         const std::vector<MachineProfile::Work> &allGather) {
    out += fmt::format("  \"{}\": {{\n", key);
    out += fmt::format("    \"all_reduce\": {},\n", works(allReduce, "bytes", "    "));
    out += fmt::format("    \"reduce_scatter\": {},\n", works(reduceScatter, "bytes", "    "));
    out += fmt::format("    \"all_gather\": {}\n", works(allGather, "bytes", "    "));
    out += "  },\n";
  };
  collectives("collectives", p.allReduce, p.reduceScatter, p.allGather);
  collectives("collectives_cold", p.allReduceCold, p.reduceScatterCold, p.allGatherCold);
  std::vector<std::string> beside;
  for (const MachineProfile::Beside &b : p.communicationBeside)
    beside.push_back(fmt::format("{{\"bytes\": {}, \"alone\": {}, \"beside\": {}}}", b.bytes,
                                 seconds(b.alone), seconds(b.beside)));
  std::vector<std::string> rounds;
  for (const MachineProfile::Round &r : p.computeRounds)
    rounds.push_back(
        fmt::format("{{\"alone\": {}, \"factor\": {:.4f}}}", seconds(r.alone), r.factor));
  out += fmt::format("  \"contention\": {{\"compute\": {:.4f}, \"compute_communicating\": "
                     "{:.4f}, \"communication\": {:.4f},\n    \"sustained_gemm_256\": {},\n"
                     "    \"compute_rounds\": {},\n    \"communication_beside\": {}}}\n",
                     p.computeContention, p.communicatingContention, p.communicationContention,
                     seconds(p.sustainedGemm), list(rounds, "    "), list(beside, "    "));
  out += "}\n";
  return out;
}

std::string defaultMachinePath(int ranks) {
  const std::string dir = defaultDataCacheDir();
  return dir.empty() ? "" : fmt::format("{}/machine-{}ranks.json", dir, ranks);
}

double hostSpeedAgainst(CommBase &comm, double referenceSeconds) {
  // Rounds of 0.1 s at the calibrated speed (--calibrate's 50 ms at the
  // speed alone, where `compute` is about 2), at most 0.25 s at the
  // slowest rank's speed now (a calibration far faster than this host).
  ReferenceGemm gemm;
  const double now = maxAcross(comm, medianSeconds(9, 1, gemm));
  const int64_t perRound =
      std::min(gemmsFor(0.1, referenceSeconds), gemmsFor(0.25, now));
  return sustainedGemmSeconds(comm, 5, 0, perRound) / referenceSeconds;
}

int runCalibration(const Options &opts, CommBase &comm, int threads, bool cuda) {
  const Clock::time_point start = Clock::now();
  MachineProfile p;
  // The process's base: its resident set before any buffer of ours, once
  // the GEMM engine has started (its threads, its first kernel), as it has
  // in a step.
  {
    float a[64 * 64] = {}, b[64 * 64] = {}, c[64 * 64];
    gemm_engine::gemm(false, false, 64, 64, 64, 1.0f, a, 64, b, 64, 0.0f, c, 64);
  }
  p.processBytes = residentBytes();
  if (cuda)
    throw CollectiveError("--calibrate measures the CPU (its GEMMs, loops and collectives), "
                          "but this run would use the CUDA steps; give --device cpu");
  std::string path;
  onRankZero(comm, "to prepare the calibration file", [&] {
    path = resolvePath(opts, comm.size());
    checkWritable(path, "calibration file", "--calibrate");
  });
  p.date = utcNow();
  p.host = hostName();
  p.cpu = cpuModel();
  p.backend = comm.backend();
  p.ranks = comm.size();
  p.localRanks = comm.localSize();
  p.machineRanks = machineRanks(comm);
  p.threads = threads;
  p.deferredStarts = comm.deferredStarts();
  measureKernels(comm, p);
  measureCollectives(comm, p);
  measureContention(comm, p);
  comm.barrier();
  maxOverRanks(comm, p);
  // `communication`: the smallest size's factor (what files had before the
  // sizes were measured).
  if (!p.communicationBeside.empty())
    p.communicationContention =
        p.communicationBeside.front().beside / p.communicationBeside.front().alone;
  onRankZero(comm, "to write the calibration file", [&] {
    AtomicFile out(path, "calibration file");
    out.write(machineJson(p));
    out.commit();
  });
  if (comm.rank() == 0 && !opts.quiet) {
    fmt::print("{}\n", summary(p, secondsSince(start), path));
    std::fflush(stdout);
  }
  return 0;
}

} // namespace dtc::rt
