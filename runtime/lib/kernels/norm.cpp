//===- norm.cpp - Batch normalization kernels (CPU) -----------------------===//
//
// x is [n, channels, inner] (inner: the plane of a BatchNorm2d, 1 for a
// BatchNorm1d on [N, C] and for a channels-last BatchNorm2d as
// [N H W, C]); each channel's statistics are over n * inner elements, in
// runs of `inner` contiguous floats. The runs are walked in memory order,
// in blocks over the --threads cores (inner 1: blocks of rows, vectorized
// over the channels). A run's (block's) sum is accumulated in float, in 32
// lanes, and a channel's runs are added in double in sample order, so that
// a channel of 50,000 elements loses no more than a run of 784 does and the
// sums do not depend on the number of threads.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"
#include "kernels/parallel.h"
#include "kernels/windows.h"
#include "kernels/simd.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace dtc::kern {
namespace {

// Sums of a run in 32 float lanes: eight vectors of 4 (GCC's vector
// extension: one SSE or NEON register each, on every target the runtime is
// built for), each a chain of its own, then pairwise. One chain is bound by
// the latency of its adds (3-4 cycles): the 8 lanes of the first version
// (two chains) left the gradient's sums at ~3 cycles an element. The order
// of the adds, and so the result, is fixed.
using simd::keep4;
using simd::load4;
using simd::store4;
using simd::v4;
using simd::v4i;
constexpr int kChains = 8;
// S sums over a run of k elements at once: vec(i) gives the S terms of
// elements i..i+3, scalar(i) those of element i (the tail); the run's
// sums are added to out[0..S) in double.
template <int S, class Vec, class Scalar>
void runSums(int64_t k, const Vec &vec, const Scalar &scalar, double *out) {
  v4 acc[S][kChains] = {};
  int64_t i = 0;
  // Unrolled, so that the chains live in registers.
  for (; i + 4 * kChains <= k; i += 4 * kChains) {
#pragma GCC unroll 8
    for (int q = 0; q < kChains; ++q) {
      const std::array<v4, S> t = vec(i + 4 * q);
#pragma GCC unroll 2
      for (int s = 0; s < S; ++s)
        acc[s][q] += t[s];
    }
  }
  std::array<float, S> tail{};
  for (; i < k; ++i) {
    const std::array<float, S> t = scalar(i);
    for (int s = 0; s < S; ++s)
      tail[s] += t[s];
  }
  for (int s = 0; s < S; ++s) {
    v4 *a = acc[s];
    const v4 v = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    out[s] += double(((v[0] + v[1]) + (v[2] + v[3])) + tail[s]);
  }
}
void runSum(const float *x, int64_t k, double &out) {
  runSums<1>(
      k, [x](int64_t i) { return std::array<v4, 1>{load4(x + i)}; },
      [x](int64_t i) { return std::array<float, 1>{x[i]}; }, &out);
}
void runCenteredSquares(const float *x, int64_t k, float mean, double &out) {
  runSums<1>(
      k,
      [x, mean](int64_t i) {
        const v4 d = load4(x + i) - mean;
        return std::array<v4, 1>{d * d};
      },
      [x, mean](int64_t i) {
        const float d = x[i] - mean;
        return std::array<float, 1>{d * d};
      },
      &out);
}
// sum g and sum g (x - mean), g = dy, or dy through a ReLU whose result is
// r (r > 0 ? dy : 0; selected, not branched on: the mask is random).
void gradSums(const float *r, const float *dy, const float *x, int64_t k, float mean,
              double *out) {
  if (r)
    runSums<2>(
        k,
        [=](int64_t i) {
          const v4i keep = load4(r + i) > 0.0f;
          const v4 g = (v4)((v4i)load4(dy + i) & keep);
          return std::array<v4, 2>{g, g * (load4(x + i) - mean)};
        },
        [=](int64_t i) {
          const float g = r[i] > 0.0f ? dy[i] : 0.0f;
          return std::array<float, 2>{g, g * (x[i] - mean)};
        },
        out);
  else
    runSums<2>(
        k,
        [=](int64_t i) {
          const v4 g = load4(dy + i);
          return std::array<v4, 2>{g, g * (load4(x + i) - mean)};
        },
        [=](int64_t i) { return std::array<float, 2>{dy[i], dy[i] * (x[i] - mean)}; }, out);
}
// y = x * scale + shift (with relu, its max with 0) over one run.
void scaleShiftRun(const float *x, float *y, int64_t k, float scale, float shift, bool relu) {
  if (relu)
    for (int64_t i = 0; i < k; ++i)
      y[i] = std::max(x[i] * scale + shift, 0.0f);
  else
    for (int64_t i = 0; i < k; ++i)
      y[i] = x[i] * scale + shift;
}
// The gradient through a ReLU: dy where its result r is positive, else 0.
// (Both loaded, then selected: no branch on the mask, which is random.)
inline float through(const float *r, const float *dy, int64_t i) {
  const float g = dy[i];
  return r[i] > 0.0f ? g : 0.0f;
}

// The kernels walk the tensor in memory order, run by run (run j = sample
// j / channels, channel j % channels), split over the --threads cores in
// contiguous blocks of runs: streams the prefetchers follow, where a
// channel's 64 runs 100 KB apart were not (the gradient ran at a third of
// the L3's bandwidth). Each run's sums go to its slot of a per-run table;
// a channel's slots are then added in sample order, in double: the same
// sums, in the same order, whatever the number of threads.
template <class F> void overRuns(int64_t runs, int64_t inner, const F &f) {
  const int64_t minRuns = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, inner));
  rt::parallelFor(runs, minRuns, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j)
      f(j);
  });
}
// Per-run sums of the step's thread (the kernels are called from it only),
// kept between calls: no allocation per step.
std::vector<double> &runTable(size_t size) {
  thread_local std::vector<double> table;
  if (table.size() < size)
    table.resize(size);
  return table;
}
// Per-channel coefficients of the step's thread, kept between calls.
std::vector<float> &channelCoefficients(size_t size) {
  thread_local std::vector<float> coef;
  if (coef.size() < size)
    coef.resize(size);
  return coef;
}
// Batch norm's per-channel scale and shift: y = x scale + shift.
void scaleShiftOf(const float *weight, const float *bias, const float *mean, const float *var,
                  float eps, int64_t C, float *scale, float *shift) {
  for (int64_t c = 0; c < C; ++c) {
    scale[c] = weight[c] / std::sqrt(var[c] + eps);
    shift[c] = bias[c] - mean[c] * scale[c];
  }
}
// out[c] = the sum over samples, in order, of the S-wide slots of channel c.
template <int S>
void channelSums(const std::vector<double> &table, int64_t n, int64_t channels, int64_t c,
                 double *out) {
  for (int s = 0; s < S; ++s)
    out[s] = 0;
  for (int64_t k = 0; k < n; ++k)
    for (int s = 0; s < S; ++s)
      out[s] += table[size_t((k * channels + c) * S + s)];
}

//===--- one element per run: [rows, channels] --------------------------------===//
//
// BatchNorm1d on [N, C], and BatchNorm2d on channels-last [N, H, W, C]
// (the layout dtc-channels-last plans): the channels are contiguous, so the
// loops run over the channels (vectorized) a row at a time. Rows go in
// blocks of kRowBlock; a block's sums of a channel are accumulated in float
// in row order and stored in the table, and a channel's blocks are added in
// block order in double: the same sums whatever the number of threads.
constexpr int64_t kRowBlock = 32;

// The gradient's per-channel results from total (sum g, then sum g (x -
// mean), C each): dweight, dbias, and pass 2's coefficients of dx = scale
// (g - meanDy - (x - mean) k2).
void gradCoefficientsOf(const double *total, int64_t C, double count, const float *var,
                        const float *weight, float eps, float *dweight, float *dbias,
                        float *scale, float *meanDy, float *k2) {
  for (int64_t c = 0; c < C; ++c) {
    const double sdy = total[c], sdyx = total[C + c];
    const float invstd = 1.0f / std::sqrt(var[c] + eps);
    dbias[c] = float(sdy);
    dweight[c] = float(sdyx * invstd);
    scale[c] = weight[c] * invstd;
    meanDy[c] = float(sdy / count);
    k2[c] = float(sdyx / count) * invstd * invstd;
  }
}

// Rows [begin, end) of blocks over the cores: fn(block, firstRow, endRow).
template <class F> void overRowBlocks(int64_t rows, int64_t channels, const F &fn) {
  rt::parallelForRowBlocks(rows, kRowBlock, channels, fn);
}
// out[s * channels + c] = sum over blocks, in order, of slot (b, c, s).
void blockSums(const std::vector<double> &table, int64_t blocks, int64_t channels, int S,
               double *out) {
  std::fill(out, out + S * channels, 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int s = 0; s < S; ++s)
      for (int64_t c = 0; c < channels; ++c)
        out[s * channels + c] += table[size_t((b * S + s) * channels + c)];
}

// Four channels (or one) at a time.
template <int W> struct Lanes;
template <> struct Lanes<4> {
  using T = v4;
  using M = v4i;
  static T load(const float *p) { return load4(p); }
  static void store(float *p, T v) { store4(p, v); }
  static T keepPositive(const float *r, T g) { return keep4(load4(r) > 0.0f, g); }
  static T relu(T v) { return keep4(~(v < 0.0f), v); } // std::max(v, 0.0f)
};
template <> struct Lanes<1> {
  using T = float;
  static T load(const float *p) { return *p; }
  static void store(float *p, T v) { *p = v; }
  static T keepPositive(const float *r, T g) { return *r > 0.0f ? g : 0.0f; }
  static T relu(T v) { return v < 0.0f ? 0.0f : v; }
};

// The S sums over rows [r0, r1) of term(L, at, c) (the S terms of the
// channels at c, L's width, element offset at), into out[s C + c]: sixteen
// channels at a time in four register chains per sum, the rows in order.
template <int S, class Term>
void blockColumnSums(int64_t r0, int64_t r1, int64_t C, const Term &term, double *out) {
  int64_t c = 0;
  for (; c + 16 <= C; c += 16) {
    v4 a[S][4] = {};
    for (int64_t r = r0; r < r1; ++r) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const auto t = term(Lanes<4>(), r * C + c + 4 * q, c + 4 * q);
#pragma GCC unroll 2
        for (int k = 0; k < S; ++k)
          a[k][q] += t[k];
      }
    }
    for (int k = 0; k < S; ++k)
      for (int q = 0; q < 4; ++q)
        for (int j = 0; j < 4; ++j)
          out[k * C + c + 4 * q + j] = double(a[k][q][j]);
  }
  for (; c + 4 <= C; c += 4) {
    v4 a[S] = {};
    for (int64_t r = r0; r < r1; ++r) {
      const auto t = term(Lanes<4>(), r * C + c, c);
      for (int k = 0; k < S; ++k)
        a[k] += t[k];
    }
    for (int k = 0; k < S; ++k)
      for (int j = 0; j < 4; ++j)
        out[k * C + c + j] = double(a[k][j]);
  }
  for (; c < C; ++c) {
    float a[S] = {};
    for (int64_t r = r0; r < r1; ++r) {
      const auto t = term(Lanes<1>(), r * C + c, c);
      for (int k = 0; k < S; ++k)
        a[k] += t[k];
    }
    for (int k = 0; k < S; ++k)
      out[k * C + c] = double(a[k]);
  }
}

// y = x scale + shift per channel (with relu, std::max(y, 0)) over rows
// [r0, r1). (Plain pointers, restrict: through a lambda's captures every
// store made GCC load the pointers again.)
// (Eight channels at a time over the block's rows, their coefficients in
// registers; the block is in L1.)
void scaleShiftBlock(const float *__restrict x, float *__restrict y, int64_t r0, int64_t r1,
                     int64_t C, const float *__restrict scale, const float *__restrict shift,
                     bool relu) {
  int64_t c = 0;
  for (; c + 8 <= C; c += 8) {
    const v4 s0 = load4(scale + c), s1 = load4(scale + c + 4);
    const v4 h0 = load4(shift + c), h1 = load4(shift + c + 4);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t at = r * C + c;
      v4 a = load4(x + at) * s0 + h0, b = load4(x + at + 4) * s1 + h1;
      if (relu) {
        a = Lanes<4>::relu(a);
        b = Lanes<4>::relu(b);
      }
      store4(y + at, a);
      store4(y + at + 4, b);
    }
  }
  for (; c < C; ++c)
    for (int64_t r = r0; r < r1; ++r) {
      const float v = x[r * C + c] * scale[c] + shift[c];
      y[r * C + c] = relu ? Lanes<1>::relu(v) : v;
    }
}
void scaleShiftRows(const float *x, float *y, int64_t rows, int64_t C, const float *scale,
                    const float *shift, bool relu) {
  overRowBlocks(rows, C, [&](int64_t, int64_t r0, int64_t r1) {
    scaleShiftBlock(x, y, r0, r1, C, scale, shift, relu);
  });
}
// dx = scale (g - meanDy - (x - mean) k2) per channel over rows [r0, r1),
// g = dy (through the ReLU whose result is r).
template <bool Relu>
void gradBlock(const float *__restrict x, const float *__restrict dy, const float *__restrict r,
               float *__restrict dx, int64_t r0, int64_t r1, int64_t C,
               const float *__restrict mean, const float *__restrict scale,
               const float *__restrict meanDy, const float *__restrict k2) {
  int64_t c = 0;
  for (; c + 4 <= C; c += 4) {
    const v4 m = load4(mean + c), sc = load4(scale + c), md = load4(meanDy + c),
             kk = load4(k2 + c);
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t at = row * C + c;
      v4 g = load4(dy + at);
      if constexpr (Relu)
        g = keep4(load4(r + at) > 0.0f, g);
      store4(dx + at, sc * (g - md - (load4(x + at) - m) * kk));
    }
  }
  for (; c < C; ++c)
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t at = row * C + c;
      float g = dy[at];
      if constexpr (Relu)
        g = r[at] > 0.0f ? g : 0.0f;
      dx[at] = scale[c] * (g - meanDy[c] - (x[at] - mean[c]) * k2[c]);
    }
}

void batchNormRows(const float *x, const float *weight, const float *bias, float *y, float *mean,
                   float *var, int64_t rows, int64_t C, float eps, bool relu) {
  const double count = double(std::max<int64_t>(1, rows));
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> &table = runTable(size_t((blocks + 2) * C));
  double *total = &table[size_t(blocks * C)];
  overRowBlocks(rows, C, [&](int64_t b, int64_t r0, int64_t r1) {
    blockColumnSums<1>(
        r0, r1, C,
        [&](auto lanes, int64_t at, int64_t) {
          using L = decltype(lanes);
          return std::array<typename L::T, 1>{L::load(x + at)};
        },
        &table[size_t(b * C)]);
  });
  blockSums(table, blocks, C, 1, total);
  for (int64_t c = 0; c < C; ++c)
    mean[c] = float(total[c] / count);
  overRowBlocks(rows, C, [&](int64_t b, int64_t r0, int64_t r1) {
    blockColumnSums<1>(
        r0, r1, C,
        [&](auto lanes, int64_t at, int64_t c) {
          using L = decltype(lanes);
          const auto d = L::load(x + at) - L::load(mean + c);
          return std::array<typename L::T, 1>{d * d};
        },
        &table[size_t(b * C)]);
  });
  blockSums(table, blocks, C, 1, total);
  std::vector<float> &coef = channelCoefficients(size_t(2 * C));
  float *scale = coef.data(), *shift = scale + C;
  for (int64_t c = 0; c < C; ++c)
    var[c] = float(total[c] / count);
  scaleShiftOf(weight, bias, mean, var, eps, C, scale, shift);
  scaleShiftRows(x, y, rows, C, scale, shift, relu);
}

void batchNormInferenceRows(const float *x, const float *weight, const float *bias,
                            const float *mean, const float *var, float *y, int64_t rows,
                            int64_t C, float eps, bool relu) {
  std::vector<float> &coef = channelCoefficients(size_t(2 * C));
  float *scale = coef.data(), *shift = scale + C;
  scaleShiftOf(weight, bias, mean, var, eps, C, scale, shift);
  scaleShiftRows(x, y, rows, C, scale, shift, relu);
}

template <bool Relu>
void batchNormGradRowsOf(const float *x, const float *dy, const float *mean, const float *var,
                         const float *weight, const float *r, float *dx, float *dweight,
                         float *dbias, int64_t rows, int64_t C, float eps) {
  const double count = double(std::max<int64_t>(1, rows));
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> &table = runTable(size_t((blocks + 1) * 2 * C));
  double *total = &table[size_t(blocks * 2 * C)];
  // g: dy, through the ReLU whose result is r.
  auto grad = [&](auto lanes, int64_t at) {
    using L = decltype(lanes);
    const auto g = L::load(dy + at);
    if constexpr (Relu)
      return L::keepPositive(r + at, g);
    else
      return g;
  };
  overRowBlocks(rows, C, [&](int64_t b, int64_t r0, int64_t r1) {
    blockColumnSums<2>(
        r0, r1, C,
        [&](auto lanes, int64_t at, int64_t c) {
          using L = decltype(lanes);
          const auto g = grad(L(), at);
          return std::array<typename L::T, 2>{g, g * (L::load(x + at) - L::load(mean + c))};
        },
        &table[size_t(b * 2 * C)]);
  });
  blockSums(table, blocks, C, 2, total);
  std::vector<float> &coef = channelCoefficients(size_t(3 * C));
  float *scale = coef.data(), *meanDy = scale + C, *k2 = meanDy + C;
  gradCoefficientsOf(total, C, count, var, weight, eps, dweight, dbias, scale, meanDy, k2);
  overRowBlocks(rows, C, [&](int64_t, int64_t r0, int64_t r1) {
    gradBlock<Relu>(x, dy, r, dx, r0, r1, C, mean, scale, meanDy, k2);
  });
}

void batchNormGradRows(const float *x, const float *dy, const float *mean, const float *var,
                       const float *weight, const float *r, float *dx, float *dweight,
                       float *dbias, int64_t rows, int64_t C, float eps) {
  if (r)
    batchNormGradRowsOf<true>(x, dy, mean, var, weight, r, dx, dweight, dbias, rows, C, eps);
  else
    batchNormGradRowsOf<false>(x, dy, mean, var, weight, r, dx, dweight, dbias, rows, C, eps);
}

//===--- blocked: [n, channels / 16, inner, 16] (nChw16c) ----------------------===//
//
// dtc-blocked-layout's tensors: run j (sample j / blocks, channel block
// j % blocks) is inner rows of 16 channels, contiguous, walked in memory
// order as the NCHW runs are. A run's sums are accumulated per channel in
// float (four vectors of four, two rows in flight: eight chains per sum),
// stored in the table, and a channel's runs added in sample order in
// double: the same sums whatever the number of threads.
constexpr int64_t kLanes = rt::Window2d::kBlock;

// The S sums of term(row, q) (the S terms of channels 4q..4q+3 of a row)
// over a run's rows, into out[s * 16 + lane].
template <int S, class Term> void blockRunSums(int64_t inner, const Term &term, double *out) {
  v4 a[S][2][4] = {};
  int64_t i = 0;
  for (; i + 2 <= inner; i += 2) {
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const std::array<v4, S> t = term(i + u, q);
        for (int k = 0; k < S; ++k)
          a[k][u][q] += t[k];
      }
    }
  }
  for (; i < inner; ++i)
    for (int q = 0; q < 4; ++q) {
      const std::array<v4, S> t = term(i, q);
      for (int k = 0; k < S; ++k)
        a[k][0][q] += t[k];
    }
  for (int k = 0; k < S; ++k)
    for (int q = 0; q < 4; ++q) {
      const v4 v = a[k][0][q] + a[k][1][q];
      for (int l = 0; l < 4; ++l)
        out[k * kLanes + 4 * q + l] = double(v[l]);
    }
}
// out[s * channels + c] = the sum over samples, in order, of the runs'
// slot s of channel c.
void blockedChannelSums(const std::vector<double> &table, int64_t n, int64_t channels, int S,
                        double *out) {
  const int64_t blocks = channels / kLanes;
  for (int s = 0; s < S; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k)
        sum += table[size_t(((k * blocks + c / kLanes) * S + s) * kLanes + c % kLanes)];
      out[s * channels + c] = sum;
    }
}
// y = x scale + shift (relu: max with 0) per channel over the runs.
void scaleShiftBlocked(const float *x, float *y, int64_t n, int64_t channels, int64_t inner,
                       const float *scale, const float *shift, bool relu) {
  const int64_t blocks = channels / kLanes;
  overRuns(n * blocks, inner * kLanes, [&](int64_t j) {
    const int64_t c0 = (j % blocks) * kLanes;
    v4 sc[4], sh[4];
    for (int q = 0; q < 4; ++q) {
      sc[q] = load4(scale + c0 + 4 * q);
      sh[q] = load4(shift + c0 + 4 * q);
    }
    const float *__restrict xr = x + j * inner * kLanes;
    float *__restrict yr = y + j * inner * kLanes;
    for (int64_t i = 0; i < inner; ++i)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const int64_t at = i * kLanes + 4 * q;
        const v4 v = load4(xr + at) * sc[q] + sh[q];
        store4(yr + at, relu ? Lanes<4>::relu(v) : v);
      }
  });
}

void batchNormBlocked(const float *x, const float *weight, const float *bias, float *y,
                      float *mean, float *var, int64_t n, int64_t channels, int64_t inner,
                      float eps, bool relu) {
  const double count = double(std::max<int64_t>(1, n * inner));
  const int64_t blocks = channels / kLanes, runs = n * blocks;
  std::vector<double> &table = runTable(size_t(runs * kLanes + channels));
  double *total = &table[size_t(runs * kLanes)];
  overRuns(runs, inner * kLanes, [&](int64_t j) {
    const float *xr = x + j * inner * kLanes;
    blockRunSums<1>(
        inner, [&](int64_t i, int q) { return std::array<v4, 1>{load4(xr + i * kLanes + 4 * q)}; },
        &table[size_t(j * kLanes)]);
  });
  blockedChannelSums(table, n, channels, 1, total);
  for (int64_t c = 0; c < channels; ++c)
    mean[c] = float(total[c] / count);
  overRuns(runs, inner * kLanes, [&](int64_t j) {
    const float *xr = x + j * inner * kLanes, *m = mean + (j % blocks) * kLanes;
    blockRunSums<1>(
        inner,
        [&](int64_t i, int q) {
          const v4 d = load4(xr + i * kLanes + 4 * q) - load4(m + 4 * q);
          return std::array<v4, 1>{d * d};
        },
        &table[size_t(j * kLanes)]);
  });
  blockedChannelSums(table, n, channels, 1, total);
  std::vector<float> &coef = channelCoefficients(size_t(2 * channels));
  float *scale = coef.data(), *shift = scale + channels;
  for (int64_t c = 0; c < channels; ++c)
    var[c] = float(total[c] / count);
  scaleShiftOf(weight, bias, mean, var, eps, channels, scale, shift);
  scaleShiftBlocked(x, y, n, channels, inner, scale, shift, relu);
}

void batchNormInferenceBlocked(const float *x, const float *weight, const float *bias,
                               const float *mean, const float *var, float *y, int64_t n,
                               int64_t channels, int64_t inner, float eps, bool relu) {
  std::vector<float> &coef = channelCoefficients(size_t(2 * channels));
  float *scale = coef.data(), *shift = scale + channels;
  scaleShiftOf(weight, bias, mean, var, eps, channels, scale, shift);
  scaleShiftBlocked(x, y, n, channels, inner, scale, shift, relu);
}

// g: dy, or dy through the ReLU whose result is r.
inline v4 gradOf(const float *dy, const float *r, int64_t at) {
  return r ? keep4(load4(r + at) > 0.0f, load4(dy + at)) : load4(dy + at);
}
// pass1(j, slot) leaves run j's sum g and sum g (x - mean) in slot[0..32)
// (g: dy through the ReLU). dy null: pass 1 also stored g in dx (the routed
// pooled gradient of batchNormGradMaxPool), for pass 2 to read there.
template <class Pass1>
void batchNormGradBlockedOf(const Pass1 &pass1, const float *x, const float *dy,
                            const float *mean, const float *var, const float *weight,
                            const float *r, float *dx, float *dweight, float *dbias, int64_t n,
                            int64_t channels, int64_t inner, float eps) {
  const double count = double(std::max<int64_t>(1, n * inner));
  const int64_t blocks = channels / kLanes, runs = n * blocks, run = inner * kLanes;
  std::vector<double> &table = runTable(size_t(runs * 2 * kLanes + 2 * channels));
  double *total = &table[size_t(runs * 2 * kLanes)];
  overRuns(runs, run, [&](int64_t j) { pass1(j, &table[size_t(j * 2 * kLanes)]); });
  blockedChannelSums(table, n, channels, 2, total);
  std::vector<float> &coef = channelCoefficients(size_t(4 * channels));
  float *scale = coef.data(), *meanDy = scale + channels, *k2 = meanDy + channels;
  gradCoefficientsOf(total, channels, count, var, weight, eps, dweight, dbias, scale, meanDy,
                     k2);
  overRuns(runs, run, [&](int64_t j) {
    const int64_t c0 = (j % blocks) * kLanes;
    v4 sc[4], md[4], kk[4], m[4];
    for (int q = 0; q < 4; ++q) {
      sc[q] = load4(scale + c0 + 4 * q);
      md[q] = load4(meanDy + c0 + 4 * q);
      kk[q] = load4(k2 + c0 + 4 * q);
      m[q] = load4(mean + c0 + 4 * q);
    }
    // Routed (dy null): g is in dx already (through the ReLU), overwritten
    // in place.
    const float *xr = x + j * run, *gr = dy ? dy + j * run : dx + j * run;
    const float *rr = dy && r ? r + j * run : nullptr;
    float *d = dx + j * run;
    for (int64_t i = 0; i < inner; ++i)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const int64_t at = i * kLanes + 4 * q;
        store4(d + at, sc[q] * (gradOf(gr, rr, at) - md[q] - (load4(xr + at) - m[q]) * kk[q]));
      }
  });
}
// Pass 1 of one run: the sums of g = gradOf(gr, rr) against x; with gOut,
// g stored there too.
void blockedGradSums(const float *xr, const float *gr, const float *rr, const float *m,
                     float *gOut, int64_t inner, double *slot) {
  blockRunSums<2>(
      inner,
      [&](int64_t i, int q) {
        const int64_t at = i * kLanes + 4 * q;
        const v4 g = gradOf(gr, rr, at);
        if (gOut)
          store4(gOut + at, g);
        return std::array<v4, 2>{g, g * (load4(xr + at) - load4(m + 4 * q))};
      },
      slot);
}
void batchNormGradBlocked(const float *x, const float *dy, const float *mean, const float *var,
                          const float *weight, const float *r, float *dx, float *dweight,
                          float *dbias, int64_t n, int64_t channels, int64_t inner, float eps) {
  const int64_t run = inner * kLanes, blocks = channels / kLanes;
  batchNormGradBlockedOf(
      [&](int64_t j, double *slot) {
        blockedGradSums(x + j * run, dy + j * run, r ? r + j * run : nullptr,
                        mean + (j % blocks) * kLanes, nullptr, inner, slot);
      },
      x, dy, mean, var, weight, r, dx, dweight, dbias, n, channels, inner, eps);
}

// Pass 1 of the fused gradient on one blocked run [H, W, 16] under a 2x2,
// stride-2 max pooling of its ReLU result r (W even): each window's pooled
// gradient gp is routed in registers as maxPool2x2GradRowNhwc routes it,
// through the ReLU, and stored in g; the sums are accumulated as
// blockedGradSums accumulates them (position i in chain i % 2, each chain
// in memory order), so they are the same bit for bit, without the routed
// plane's round trip. A bottom row's g is read back from g, where its top
// row's windows stored it; an odd last row is in no window (g = 0).
void routedGradSums2x2(const rt::Window2d &w, const float *r, const float *gp, const float *x,
                       const float *m, float *g, double *slot) {
  const int64_t W = w.W, Wo = w.Wo, row = W * kLanes;
  v4 a[2][2][4] = {}; // [sum][chain][four channels]
  v4 mq[4];
  for (int q = 0; q < 4; ++q)
    mq[q] = load4(m + 4 * q);
  const auto add = [&](int u, int q, int64_t at, v4 gv) {
    a[0][u][q] += gv;
    a[1][u][q] += gv * (load4(x + at) - mq[q]);
  };
  const v4 zero = {};
  for (int64_t h = 0; h < w.H; ++h) {
    const int64_t at0 = h * row;
    if (h >= 2 * w.Ho || h % 2 == 1) { // g stored above, or 0 (in no window)
      const bool none = h >= 2 * w.Ho;
      for (int64_t v = 0; v < W; v += 2)
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const int64_t at = at0 + v * kLanes + 4 * q;
          const v4 g0 = none ? zero : load4(g + at), g1 = none ? zero : load4(g + at + kLanes);
          if (none) {
            store4(g + at, zero);
            store4(g + at + kLanes, zero);
          }
          add(0, q, at, g0);
          add(1, q, at + kLanes, g1);
        }
      continue;
    }
    const float *gr = gp + (h / 2) * Wo * kLanes;
    for (int64_t ow = 0; ow < Wo; ++ow)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const int64_t at = at0 + 2 * ow * kLanes + 4 * q, bt = at + kLanes, ct = at + row,
                      dt = ct + kLanes;
        const v4 ra = load4(r + at), rb = load4(r + bt), rc = load4(r + ct), rd = load4(r + dt);
        const v4 gv = load4(gr + ow * kLanes + 4 * q);
        const v4i gb = rb > ra;
        const v4 mab = simd::select4(gb, rb, ra);
        const v4i gc = rc > mab;
        const v4i gd = rd > simd::select4(gc, rc, mab);
        const v4 g0 = keep4(~gb & ~gc & ~gd & (ra > 0.0f), gv);
        const v4 g1 = keep4(gb & ~gc & ~gd & (rb > 0.0f), gv);
        store4(g + at, g0);
        store4(g + bt, g1);
        store4(g + ct, keep4(gc & ~gd & (rc > 0.0f), gv));
        store4(g + dt, keep4(gd & (rd > 0.0f), gv));
        add(0, q, at, g0);
        add(1, q, bt, g1);
      }
  }
  for (int k = 0; k < 2; ++k)
    for (int q = 0; q < 4; ++q) {
      const v4 v = a[k][0][q] + a[k][1][q];
      for (int l = 0; l < 4; ++l)
        slot[k * kLanes + 4 * q + l] = double(v[l]);
    }
}

} // namespace

void batchNorm(const rt::HostContext &, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *var, int64_t n, int64_t channels, int64_t inner,
               float eps, bool relu, int64_t lanes) {
  if (lanes == kLanes)
    return batchNormBlocked(x, weight, bias, y, mean, var, n, channels, inner, eps, relu);
  if (inner == 1)
    return batchNormRows(x, weight, bias, y, mean, var, n, channels, eps, relu);
  const double count = double(std::max<int64_t>(1, n * inner));
  const int64_t runs = n * channels;
  std::vector<double> &table = runTable(size_t(runs));
  overRuns(runs, inner, [&](int64_t j) {
    table[size_t(j)] = 0;
    runSum(x + j * inner, inner, table[size_t(j)]);
  });
  for (int64_t c = 0; c < channels; ++c) {
    double s;
    channelSums<1>(table, n, channels, c, &s);
    mean[c] = float(s / count);
  }
  overRuns(runs, inner, [&](int64_t j) {
    table[size_t(j)] = 0;
    runCenteredSquares(x + j * inner, inner, mean[j % channels], table[size_t(j)]);
  });
  for (int64_t c = 0; c < channels; ++c) {
    double q;
    channelSums<1>(table, n, channels, c, &q);
    var[c] = float(q / count);
  }
  // The scale and shift of each channel, in the table's room (as floats).
  float *scale = reinterpret_cast<float *>(table.data()), *shift = scale + channels;
  scaleShiftOf(weight, bias, mean, var, eps, channels, scale, shift);
  overRuns(runs, inner, [&](int64_t j) {
    const int64_t c = j % channels;
    scaleShiftRun(x + j * inner, y + j * inner, inner, scale[c], shift[c], relu);
  });
}

void batchNormInference(const rt::HostContext &, const float *x, const float *weight,
                        const float *bias, const float *mean, const float *var, float *y,
                        int64_t n, int64_t channels, int64_t inner, float eps, bool relu,
                        int64_t lanes) {
  if (lanes == kLanes)
    return batchNormInferenceBlocked(x, weight, bias, mean, var, y, n, channels, inner, eps,
                                     relu);
  if (inner == 1)
    return batchNormInferenceRows(x, weight, bias, mean, var, y, n, channels, eps, relu);
  std::vector<double> &table = runTable(size_t(channels));
  float *scale = reinterpret_cast<float *>(table.data()), *shift = scale + channels;
  scaleShiftOf(weight, bias, mean, var, eps, channels, scale, shift);
  overRuns(n * channels, inner, [&](int64_t j) {
    const int64_t c = j % channels;
    scaleShiftRun(x + j * inner, y + j * inner, inner, scale[c], shift[c], relu);
  });
}

namespace {
// With xhat = (x - mean) invstd: dbias = sum dy, dweight = sum dy xhat, and
// dx = weight invstd (dy - dbias / count - xhat dweight / count); dy through
// the ReLU when its result r is given.
//
// Pass 1 leaves sum g and sum g (x - mean) of each run in the table (g: dy
// through the ReLU); gradCoefficients adds them per channel and gives
// dweight, dbias and the per-channel coefficients of pass 2, dx = scale (g
// - meanDy - (x - m) k2), which gradRun applies to one run.
const float *gradCoefficients(const std::vector<double> &table, int64_t n, int64_t channels,
                              int64_t inner, const float *mean, const float *var,
                              const float *weight, float eps, float *dweight, float *dbias) {
  const double count = double(std::max<int64_t>(1, n * inner));
  std::vector<float> &coef = channelCoefficients(size_t(4 * channels));
  for (int64_t c = 0; c < channels; ++c) {
    double sums[2];
    channelSums<2>(table, n, channels, c, sums);
    const double sdy = sums[0], sdyx = sums[1];
    const float invstd = 1.0f / std::sqrt(var[c] + eps);
    dbias[c] = float(sdy);
    dweight[c] = float(sdyx * invstd);
    coef[size_t(4 * c)] = weight[c] * invstd;
    coef[size_t(4 * c + 1)] = float(sdy / count);
    coef[size_t(4 * c + 2)] = float(sdyx / count) * invstd * invstd;
    coef[size_t(4 * c + 3)] = mean[c];
  }
  return coef.data();
}
// dx of one run from its dy (through the ReLU when r is given; dx may be
// dy, in place); cf: the channel's (scale, meanDy, k2, mean).
void gradRun(const float *xr, const float *dyr, const float *rr, float *dxr, int64_t inner,
             const float *cf) {
  const float scale = cf[0], meanDy = cf[1], k2 = cf[2], m = cf[3];
  if (rr) {
    int64_t i = 0;
    for (; i + 4 <= inner; i += 4) { // the mask selected in vectors
      const v4i keep = load4(rr + i) > 0.0f;
      const v4 g = (v4)((v4i)load4(dyr + i) & keep);
      const v4 d = scale * (g - meanDy - (load4(xr + i) - m) * k2);
      std::memcpy(dxr + i, &d, sizeof d);
    }
    for (; i < inner; ++i)
      dxr[i] = scale * (through(rr, dyr, i) - meanDy - (xr[i] - m) * k2);
  } else {
    for (int64_t i = 0; i < inner; ++i)
      dxr[i] = scale * (dyr[i] - meanDy - (xr[i] - m) * k2);
  }
}

[[noreturn]] void fatal(const char *what) {
  std::fprintf(stderr, "train: error: internal error in runtime kernel: %s\n", what);
  std::exit(1);
}
} // namespace

void batchNormGrad(const rt::HostContext &, const float *x, const float *dy, const float *mean,
                   const float *var, const float *weight, const float *r, float *dx,
                   float *dweight, float *dbias, int64_t n, int64_t channels, int64_t inner,
                   float eps, int64_t lanes) {
  if (lanes == kLanes)
    return batchNormGradBlocked(x, dy, mean, var, weight, r, dx, dweight, dbias, n, channels,
                                inner, eps);
  if (inner == 1)
    return batchNormGradRows(x, dy, mean, var, weight, r, dx, dweight, dbias, n, channels, eps);
  const int64_t runs = n * channels;
  std::vector<double> &table = runTable(size_t(2 * runs));
  overRuns(runs, inner, [&](int64_t j) {
    double *sums = &table[size_t(2 * j)];
    sums[0] = sums[1] = 0;
    const int64_t at = j * inner;
    gradSums(r ? r + at : nullptr, dy + at, x + at, inner, mean[j % channels], sums);
  });
  const float *coef =
      gradCoefficients(table, n, channels, inner, mean, var, weight, eps, dweight, dbias);
  overRuns(runs, inner, [&](int64_t j) {
    const int64_t at = j * inner;
    gradRun(x + at, dy + at, r ? r + at : nullptr, dx + at, inner,
            &coef[size_t(4 * (j % channels))]);
  });
}

// Pass 1 routes each plane's pooled gradient (maxPool2dGrad's, on r, the
// ReLU's result) into a buffer in L1, sums it as batchNormGrad does, and
// stores it through the ReLU in dx; pass 2 reads it there. The same dx,
// dweight and dbias, bit for bit, as maxPool2dGrad then batchNormGrad,
// without the full-size dy written once and read twice, nor r read again.
void batchNormGradMaxPool(const rt::HostContext &, const float *x, const float *pooledDy,
                          const float *mean, const float *var, const float *weight,
                          const float *r, float *dx, float *dweight, float *dbias, int64_t n,
                          int64_t channels, int64_t inner, float eps, int64_t lanes,
                          const int64_t *window) {
  const rt::Window2d w = rt::Window2d::from(window);
  const bool blocked = lanes == kLanes && w.inBlocked() && w.outBlocked();
  if (!r || !(blocked || (lanes == 1 && w.layout == 0)) || w.H * w.W != inner ||
      w.C != channels)
    fatal("batchNormGradMaxPool: needs the ReLU's NCHW or blocked result and its pooling "
          "window");
  if (blocked) {
    const int64_t run = inner * kLanes, pooledRun = w.Ho * w.Wo * kLanes,
                  blocks = channels / kLanes;
    if (isPool2x2(w) && w.W % 2 == 0)
      return batchNormGradBlockedOf(
          [&](int64_t j, double *slot) {
            routedGradSums2x2(w, r + j * run, pooledDy + j * pooledRun, x + j * run,
                              mean + (j % blocks) * kLanes, dx + j * run, slot);
          },
          x, nullptr, mean, var, weight, r, dx, dweight, dbias, n, channels, inner, eps);
    // Each run's [H, W, 16] block routed as the blocked pooling's, in L1.
    return batchNormGradBlockedOf(
        [&](int64_t j, double *slot) {
          thread_local std::vector<float> plane;
          plane.resize(size_t(run));
          maxPool2dGradBlockPlane(w, r + j * run, pooledDy + j * pooledRun, plane.data());
          blockedGradSums(x + j * run, plane.data(), r + j * run, mean + (j % blocks) * kLanes,
                          dx + j * run, inner, slot);
        },
        x, nullptr, mean, var, weight, r, dx, dweight, dbias, n, channels, inner, eps);
  }
  const int64_t runs = n * channels, pooled = w.Ho * w.Wo;
  std::vector<double> &table = runTable(size_t(2 * runs));
  overRuns(runs, inner, [&](int64_t j) {
    thread_local std::vector<float> plane;
    plane.resize(size_t(inner));
    const int64_t at = j * inner;
    const float *rr = r + at;
    maxPool2dGradPlane(w, rr, pooledDy + j * pooled, plane.data());
    double *sums = &table[size_t(2 * j)];
    sums[0] = sums[1] = 0;
    gradSums(rr, plane.data(), x + at, inner, mean[j % channels], sums);
    float *g = dx + at;
    int64_t i = 0;
    for (; i + 4 <= inner; i += 4)
      store4(g + i, keep4(load4(rr + i) > 0.0f, load4(plane.data() + i)));
    for (; i < inner; ++i)
      g[i] = through(rr, plane.data(), i);
  });
  const float *coef =
      gradCoefficients(table, n, channels, inner, mean, var, weight, eps, dweight, dbias);
  overRuns(runs, inner, [&](int64_t j) {
    const int64_t at = j * inner;
    gradRun(x + at, dx + at, nullptr, dx + at, inner, &coef[size_t(4 * (j % channels))]);
  });
}

//===--- layer normalization: [rows, d], each row by its own statistics ----===//
//
// Rows go over the cores in blocks of kRowBlock. A row's sums are runSums'
// (32 float lanes, then double); the weight's and bias's gradients are
// summed per block in float in row order, and the blocks added in block
// order in double: the same results whatever the number of threads.

namespace {
// Rows [r0, r1) of layerNorm and layerNormGrad, each with an x86-64-v3
// clone beside the baseline (simd.h; the runtime library is built for the
// baseline ISA). Four rows go together, so that their chains of adds and
// their divisions and square roots overlap (one row at a time waits on
// each in turn: 2.5x the time at d = 128). A row's sums run in two chains of
// eight float lanes (element i in chain i / 8 mod 2, lane i mod 8), added in
// a fixed tree, then the tail's elements in order: the same floats whether
// the row goes with others or alone. The other loops are elementwise,
// eight at a time.
using simd::load8;
using simd::store8;
using simd::v8;

// out[r] = the sum of term(r, i) (eight elements from i) over the rows'
// whole vectors, then of tailTerm(r, i) over the rest, for R rows.
template <int R, class Term, class TailTerm>
[[gnu::always_inline]] inline void rowSums(int64_t d, const Term &term, const TailTerm &tailTerm,
                                           float *out) {
  v8 acc[R][2] = {};
  int64_t i = 0;
  for (; i + 16 <= d; i += 16)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      acc[r][0] += term(r, i);
      acc[r][1] += term(r, i + 8);
    }
  if (i + 8 <= d) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      acc[r][0] += term(r, i);
    i += 8;
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    out[r] = simd::sum8(acc[r][0] + acc[r][1]);
    for (int64_t j = i; j < d; ++j)
      out[r] += tailTerm(r, j);
  }
}

// Rows [r, r + R) of layerNorm.
template <int R>
[[gnu::always_inline]] inline void layerNormTile(const float *x, const float *weight,
                                                 const float *bias, float *y, float *mean,
                                                 float *rstd, int64_t r, int64_t d, float eps) {
  const float *xr = x + r * d;
  float m[R], q[R], is[R];
  rowSums<R>(
      d, [&](int rr, int64_t i) DTC_SIMD_INLINE { return load8(xr + rr * d + i); },
      [&](int rr, int64_t i) DTC_SIMD_INLINE { return xr[rr * d + i]; }, m);
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr)
    m[rr] /= float(d);
  rowSums<R>(
      d,
      [&](int rr, int64_t i) DTC_SIMD_INLINE {
        const v8 c = load8(xr + rr * d + i) - m[rr];
        return c * c;
      },
      [&](int rr, int64_t i) DTC_SIMD_INLINE {
        const float c = xr[rr * d + i] - m[rr];
        return c * c;
      },
      q);
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr) {
    is[rr] = 1.0f / std::sqrt(q[rr] / float(d) + eps);
    mean[r + rr] = m[rr];
    rstd[r + rr] = is[rr];
  }
  const int64_t d8 = d / 8 * 8;
  for (int64_t i = 0; i < d8; i += 8) {
    const v8 w = load8(weight + i), b = load8(bias + i);
#pragma GCC unroll 4
    for (int rr = 0; rr < R; ++rr)
      store8(y + (r + rr) * d + i, (load8(xr + rr * d + i) - m[rr]) * is[rr] * w + b);
  }
  for (int rr = 0; rr < R; ++rr)
    for (int64_t i = d8; i < d; ++i)
      y[(r + rr) * d + i] = (xr[rr * d + i] - m[rr]) * is[rr] * weight[i] + bias[i];
}

DTC_SIMD_CLONES
void layerNormRows(const float *x, const float *weight, const float *bias, float *y,
                   float *mean, float *rstd, int64_t r0, int64_t r1, int64_t d, float eps) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4)
    layerNormTile<4>(x, weight, bias, y, mean, rstd, r, d, eps);
  for (; r < r1; ++r)
    layerNormTile<1>(x, weight, bias, y, mean, rstd, r, d, eps);
}

// Rows [r, r + R) of layerNormGrad: dx, and their dy and dy xhat added to
// db and dw in row order.
template <int R>
[[gnu::always_inline]] inline void layerNormGradTile(const float *x, const float *dy,
                                                     const float *mean, const float *rstd,
                                                     const float *weight, float *dx,
                                                     float *__restrict db, float *__restrict dw,
                                                     int64_t r, int64_t d) {
  const float *xr = x + r * d, *gr = dy + r * d;
  float m[R], is[R], mg[R], mgx[R];
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr) {
    m[rr] = mean[r + rr];
    is[rr] = rstd[r + rr];
  }
  // The means of g and g xhat, g = dy weight, xhat = (x - mean) rstd.
  rowSums<R>(
      d,
      [&](int rr, int64_t i) DTC_SIMD_INLINE {
        return load8(gr + rr * d + i) * load8(weight + i);
      },
      [&](int rr, int64_t i) DTC_SIMD_INLINE { return gr[rr * d + i] * weight[i]; }, mg);
  rowSums<R>(
      d,
      [&](int rr, int64_t i) DTC_SIMD_INLINE {
        return load8(gr + rr * d + i) * load8(weight + i) *
               ((load8(xr + rr * d + i) - m[rr]) * is[rr]);
      },
      [&](int rr, int64_t i) DTC_SIMD_INLINE {
        return gr[rr * d + i] * weight[i] * ((xr[rr * d + i] - m[rr]) * is[rr]);
      },
      mgx);
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr) {
    mg[rr] /= float(d);
    mgx[rr] /= float(d);
  }
  const int64_t d8 = d / 8 * 8;
  for (int64_t i = 0; i < d8; i += 8) {
    const v8 w = load8(weight + i);
    v8 sb = load8(db + i), sw = load8(dw + i);
#pragma GCC unroll 4
    for (int rr = 0; rr < R; ++rr) {
      const v8 g = load8(gr + rr * d + i), xh = (load8(xr + rr * d + i) - m[rr]) * is[rr];
      store8(dx + (r + rr) * d + i, is[rr] * (g * w - mg[rr] - xh * mgx[rr]));
      sb += g;
      sw += g * xh;
    }
    store8(db + i, sb);
    store8(dw + i, sw);
  }
  for (int rr = 0; rr < R; ++rr)
    for (int64_t i = d8; i < d; ++i) {
      const float xh = (xr[rr * d + i] - m[rr]) * is[rr];
      dx[(r + rr) * d + i] = is[rr] * (gr[rr * d + i] * weight[i] - mg[rr] - xh * mgx[rr]);
      db[i] += gr[rr * d + i];
      dw[i] += gr[rr * d + i] * xh;
    }
}

DTC_SIMD_CLONES
void layerNormGradRows(const float *x, const float *dy, const float *mean, const float *rstd,
                       const float *weight, float *dx, float *__restrict db,
                       float *__restrict dw, int64_t r0, int64_t r1, int64_t d) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4)
    layerNormGradTile<4>(x, dy, mean, rstd, weight, dx, db, dw, r, d);
  for (; r < r1; ++r)
    layerNormGradTile<1>(x, dy, mean, rstd, weight, dx, db, dw, r, d);
}

// Rows [r, r + R) of rmsNorm: the sums of squares as layerNorm's (rowSums).
template <int R>
[[gnu::always_inline]] inline void rmsNormTile(const float *x, const float *weight, float *y,
                                               float *rstd, int64_t r, int64_t d, float eps) {
  const float *xr = x + r * d;
  float q[R], is[R];
  rowSums<R>(
      d,
      [&](int rr, int64_t i) DTC_SIMD_INLINE {
        const v8 v = load8(xr + rr * d + i);
        return v * v;
      },
      [&](int rr, int64_t i) DTC_SIMD_INLINE { return xr[rr * d + i] * xr[rr * d + i]; }, q);
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr) {
    is[rr] = 1.0f / std::sqrt(q[rr] / float(d) + eps);
    rstd[r + rr] = is[rr];
  }
  const int64_t d8 = d / 8 * 8;
  for (int64_t i = 0; i < d8; i += 8) {
    const v8 w = load8(weight + i);
#pragma GCC unroll 4
    for (int rr = 0; rr < R; ++rr)
      store8(y + (r + rr) * d + i, load8(xr + rr * d + i) * is[rr] * w);
  }
  for (int rr = 0; rr < R; ++rr)
    for (int64_t i = d8; i < d; ++i)
      y[(r + rr) * d + i] = xr[rr * d + i] * is[rr] * weight[i];
}

DTC_SIMD_CLONES
void rmsNormRows(const float *x, const float *weight, float *y, float *rstd, int64_t r0,
                 int64_t r1, int64_t d, float eps) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4)
    rmsNormTile<4>(x, weight, y, rstd, r, d, eps);
  for (; r < r1; ++r)
    rmsNormTile<1>(x, weight, y, rstd, r, d, eps);
}

// Rows [r, r + R) of rmsNormGrad: dx, and their dy xhat added to dw in row
// order.
template <int R>
[[gnu::always_inline]] inline void rmsNormGradTile(const float *x, const float *dy,
                                                   const float *rstd, const float *weight,
                                                   float *dx, float *__restrict dw, int64_t r,
                                                   int64_t d) {
  const float *xr = x + r * d, *gr = dy + r * d;
  float is[R], mgx[R];
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr)
    is[rr] = rstd[r + rr];
  // The mean of g xhat, g = dy weight, xhat = x rstd.
  rowSums<R>(
      d,
      [&](int rr, int64_t i) DTC_SIMD_INLINE {
        return load8(gr + rr * d + i) * load8(weight + i) * (load8(xr + rr * d + i) * is[rr]);
      },
      [&](int rr, int64_t i) DTC_SIMD_INLINE {
        return gr[rr * d + i] * weight[i] * (xr[rr * d + i] * is[rr]);
      },
      mgx);
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr)
    mgx[rr] /= float(d);
  const int64_t d8 = d / 8 * 8;
  for (int64_t i = 0; i < d8; i += 8) {
    const v8 w = load8(weight + i);
    v8 sw = load8(dw + i);
#pragma GCC unroll 4
    for (int rr = 0; rr < R; ++rr) {
      const v8 g = load8(gr + rr * d + i), xh = load8(xr + rr * d + i) * is[rr];
      store8(dx + (r + rr) * d + i, is[rr] * (g * w - xh * mgx[rr]));
      sw += g * xh;
    }
    store8(dw + i, sw);
  }
  for (int rr = 0; rr < R; ++rr)
    for (int64_t i = d8; i < d; ++i) {
      const float xh = xr[rr * d + i] * is[rr];
      dx[(r + rr) * d + i] = is[rr] * (gr[rr * d + i] * weight[i] - xh * mgx[rr]);
      dw[i] += gr[rr * d + i] * xh;
    }
}

DTC_SIMD_CLONES
void rmsNormGradRows(const float *x, const float *dy, const float *rstd, const float *weight,
                     float *dx, float *__restrict dw, int64_t r0, int64_t r1, int64_t d) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4)
    rmsNormGradTile<4>(x, dy, rstd, weight, dx, dw, r, d);
  for (; r < r1; ++r)
    rmsNormGradTile<1>(x, dy, rstd, weight, dx, dw, r, d);
}
} // namespace

void layerNorm(const rt::HostContext &, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *rstd, int64_t rows, int64_t d, float eps) {
  overRowBlocks(rows, d, [&](int64_t, int64_t r0, int64_t r1) {
    layerNormRows(x, weight, bias, y, mean, rstd, r0, r1, d, eps);
  });
}

void layerNormGrad(const rt::HostContext &, const float *x, const float *dy, const float *mean,
                   const float *rstd, const float *weight, float *dx, float *dweight,
                   float *dbias, int64_t rows, int64_t d) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> &table = runTable(size_t((blocks + 1) * 2 * d));
  overRowBlocks(rows, d, [&](int64_t block, int64_t r0, int64_t r1) {
    thread_local std::vector<float> acc;
    acc.assign(size_t(2 * d), 0.0f);
    float *db = acc.data(), *dw = db + d;
    layerNormGradRows(x, dy, mean, rstd, weight, dx, db, dw, r0, r1, d);
    double *slot = &table[size_t(block * 2 * d)];
    for (int64_t i = 0; i < 2 * d; ++i)
      slot[i] = double(acc[size_t(i)]);
  });
  double *total = &table[size_t(blocks * 2 * d)];
  blockSums(table, blocks, d, 2, total);
  for (int64_t i = 0; i < d; ++i) {
    dbias[i] = float(total[i]);
    dweight[i] = float(total[d + i]);
  }
}

void rmsNorm(const rt::HostContext &, const float *x, const float *weight, float *y,
             float *rstd, int64_t rows, int64_t d, float eps) {
  overRowBlocks(rows, d, [&](int64_t, int64_t r0, int64_t r1) {
    rmsNormRows(x, weight, y, rstd, r0, r1, d, eps);
  });
}

void rmsNormGrad(const rt::HostContext &, const float *x, const float *dy, const float *rstd,
                 const float *weight, float *dx, float *dweight, int64_t rows, int64_t d) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> &table = runTable(size_t((blocks + 1) * d));
  overRowBlocks(rows, d, [&](int64_t block, int64_t r0, int64_t r1) {
    thread_local std::vector<float> acc;
    acc.assign(size_t(d), 0.0f);
    rmsNormGradRows(x, dy, rstd, weight, dx, acc.data(), r0, r1, d);
    double *slot = &table[size_t(block * d)];
    for (int64_t i = 0; i < d; ++i)
      slot[i] = double(acc[size_t(i)]);
  });
  double *total = &table[size_t(blocks * d)];
  blockSums(table, blocks, d, 1, total);
  for (int64_t i = 0; i < d; ++i)
    dweight[i] = float(total[i]);
}

void updateRunningStats(const rt::HostContext &, const float *mean, const float *var,
                        float *runningMean, float *runningVar, int64_t *numBatchesTracked,
                        int64_t channels, int64_t count, float momentum) {
  // torch: the unbiased variance, var * count / (count - 1).
  const float unbias = count > 1 ? float(double(count) / double(count - 1)) : 1.0f;
  for (int64_t c = 0; c < channels; ++c) {
    runningMean[c] = (1.0f - momentum) * runningMean[c] + momentum * mean[c];
    runningVar[c] = (1.0f - momentum) * runningVar[c] + momentum * (var[c] * unbias);
  }
  ++*numBatchesTracked;
}

} // namespace dtc::kern
