//===- kernels.cpp - Non-elementwise kernels called by generated code ----===//
//
// Implements dtc/kernels.h; the context (rt::HostContext) is empty and
// unused. Axis-view kernels ([outer, n, inner]) walk the inner dimension in
// chunks of kChunk so the innermost loop is contiguous and per-column
// accumulators live on the stack; they are instantiated once for
// inner == 1 (the common "last axis" case, where the chunk loop folds away)
// and once for a run-time inner size.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"

#include "support/error.h"

#include "kernels/gemm/engine.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace dtc::rt {

std::string labelOutsideMessage(int64_t label, int64_t row, int64_t classes) {
  return fmt::format("label {} in row {} is outside the class range [0, {})", label, row,
                     classes);
}

std::string idOutsideMessage(const char *kernel, int64_t id, int64_t row, int64_t rows) {
  return fmt::format("{}: id {} in row {} is outside the table's {} rows [0, {}) (an id "
                     "outside the table; the data is checked when loaded)",
                     kernel, id, row, rows, rows);
}

} // namespace dtc::rt

namespace dtc::kern {

// Below this many elements (parameters) a thread hand-over costs more than
// it saves.
constexpr int64_t kMinPerThread = 32768;

void forRanges(const rt::HostContext &, int64_t units, int64_t unitElements,
               void (*fn)(void *, int64_t, int64_t), void *ctx) {
  if (units <= 0)
    return;
  rt::parallelFor(units, std::max<int64_t>(1, kMinPerThread / std::max<int64_t>(1, unitElements)),
                  fn, ctx);
}
namespace {

constexpr int64_t kChunk = 64;
constexpr int32_t kMaxRank = 6;

[[noreturn]] void fatal(const char *what) {
  std::fprintf(stderr, "train: error: internal error in runtime kernel: %s\n", what);
  std::exit(1);
}

// Class labels come from the data set, which was checked when it was loaded;
// one outside [0, C) that is not the ignore index is still a user error.
// The message is rt::labelOutsideMessage, as the CUDA executor's.
void checkLabels(const int32_t *labels, int64_t B, int64_t C, int64_t ignore) {
  for (int64_t b = 0; b < B; ++b)
    if ((labels[b] < 0 || labels[b] >= C) && labels[b] != ignore) {
      std::fflush(stdout);
      std::fprintf(stderr, "train: error: %s\n",
                   rt::labelOutsideMessage(labels[b], b, C).c_str());
      std::exit(1);
    }
}

// The same for the ids of an embedding's table of `num` rows (the first
// outside it, rt::idOutsideMessage).
void checkIds(const char *kernel, const int32_t *ids, int64_t rows, int64_t num) {
  for (int64_t r = 0; r < rows; ++r)
    if (ids[r] < 0 || ids[r] >= num) {
      std::fflush(stdout);
      std::fprintf(stderr, "train: error: %s\n",
                   rt::idOutsideMessage(kernel, ids[r], r, num).c_str());
      std::exit(1);
    }
}

// The class losses and metrics go over rows in blocks of kLossRows: each
// block's sum in double, the blocks' sums added in block order, so the
// result is the same at any --threads.
constexpr int64_t kLossRows = 64;

// fn(block, begin, end) over the row blocks of [0, B).
template <class F> void forLossBlocks(int64_t B, int64_t C, const F &fn) {
  rt::parallelForRowBlocks(B, kLossRows, C, fn);
}

// Rows of labels [0, B) that are not `ignore`.
int64_t countedRows(const int32_t *labels, int64_t B, int64_t ignore) {
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b)
    n += labels[b] != ignore;
  return n;
}

void contiguousStrides(int32_t rank, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
}

int64_t product(int32_t rank, const int64_t *shape) {
  int64_t p = 1;
  for (int32_t d = 0; d < rank; ++d)
    p *= shape[d];
  return p;
}

// Calls body(o, k0, width, base) for every chunk of the axis view, where base
// is the offset of element [o, 0, k0].
template <int64_t FixedInner, class Body>
inline void forEachChunk(int64_t outer, int64_t n, int64_t innerDyn, Body body) {
  const int64_t inner = FixedInner ? FixedInner : innerDyn;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k0 = 0; k0 < inner; k0 += kChunk)
      body(o, k0, std::min(kChunk, inner - k0), o * n * inner + k0, inner);
}

// Mean: the sum divided by n (in double, one rounding).
template <int64_t FI, bool Mean>
void reduceSumImpl(const float *x, float *y, int64_t outer, int64_t n, int64_t inner) {
  forEachChunk<FI>(outer, n, inner, [&](int64_t o, int64_t k0, int64_t w, int64_t base, int64_t in) {
    double acc[kChunk];
    for (int64_t k = 0; k < w; ++k)
      acc[k] = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float *xr = x + base + i * in;
      for (int64_t k = 0; k < w; ++k)
        acc[k] += xr[k];
    }
    for (int64_t k = 0; k < w; ++k)
      y[o * in + k0 + k] = static_cast<float>(Mean ? acc[k] / double(n) : acc[k]);
  });
}

template <int64_t FI>
void reduceMaxImpl(const float *x, float *y, int64_t outer, int64_t n, int64_t inner) {
  forEachChunk<FI>(outer, n, inner, [&](int64_t o, int64_t k0, int64_t w, int64_t base, int64_t in) {
    float *yr = y + o * in + k0;
    for (int64_t k = 0; k < w; ++k)
      yr[k] = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      const float *xr = x + base + i * in;
      for (int64_t k = 0; k < w; ++k)
        yr[k] = std::max(yr[k], xr[k]);
    }
  });
}

template <int64_t FI>
void reduceMaxGradImpl(const float *x, const float *y, const float *dy, float *dx,
                       int64_t outer, int64_t n, int64_t inner) {
  forEachChunk<FI>(outer, n, inner, [&](int64_t o, int64_t k0, int64_t w, int64_t base, int64_t in) {
    const float *yr = y + o * in + k0;
    const float *dyr = dy + o * in + k0;
    bool found[kChunk];
    for (int64_t k = 0; k < w; ++k)
      found[k] = false;
    for (int64_t i = 0; i < n; ++i) {
      const float *xr = x + base + i * in;
      float *dxr = dx + base + i * in;
      for (int64_t k = 0; k < w; ++k) {
        bool hit = !found[k] && xr[k] == yr[k];
        found[k] = found[k] || hit;
        dxr[k] = hit ? dyr[k] : 0.0f;
      }
    }
  });
}

template <int64_t FI, bool Log>
void softmaxImpl(const float *x, float *y, int64_t outer, int64_t n, int64_t inner) {
  forEachChunk<FI>(outer, n, inner, [&](int64_t, int64_t, int64_t w, int64_t base, int64_t in) {
    float mx[kChunk];
    double sum[kChunk];
    for (int64_t k = 0; k < w; ++k) {
      mx[k] = -std::numeric_limits<float>::infinity();
      sum[k] = 0;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float *xr = x + base + i * in;
      for (int64_t k = 0; k < w; ++k)
        mx[k] = std::max(mx[k], xr[k]);
    }
    for (int64_t i = 0; i < n; ++i) {
      const float *xr = x + base + i * in;
      float *yr = y + base + i * in;
      for (int64_t k = 0; k < w; ++k) {
        float e = std::exp(xr[k] - mx[k]);
        if (!Log)
          yr[k] = e;
        sum[k] += e;
      }
    }
    float post[kChunk]; // Log: log-sum-exp; else 1/sum
    for (int64_t k = 0; k < w; ++k)
      post[k] = Log ? static_cast<float>(mx[k] + std::log(sum[k]))
                    : static_cast<float>(1.0 / sum[k]);
    for (int64_t i = 0; i < n; ++i) {
      const float *xr = x + base + i * in;
      float *yr = y + base + i * in;
      for (int64_t k = 0; k < w; ++k)
        yr[k] = Log ? xr[k] - post[k] : yr[k] * post[k];
    }
  });
}

template <int64_t FI, bool Log>
void softmaxGradImpl(const float *y, const float *dy, float *dx, int64_t outer,
                     int64_t n, int64_t inner) {
  forEachChunk<FI>(outer, n, inner, [&](int64_t, int64_t, int64_t w, int64_t base, int64_t in) {
    double acc[kChunk]; // softmax: sum(dy*y); log-softmax: sum(dy)
    for (int64_t k = 0; k < w; ++k)
      acc[k] = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float *yr = y + base + i * in;
      const float *dyr = dy + base + i * in;
      for (int64_t k = 0; k < w; ++k)
        acc[k] += Log ? dyr[k] : dyr[k] * yr[k];
    }
    float s[kChunk];
    for (int64_t k = 0; k < w; ++k)
      s[k] = static_cast<float>(acc[k]);
    for (int64_t i = 0; i < n; ++i) {
      const float *yr = y + base + i * in;
      const float *dyr = dy + base + i * in;
      float *dxr = dx + base + i * in;
      for (int64_t k = 0; k < w; ++k)
        dxr[k] = Log ? dyr[k] - std::exp(yr[k]) * s[k] : yr[k] * (dyr[k] - s[k]);
    }
  });
}

// Row statistics of logits for the cross-entropy pair: the largest logit
// and the sum of exp(logit - max), eight lanes of float sums (lane l holds
// the classes c = l mod 8) added in double in lane order.
struct RowLse {
  float max;
  double sumExp;
};
// (The bodies are always-inline templates, as attention.cpp's: clang
// rejects a call passing 32-byte vectors in the baseline clone unless it
// is inlined away.)
template <int = 0> [[gnu::always_inline]] inline RowLse rowLseBody(const float *row, int64_t C) {
  using namespace simd;
  const v8 mv = maxOf(row, C);
  v8 acc = {};
  int64_t c = 0;
  for (; c + 8 <= C; c += 8)
    acc += expNonPositive8(load8(row + c) - mv);
  if (c < C) {
    float tail[8] = {};
    std::memcpy(tail, row + c, size_t(C - c) * sizeof(float));
    acc += (v8)(lanesBelow(C - c) & (v8i)expNonPositive8(load8(tail) - mv));
  }
  double s = 0;
  for (int l = 0; l < 8; ++l)
    s += double(acc[l]);
  return {mv[0], s};
}

DTC_SIMD_CLONES
RowLse rowLse(const float *row, int64_t C) { return rowLseBody(row, C); }

// drow[c] = k exp(row[c] - max), as rowLse's exponentials.
template <int = 0>
[[gnu::always_inline]] inline void scaledExpRowBody(const float *row, int64_t C, float max,
                                                    float k, float *drow) {
  using namespace simd;
  const v8 mv = splat8(max), kv = splat8(k);
  int64_t c = 0;
  for (; c + 8 <= C; c += 8)
    store8(drow + c, kv * expNonPositive8(load8(row + c) - mv));
  if (c < C) {
    float tail[8] = {};
    std::memcpy(tail, row + c, size_t(C - c) * sizeof(float));
    const v8 e = kv * expNonPositive8(load8(tail) - mv);
    for (int64_t l = 0; l < C - c; ++l)
      drow[c + l] = e[l];
  }
}
DTC_SIMD_CLONES
void scaledExpRow(const float *row, int64_t C, float max, float k, float *drow) {
  scaledExpRowBody(row, C, max, k, drow);
}

} // namespace

#define DTC_AXIS_DISPATCH(fn, ...)                                             \
  (inner == 1 ? fn<1>(__VA_ARGS__) : fn<0>(__VA_ARGS__))
#define DTC_AXIS_DISPATCH2(fn, flag, ...)                                      \
  (inner == 1 ? fn<1, flag>(__VA_ARGS__) : fn<0, flag>(__VA_ARGS__))

void gemm(const rt::HostContext &, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C) {
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) { // C = beta * C (BLAS rejects lda = 0)
    for (int64_t i = 0; i < M * N; ++i)
      C[i] = beta == 0.0f ? 0.0f : beta * C[i];
    return;
  }
  rt::gemm_engine::gemm(transA, transB, M, N, K, alpha, A, transA ? M : K, B,
                        transB ? K : N, beta, C, N);
}

void gemmBatched(const rt::HostContext &c, bool transA, bool transB, int64_t count, int64_t M,
                 int64_t N, int64_t K, float alpha, const float *A, const float *B, float beta,
                 float *C) {
  if (count <= 0 || M <= 0 || N <= 0)
    return;
  if (K <= 0) // C = beta * C, as gemm
    return gemm(c, transA, transB, count * M, N, K, alpha, A, B, beta, C);
  rt::gemm_engine::gemmBatched(transA, transB, count, M, N, K, alpha, A, B, beta, C);
}

void permute(const rt::HostContext &, const float *x, float *y, int32_t rank,
             const int64_t *xShape, const int32_t *perm) {
  if (rank < 0 || rank > kMaxRank)
    fatal("permute: rank out of range");
  int64_t xStrides[kMaxRank], yShape[kMaxRank], src[kMaxRank];
  contiguousStrides(rank, xShape, xStrides);
  unsigned seen = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (perm[d] < 0 || perm[d] >= rank || (seen >> perm[d] & 1u))
      fatal("permute: invalid permutation");
    seen |= 1u << perm[d];
    yShape[d] = xShape[perm[d]];
    src[d] = xStrides[perm[d]];
  }
  const int64_t total = product(rank, yShape);
  if (total == 0)
    return;
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  // Adjacent output dimensions that are adjacent in x too move as one
  // ([N, C/16, H, W, 16] -> [N, C/16, 16, H, W]: H and W): longer rows.
  int32_t r = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (r > 0 && src[r - 1] == src[d] * yShape[d]) {
      yShape[r - 1] *= yShape[d];
      src[r - 1] = src[d];
    } else {
      yShape[r] = yShape[d];
      src[r] = src[d];
      ++r;
    }
  }
  const int32_t last = r - 1;
  const int64_t n = yShape[last], s = src[last], rows = total / n;
  // Rows in blocks over the cores, each walked by an odometer over the
  // outer dimensions from its first row.
  rt::parallelFor(rows, std::max<int64_t>(1, (int64_t(1) << 14) / n), [&](int64_t b,
                                                                          int64_t e) {
    int64_t idx[kMaxRank] = {};
    int64_t xoff = 0;
    for (int64_t rest = b, d = last - 1; d >= 0; --d) {
      idx[d] = rest % yShape[d];
      rest /= yShape[d];
      xoff += idx[d] * src[d];
    }
    float *yr = y + b * n;
    for (int64_t row = b; row < e; ++row, yr += n) {
      const float *xp = x + xoff;
      if (s == 1)
        std::memcpy(yr, xp, n * sizeof(float));
      else
        for (int64_t j = 0; j < n; ++j)
          yr[j] = xp[j * s];
      for (int32_t d = last - 1; d >= 0; --d) { // odometer over the outer dims
        xoff += src[d];
        if (++idx[d] < yShape[d])
          break;
        xoff -= src[d] * yShape[d];
        idx[d] = 0;
      }
    }
  });
}

void reduceSum(const rt::HostContext &, const float *x, float *y, int64_t outer, int64_t n,
               int64_t inner) {
  DTC_AXIS_DISPATCH2(reduceSumImpl, false, x, y, outer, n, inner);
}

void reduceMax(const rt::HostContext &, const float *x, float *y, int64_t outer, int64_t n,
               int64_t inner) {
  DTC_AXIS_DISPATCH(reduceMaxImpl, x, y, outer, n, inner);
}

void reduceMean(const rt::HostContext &, const float *x, float *y, int64_t outer, int64_t n,
                int64_t inner) {
  DTC_AXIS_DISPATCH2(reduceSumImpl, true, x, y, outer, n, inner);
}

void reduceMaxGrad(const rt::HostContext &, const float *x, const float *y, const float *dy,
                   float *dx, int64_t outer, int64_t n, int64_t inner) {
  DTC_AXIS_DISPATCH(reduceMaxGradImpl, x, y, dy, dx, outer, n, inner);
}

// An x86-64-v3 clone beside the baseline (simd.h): its sums are
// elementwise or in order.
DTC_SIMD_CLONES
void sumTo(const rt::HostContext &, const float *x, int32_t xRank, const int64_t *xShape,
           float *y, int32_t yRank, const int64_t *yShape) {
  if (xRank < 0 || xRank > kMaxRank || yRank < 0 || yRank > xRank)
    fatal("sumTo: rank out of range");
  int64_t yStrides[kMaxRank], ys[kMaxRank]; // ys: y stride per x dimension
  contiguousStrides(yRank, yShape, yStrides);
  for (int32_t d = 0; d < xRank; ++d) {
    int32_t yd = d - (xRank - yRank);
    if (yd < 0 || (yShape[yd] == 1 && xShape[d] != 1))
      ys[d] = 0;
    else if (yShape[yd] == xShape[d])
      ys[d] = yStrides[yd];
    else
      fatal("sumTo: shapes are not broadcast-compatible");
  }
  std::fill(y, y + product(yRank, yShape), 0.0f);
  const int64_t total = product(xRank, xShape);
  if (total == 0)
    return;
  if (xRank == 0) {
    y[0] = x[0];
    return;
  }
  const int32_t last = xRank - 1;
  const int64_t n = xShape[last];
  int64_t idx[kMaxRank] = {};
  int64_t yoff = 0;
  for (int64_t done = 0; done < total; done += n, x += n) {
    if (ys[last] == 0) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j)
        acc += x[j];
      y[yoff] += static_cast<float>(acc);
    } else {
      float *yp = y + yoff;
      for (int64_t j = 0; j < n; ++j)
        yp[j] += x[j];
    }
    for (int32_t d = last - 1; d >= 0; --d) {
      yoff += ys[d];
      if (++idx[d] < xShape[d])
        break;
      yoff -= ys[d] * xShape[d];
      idx[d] = 0;
    }
  }
}

void softmax(const rt::HostContext &, const float *x, float *y, int64_t outer, int64_t n,
             int64_t inner) {
  DTC_AXIS_DISPATCH2(softmaxImpl, false, x, y, outer, n, inner);
}

void logSoftmax(const rt::HostContext &, const float *x, float *y, int64_t outer, int64_t n,
                int64_t inner) {
  DTC_AXIS_DISPATCH2(softmaxImpl, true, x, y, outer, n, inner);
}

void softmaxGrad(const rt::HostContext &, const float *y, const float *dy, float *dx,
                 int64_t outer, int64_t n, int64_t inner) {
  DTC_AXIS_DISPATCH2(softmaxGradImpl, false, y, dy, dx, outer, n, inner);
}

void logSoftmaxGrad(const rt::HostContext &, const float *y, const float *dy, float *dx,
                    int64_t outer, int64_t n, int64_t inner) {
  DTC_AXIS_DISPATCH2(softmaxGradImpl, true, y, dy, dx, outer, n, inner);
}

void crossEntropy(const rt::HostContext &, const float *logits, const int32_t *labels,
                  int64_t B, int64_t C, int64_t ignore, float *out) {
  checkLabels(labels, B, C, ignore);
  if (B <= 0) {
    out[0] = 0.0f;
    return;
  }
  const int64_t blocks = (B + kLossRows - 1) / kLossRows;
  std::vector<double> sums(size_t(blocks), 0.0);
  forLossBlocks(B, C, [&](int64_t block, int64_t begin, int64_t end) {
    double total = 0;
    for (int64_t b = begin; b < end; ++b) {
      if (labels[b] == ignore)
        continue;
      const float *row = logits + b * C;
      RowLse r = rowLse(row, C);
      total += (r.max + std::log(r.sumExp)) - row[labels[b]];
    }
    sums[size_t(block)] = total;
  });
  double total = 0;
  for (double v : sums)
    total += v;
  // Every row ignored: 0 / 0, NaN, as torch.
  out[0] = static_cast<float>(total / double(countedRows(labels, B, ignore)));
}

void crossEntropyGrad(const rt::HostContext &, const float *logits, const int32_t *labels,
                      int64_t B, int64_t C, int64_t ignore, const float *dloss,
                      float *dlogits) {
  checkLabels(labels, B, C, ignore);
  if (B <= 0)
    return;
  const int64_t counted = countedRows(labels, B, ignore);
  const float scale =
      counted > 0 ? static_cast<float>(dloss[0] / static_cast<double>(counted)) : 0.0f;
  forLossBlocks(B, C, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float *row = logits + b * C;
      float *drow = dlogits + b * C;
      if (labels[b] == ignore) {
        std::fill(drow, drow + C, 0.0f);
        continue;
      }
      RowLse r = rowLse(row, C);
      scaledExpRow(row, C, r.max, static_cast<float>(scale / r.sumExp), drow);
      drow[labels[b]] -= scale;
    }
  });
}

void mse(const rt::HostContext &, const float *p, const float *t, int64_t n, float *out) {
  if (n <= 0) {
    out[0] = 0.0f;
    return;
  }
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(p[i]) - double(t[i]);
    acc += d * d;
  }
  out[0] = static_cast<float>(acc / n);
}

void mseGrad(const rt::HostContext &, const float *p, const float *t, int64_t n,
             const float *dloss, float *dp) {
  if (n <= 0)
    return;
  const float k = static_cast<float>(2.0 * dloss[0] / static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i)
    dp[i] = k * (p[i] - t[i]);
}

void accuracy(const rt::HostContext &, const float *logits, const int32_t *labels, int64_t B,
              int64_t C, int64_t ignore, float *out) {
  checkLabels(labels, B, C, ignore);
  if (B <= 0) {
    out[0] = 0.0f;
    return;
  }
  int64_t correct = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (labels[b] == ignore)
      continue;
    const float *row = logits + b * C;
    int64_t best = 0;
    for (int64_t c = 1; c < C; ++c)
      if (row[c] > row[best])
        best = c;
    correct += best == labels[b];
  }
  out[0] = static_cast<float>(double(correct) / double(countedRows(labels, B, ignore)));
}

namespace {
// sum x[i]^2 in double: 16 lanes (four chains of four doubles, so that the
// adds do not wait on each other), lane l holding i = l mod 16, the lanes
// added in order, then the tail.
DTC_SIMD_CLONES
double sumOfSquares(const float *x, int64_t n) {
  using v4d = double __attribute__((vector_size(32)));
  v4d acc[4] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const v4d d = __builtin_convertvector(simd::load4(x + i + 4 * q), v4d);
      acc[q] += d * d;
    }
  double s = 0;
  for (int q = 0; q < 4; ++q)
    for (int l = 0; l < 4; ++l)
      s += acc[q][l];
  for (; i < n; ++i)
    s += double(x[i]) * double(x[i]);
  return s;
}
} // namespace

void sumSquares(const rt::HostContext &, const float *x, int64_t n, float *acc) {
  acc[0] = float(double(acc[0]) + sumOfSquares(x, n));
}

void clipCoef(const rt::HostContext &, const float *sumSquares, const rt::Hyper &h,
              float *coef) {
  coef[0] = rt::clipCoefficient(sumSquares[0], h.maxGradNorm);
}

void arange(const rt::HostContext &, int32_t *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = int32_t(i);
}

void embedding(const rt::HostContext &, const float *weight, const int32_t *ids, int64_t rows,
               int64_t num, int64_t dim, float *out) {
  checkIds("embedding", ids, rows, num);
  rt::parallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, dim)),
              [&](int64_t begin, int64_t end) {
                for (int64_t r = begin; r < end; ++r)
                  std::memcpy(out + r * dim, weight + int64_t(ids[r]) * dim,
                              size_t(dim) * sizeof(float));
              });
}

void embeddingGrad(const rt::HostContext &, const int32_t *ids, const float *dy, int64_t rows,
                   int64_t num, int64_t dim, float *dweight) {
  // Each thread owns a range of columns and adds the rows in their order:
  // the sums are the same at any --threads.
  checkIds("embedding_grad", ids, rows, num);
  std::memset(dweight, 0, size_t(num * dim) * sizeof(float));
  rt::parallelFor(dim, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = 0; r < rows; ++r) {
      float *to = dweight + int64_t(ids[r]) * dim;
      const float *from = dy + r * dim;
      for (int64_t d = begin; d < end; ++d)
        to[d] += from[d];
    }
  });
}

void accumulate(const rt::HostContext &, float *acc, const float *g, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    acc[i] += g[i];
}

void takeAccumulated(const rt::HostContext &, float *acc, const float *g, float *out,
                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = g[i] + acc[i];
    acc[i] = 0.0f;
  }
}

void fill(const rt::HostContext &, float *x, int64_t n, float v) {
  if (n > 0)
    std::fill(x, x + n, v);
}

void copy(const rt::HostContext &, float *dst, const float *src, int64_t n) {
  if (n > 0 && dst != src)
    std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void copyRows(const rt::HostContext &, const float *src, int64_t srcStride, float *dst,
              int64_t dstStride, int64_t rows, int64_t len) {
  if (rows <= 0 || len <= 0)
    return;
  // Rows over the cores, at least 16 KB a share.
  rt::parallelFor(rows, std::max<int64_t>(1, 4096 / len), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      std::memcpy(dst + r * dstStride, src + r * srcStride, size_t(len) * sizeof(float));
  });
}

namespace {

DTC_SIMD_CLONES_NO_FMA
void sgdRange(float *w, const float *g, float *buf, int64_t n, const rt::Hyper &h, float s) {
  // The branches are hoisted out of the loops so that each variant is one
  // vectorizable pass over memory (this runs over every parameter each step).
  // Each gradient is read times s (the clip factor, else 1: the same bits).
  const float lr = h.lr, mom = h.momentum, wd = h.weightDecay;
  const float damp = 1.0f - h.dampening;
  const bool first = h.step <= 1;
  float *__restrict__ W = w;
  const float *__restrict__ G = g;
  float *__restrict__ M = buf;
  if (mom == 0.0f || !buf) {
    if (wd == 0.0f)
      for (int64_t i = 0; i < n; ++i)
        W[i] -= lr * (G[i] * s);
    else
      for (int64_t i = 0; i < n; ++i)
        W[i] -= lr * ((G[i] * s) + wd * W[i]);
    return;
  }
  const float keep = first ? 0.0f : mom, take = first ? 1.0f : damp;
  if (h.nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const float gi = (G[i] * s) + wd * W[i];
      const float b = keep * M[i] + take * gi;
      M[i] = b;
      W[i] -= lr * (gi + mom * b);
    }
  } else if (wd == 0.0f) {
    for (int64_t i = 0; i < n; ++i) {
      const float b = keep * M[i] + take * (G[i] * s);
      M[i] = b;
      W[i] -= lr * b;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float gi = (G[i] * s) + wd * W[i];
      const float b = keep * M[i] + take * gi;
      M[i] = b;
      W[i] -= lr * b;
    }
  }
}

DTC_SIMD_CLONES_NO_FMA
void adamRange(float *w, const float *g, float *m, float *v, int64_t n, const rt::Hyper &h,
               float s, bool decoupled) {
  const float lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weightDecay;
  const double step = static_cast<double>(std::max<int64_t>(h.step, 1));
  const float stepSize = static_cast<float>(lr / (1.0 - std::pow(double(b1), step)));
  const float bc2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double(b2), step)));
  const float decay = decoupled ? 1.0f - lr * wd : 1.0f;
  const float coupledWd = decoupled ? 0.0f : wd;
  // Distinct arrays (restrict) so that the loop vectorizes: this pass over
  // every parameter and both moments is the optimizer's whole cost. The
  // gradient is read times s (the clip factor, else 1: the same bits).
  float *__restrict__ W = w;
  const float *__restrict__ G = g;
  float *__restrict__ M = m;
  float *__restrict__ V = v;
  for (int64_t i = 0; i < n; ++i) {
    const float w0 = W[i];
    const float gi = (G[i] * s) + coupledWd * w0;
    const float mi = b1 * M[i] + (1.0f - b1) * gi;
    const float vi = b2 * V[i] + (1.0f - b2) * gi * gi;
    M[i] = mi;
    V[i] = vi;
    W[i] = w0 * decay - stepSize * mi / (std::sqrt(vi) / bc2Sqrt + eps);
  }
}


// The updates are single passes over parameters, gradients and state,
// limited by memory bandwidth: each parameter's is split over the --threads
// cores (parallel.h), one parameter after the other.
void sgdOne(const rt::UpdateItem &it, const rt::Hyper &h, float s) {
  float *w = it.w, *buf = it.s0;
  const float *g = it.g;
  rt::parallelFor(it.n, kMinPerThread, [&](int64_t b, int64_t e) {
    sgdRange(w + b, g + b, buf ? buf + b : nullptr, e - b, h, s);
  });
}

} // namespace

void sgdUpdate(const rt::HostContext &, const rt::UpdateItem *items, int32_t count,
               const rt::Hyper &h, const float *gradScale) {
  const float s = gradScale ? *gradScale : 1.0f;
  for (int32_t i = 0; i < count; ++i)
    if (items[i].n > 0)
      sgdOne(items[i], h, s);
}

void adamUpdate(const rt::HostContext &, const rt::UpdateItem *items, int32_t count,
                const rt::Hyper &h, const float *gradScale, bool decoupled) {
  const float s = gradScale ? *gradScale : 1.0f;
  for (int32_t i = 0; i < count; ++i) {
    const rt::UpdateItem &it = items[i];
    if (it.n <= 0)
      continue;
    rt::parallelFor(it.n, kMinPerThread, [&](int64_t b, int64_t e) {
      adamRange(it.w + b, it.g + b, it.s0 + b, it.s1 + b, e - b, h, s, decoupled);
    });
  }
}

void momentumAccumulate(const rt::HostContext &, float *buf, const float *g, int64_t n,
                        float share) {
  if (n <= 0)
    return;
  if (share == 0.0f) { // step 1: m = g, whatever the buffer held
    std::memcpy(buf, g, size_t(n) * sizeof(float));
    return;
  }
  float *__restrict__ M = buf;
  const float *__restrict__ G = g;
  for (int64_t i = 0; i < n; ++i)
    M[i] = G[i] + share * M[i];
}

void sgdApplyMomentum(const rt::HostContext &, const rt::UpdateItem *items, int32_t count,
                      const rt::Hyper &h) {
  // Plain SGD (w -= lr * g) with the summed momentum as the gradient.
  rt::Hyper plain = h;
  plain.momentum = 0.0f;
  plain.weightDecay = 0.0f;
  for (int32_t i = 0; i < count; ++i)
    if (items[i].n > 0)
      sgdOne({items[i].w, items[i].g, nullptr, nullptr, items[i].n}, plain, 1.0f);
}

//===--- dropout ------------------------------------------------------------===//

namespace {
void maskedScale(const float *in, float *out, int64_t n, float p, uint64_t seed, int64_t salt) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  rt::parallelFor(n, 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = rt::dropoutKeeps(seed, salt, i, p) ? in[i] * scale : 0.0f;
  });
}
} // namespace

void dropout(const rt::HostContext &, const float *x, float *y, int64_t n, float p,
             uint64_t seed, int64_t salt) {
  maskedScale(x, y, n, p, seed, salt);
}

void dropoutGrad(const rt::HostContext &, const float *dy, float *dx, int64_t n, float p,
                 uint64_t seed, int64_t salt) {
  maskedScale(dy, dx, n, p, seed, salt);
}

void exportPrediction(const rt::HostContext &c, float *dst, const float *src, int64_t n) {
  if (dst)
    copy(c, dst, src, n);
}

} // namespace dtc::kern
