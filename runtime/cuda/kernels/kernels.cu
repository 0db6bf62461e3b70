//===- kernels.cu - dtc/cuda.h: the CUDA twins of kernels/kernels.cpp -----===//
//
// Every function queues work on the context's stream and returns: no host
// synchronization, no allocation, no host round trip. Host-side arguments
// (shapes, permutations, optimizer items) travel by value in kernel
// parameters. The formulas are those of kernels.cpp; sums are float tree
// reductions (the losses accumulate in double, in one block).
//
// conv.cu, norm.cu and attention.cu hold the twins of conv.cpp, norm.cpp
// and attention.cpp; common.cuh the helpers they share.
//
// Axis views [outer, n, inner] use one block per (outer index, chunk of
// inner): TX threads along inner (coalesced), TY along n, combined through
// shared memory; inner == 1 (the common last-axis case) uses TX = 1,
// TY = 256.
//
//===----------------------------------------------------------------------===//
#include "kernels/common.cuh"

namespace dtc::cuda {
namespace {

//===--- elementwise ------------------------------------------------------===//

__global__ void fillKernel(float *x, int64_t n, float v) {
  for (int64_t i = globalThread(); i < n; i += gridThreads())
    x[i] = v;
}

__global__ void accumulateKernel(float *acc, const float *g, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += gridThreads())
    acc[i] += g[i];
}

__global__ void takeAccumulatedKernel(float *acc, const float *g, float *out, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += gridThreads()) {
    out[i] = g[i] + acc[i];
    acc[i] = 0.0f;
  }
}

__global__ void scaleKernel(float *x, int64_t n, float factor) {
  for (int64_t i = globalThread(); i < n; i += gridThreads())
    x[i] = factor == 0.0f ? 0.0f : x[i] * factor;
}

// buf = g + share * buf (share != 0; share == 0 is a copy).
__global__ void momentumAccumulateKernel(float *buf, const float *g, int64_t n, float share) {
  for (int64_t i = globalThread(); i < n; i += gridThreads())
    buf[i] = g[i] + share * buf[i];
}

//===--- permute, sumTo -----------------------------------------------------===//

struct PermuteArgs {
  int32_t rank;
  int64_t total;
  int64_t yShape[kMaxRank];
  int64_t srcStride[kMaxRank]; // x stride of y's dimension d
};

__global__ void permuteKernel(const float *x, float *y, PermuteArgs a) {
  for (int64_t t = globalThread(); t < a.total; t += gridThreads()) {
    int64_t rem = t, off = 0;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d)
      if (d < a.rank) {
        const int64_t c = rem % a.yShape[d];
        rem /= a.yShape[d];
        off += c * a.srcStride[d];
      }
    y[t] = x[off];
  }
}

// x's dimensions split into those y keeps (y's row-major order) and those
// summed over; size-1 dimensions are dropped.
struct SumToArgs {
  int32_t keptRank, redRank;
  int64_t yCount, redCount;
  int64_t keptShape[kMaxRank], keptStride[kMaxRank];
  int64_t redShape[kMaxRank], redStride[kMaxRank];
};

// The element offset of linear index t in a strided view of `rank` dims.
__device__ inline int64_t stridedOffset(int32_t rank, const int64_t *shape,
                                        const int64_t *stride, int64_t t) {
  int64_t off = 0;
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d)
    if (d < rank) {
      off += (t % shape[d]) * stride[d];
      t /= shape[d];
    }
  return off;
}
__device__ inline int64_t keptOffset(const SumToArgs &a, int64_t t) {
  return stridedOffset(a.keptRank, a.keptShape, a.keptStride, t);
}
__device__ inline int64_t redOffset(const SumToArgs &a, int64_t r) {
  return stridedOffset(a.redRank, a.redShape, a.redStride, r);
}

// Many outputs: one thread each, walking the summed dimensions (odometer).
__global__ void sumToThreadKernel(const float *x, float *y, SumToArgs a) {
  for (int64_t t = globalThread(); t < a.yCount; t += gridThreads()) {
    const float *base = x + keptOffset(a, t);
    int64_t idx[kMaxRank] = {0, 0, 0, 0, 0, 0};
    int64_t off = 0;
    float acc = 0;
    for (int64_t r = 0; r < a.redCount; ++r) {
      acc += base[off];
      for (int d = a.redRank - 1; d >= 0; --d) {
        off += a.redStride[d];
        if (++idx[d] < a.redShape[d])
          break;
        off -= a.redStride[d] * a.redShape[d];
        idx[d] = 0;
      }
    }
    y[t] = acc;
  }
}

// Few outputs: one block each.
__global__ void sumToBlockKernel(const float *x, float *y, SumToArgs a) {
  __shared__ float sm[kThreads];
  for (int64_t t = blockIdx.x; t < a.yCount; t += gridDim.x) {
    const float *base = x + keptOffset(a, t);
    float acc = 0;
    for (int64_t r = threadIdx.y; r < a.redCount; r += kThreads)
      acc += base[redOffset(a, r)];
    acc = reduceY<1, kThreads>(acc, Add(), sm);
    if (threadIdx.y == 0)
      y[t] = acc;
  }
}

//===--- axis views ---------------------------------------------------------===//

// Block (TX, TY): column k = blockIdx.x * TX + threadIdx.x, rows i =
// threadIdx.y + j * TY; outer indices blockIdx.y + j * gridDim.y.
#define DTC_AXIS_PROLOGUE                                                      \
  const int64_t k = int64_t(blockIdx.x) * TX + threadIdx.x;                    \
  const bool active = k < inner;

template <int TX, int TY>
__global__ void reduceSumKernel(const float *x, float *y, int64_t outer, int64_t n,
                                int64_t inner) {
  __shared__ float sm[TX * TY];
  DTC_AXIS_PROLOGUE
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc = 0;
    if (active)
      for (int64_t i = threadIdx.y; i < n; i += TY)
        acc += x[(o * n + i) * inner + k];
    acc = reduceY<TX, TY>(acc, Add(), sm);
    if (active && threadIdx.y == 0)
      y[o * inner + k] = acc;
  }
}

template <int TX, int TY>
__global__ void reduceMaxKernel(const float *x, float *y, int64_t outer, int64_t n,
                                int64_t inner) {
  __shared__ float sm[TX * TY];
  DTC_AXIS_PROLOGUE
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float m = -INFINITY;
    if (active)
      for (int64_t i = threadIdx.y; i < n; i += TY)
        m = maxOf(m, x[(o * n + i) * inner + k]);
    m = reduceY<TX, TY>(m, Max(), sm);
    if (active && threadIdx.y == 0)
      y[o * inner + k] = m;
  }
}

template <int TX, int TY>
__global__ void reduceMaxGradKernel(const float *x, const float *y, const float *dy, float *dx,
                                    int64_t outer, int64_t n, int64_t inner) {
  __shared__ int64_t sm[TX * TY];
  DTC_AXIS_PROLOGUE
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    const float yv = active ? y[o * inner + k] : 0.0f;
    int64_t first = n; // the first i with x == y
    if (active)
      for (int64_t i = threadIdx.y; i < n; i += TY)
        if (x[(o * n + i) * inner + k] == yv) {
          first = i;
          break;
        }
    first = reduceY<TX, TY>(first, Min(), sm);
    if (active) {
      const float g = dy[o * inner + k];
      for (int64_t i = threadIdx.y; i < n; i += TY)
        dx[(o * n + i) * inner + k] = i == first ? g : 0.0f;
    }
  }
}

template <int TX, int TY, bool Log>
__global__ void softmaxKernel(const float *x, float *y, int64_t outer, int64_t n, int64_t inner) {
  __shared__ float sm[TX * TY];
  DTC_AXIS_PROLOGUE
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float m = -INFINITY;
    if (active)
      for (int64_t i = threadIdx.y; i < n; i += TY)
        m = maxOf(m, x[(o * n + i) * inner + k]);
    m = reduceY<TX, TY>(m, Max(), sm);
    float sum = 0;
    if (active)
      for (int64_t i = threadIdx.y; i < n; i += TY) {
        const int64_t at = (o * n + i) * inner + k;
        const float e = expf(x[at] - m);
        if (!Log)
          y[at] = e;
        sum += e;
      }
    sum = reduceY<TX, TY>(sum, Add(), sm);
    const float post = Log ? m + logf(sum) : 1.0f / sum; // Log: log-sum-exp
    if (active)
      for (int64_t i = threadIdx.y; i < n; i += TY) { // the rows this thread wrote
        const int64_t at = (o * n + i) * inner + k;
        y[at] = Log ? x[at] - post : y[at] * post;
      }
  }
}

template <int TX, int TY, bool Log>
__global__ void softmaxGradKernel(const float *y, const float *dy, float *dx, int64_t outer,
                                  int64_t n, int64_t inner) {
  __shared__ float sm[TX * TY];
  DTC_AXIS_PROLOGUE
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc = 0; // softmax: sum(dy*y); log-softmax: sum(dy)
    if (active)
      for (int64_t i = threadIdx.y; i < n; i += TY) {
        const int64_t at = (o * n + i) * inner + k;
        acc += Log ? dy[at] : dy[at] * y[at];
      }
    const float s = reduceY<TX, TY>(acc, Add(), sm);
    if (active)
      for (int64_t i = threadIdx.y; i < n; i += TY) {
        const int64_t at = (o * n + i) * inner + k;
        dx[at] = Log ? dy[at] - expf(y[at]) * s : y[at] * (dy[at] - s);
      }
  }
}

#undef DTC_AXIS_PROLOGUE

// Launches kernel<TX, TY, ...> over an axis view.
struct AxisLaunch {
  dim3 grid, block;
  bool empty;
};
template <int TX, int TY> AxisLaunch axisLaunch(int64_t outer, int64_t inner) {
  AxisLaunch l;
  l.empty = outer <= 0 || inner <= 0;
  l.grid = dim3(unsigned(std::max<int64_t>(1, (inner + TX - 1) / TX)),
                unsigned(std::max<int64_t>(1, std::min<int64_t>(outer, 65535))));
  l.block = dim3(TX, TY);
  return l;
}

#define DTC_AXIS_LAUNCH(stream, name, kernel, ...)                             \
  do {                                                                         \
    if (inner == 1) {                                                          \
      AxisLaunch l = axisLaunch<1, 256>(outer, inner);                         \
      if (l.empty)                                                             \
        break;                                                                 \
      kernel<1, 256><<<l.grid, l.block, 0, stream>>>(__VA_ARGS__);             \
    } else {                                                                   \
      AxisLaunch l = axisLaunch<32, 8>(outer, inner);                          \
      if (l.empty)                                                             \
        break;                                                                 \
      kernel<32, 8><<<l.grid, l.block, 0, stream>>>(__VA_ARGS__);              \
    }                                                                          \
    checkLaunch(name);                                                         \
  } while (0)

#define DTC_AXIS_LAUNCH_LOG(stream, name, kernel, log, ...)                    \
  do {                                                                         \
    if (inner == 1) {                                                          \
      AxisLaunch l = axisLaunch<1, 256>(outer, inner);                         \
      if (l.empty)                                                             \
        break;                                                                 \
      kernel<1, 256, log><<<l.grid, l.block, 0, stream>>>(__VA_ARGS__);        \
    } else {                                                                   \
      AxisLaunch l = axisLaunch<32, 8>(outer, inner);                          \
      if (l.empty)                                                             \
        break;                                                                 \
      kernel<32, 8, log><<<l.grid, l.block, 0, stream>>>(__VA_ARGS__);         \
    }                                                                          \
    checkLaunch(name);                                                         \
  } while (0)

//===--- losses and metrics ---------------------------------------------------===//

constexpr int kLossThreads = 1024; // one block: 32 warps, a warp per row

//===--- labels and ids outside their range -----------------------------------===//
//
// The data sets are checked when loaded (file and offset); the kernels are
// the last guard, as kernels.cpp's. Where the CPU kernel stops, the CUDA
// kernel reads a clamped index (never out of bounds) and records the fault;
// the executor reads it back with the outputs (takeRangeFault) and stops
// with the CPU kernel's message. Of several faults the one kept is the
// smallest key (site, row, value), so every run reports the same: a site is
// a (kind, limit) pair, numbered by the host in the order of first use (the
// first kernel of a step first, as the CPU stops at it), the row saturates
// at 2^24 - 1.
enum class RangeKind : int32_t { Label, Embedding, EmbeddingGrad };
struct RangeSite {
  RangeKind kind;
  int64_t limit;
};
constexpr uint32_t kMaxRangeSites = 255; // site 255: any later one
constexpr unsigned long long kNoRangeFault = ~0ull;
__device__ unsigned long long gRangeFault = kNoRangeFault;
constexpr uint32_t kNoSite = 0xffffffffu; // checkedId: do not record

std::mutex gRangeSitesMutex;
std::vector<RangeSite> gRangeSites;

uint32_t rangeSite(RangeKind kind, int64_t limit) {
  std::lock_guard<std::mutex> lock(gRangeSitesMutex);
  for (size_t i = 0; i < gRangeSites.size(); ++i)
    if (gRangeSites[i].kind == kind && gRangeSites[i].limit == limit)
      return uint32_t(i);
  if (gRangeSites.size() >= kMaxRangeSites)
    return kMaxRangeSites;
  gRangeSites.push_back({kind, limit});
  return uint32_t(gRangeSites.size() - 1);
}

__device__ void recordRangeFault(uint32_t site, int64_t row, int32_t value) {
  if (site == kNoSite)
    return;
  const unsigned long long r = row < 0xffffff ? (unsigned long long)row : 0xffffffull;
  atomicMin(&gRangeFault, (static_cast<unsigned long long>(site) << 56) | (r << 32) |
                              static_cast<uint32_t>(value));
}

// labels[b] as an index into a row of C: clamped into it, a fault recorded.
__device__ inline int32_t checkedLabel(int32_t label, int64_t b, int64_t C, uint32_t site) {
  if (label >= 0 && label < C)
    return label;
  recordRangeFault(site, b, label);
  return label < 0 ? 0 : int32_t(C - 1);
}

// ids[r] as a row of a table of num rows: likewise.
__device__ inline int64_t checkedId(int32_t id, int64_t r, int64_t num, uint32_t site) {
  if (id >= 0 && id < num)
    return id;
  recordRangeFault(site, r, id);
  return id < 0 ? 0 : num - 1;
}

// Rows of labels [0, B) that are not `ignore`, summed over the block (all
// threads get it).
__device__ int64_t blockCountedRows(const int32_t *labels, int64_t B, int64_t ignore,
                                    double *sm) {
  double n = 0;
  for (int64_t b = threadIdx.x; b < B; b += blockDim.x)
    n += labels[b] != ignore;
  n = warpSum(n);
  const double total = blockSumOfWarps(n, sm);
  __shared__ int64_t counted;
  if (threadIdx.x == 0)
    counted = int64_t(total);
  __syncthreads();
  const int64_t v = counted;
  __syncthreads(); // sm and counted are free again
  return v;
}

// The mean cross-entropy over the grid: pass 1 gives each block a run of
// consecutive rows (a warp per row, lane 0 adding the warp's rows in
// order, in double) and writes the block's sum to gPartials; pass 2 (one
// block) adds them in a fixed order and divides by the rows counted. The
// grid depends on B alone, so every run adds the same terms in the same
// order: the result repeats bit for bit. gPartials is shared by the
// two-pass reductions of one stream (those of a device run one at a time,
// each pass 2 before the next pass 1).
constexpr int kPartialThreads = 256;
__device__ double gPartials[kMaxBlocks];

// The blocks of pass 1 over `units` items, `perBlock` per block at least.
unsigned partialBlocks(int64_t units, int64_t perBlock) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((units + perBlock - 1) / perBlock,
                                                         kMaxBlocks)));
}

// Rows [begin, end) of block blockIdx.x when B rows are split into
// gridDim.x runs.
__device__ inline void blockRows(int64_t B, int64_t &begin, int64_t &end) {
  const int64_t per = (B + gridDim.x - 1) / gridDim.x;
  begin = per * blockIdx.x;
  end = begin + per < B ? begin + per : B;
}

__global__ void __launch_bounds__(kPartialThreads)
crossEntropyPartialKernel(const float *logits, const int32_t *labels, int64_t B, int64_t C,
                          int64_t ignore, uint32_t site) {
  __shared__ double sm[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  int64_t begin, end;
  blockRows(B, begin, end);
  double acc = 0; // lane 0: this warp's rows
  for (int64_t b = begin + warp; b < end; b += warps) {
    if (labels[b] == ignore)
      continue;
    const float *row = logits + b * C;
    float m = -INFINITY;
    for (int64_t c = lane; c < C; c += 32)
      m = maxOf(m, row[c]);
    m = warpMax(m);
    float s = 0;
    for (int64_t c = lane; c < C; c += 32)
      s += expf(row[c] - m);
    s = warpSum(s);
    if (lane == 0)
      acc += (double(m) + log(double(s))) - double(row[checkedLabel(labels[b], b, C, site)]);
  }
  const double total = blockSumOfWarps(acc, sm);
  if (threadIdx.x == 0)
    gPartials[blockIdx.x] = total;
}

// The sum of gPartials[0, n) in a fixed order (every thread a strided run,
// then the block's tree); thread 0 gets it.
__device__ double sumOfPartials(int64_t n, double *sm) {
  double v = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    v += gPartials[i];
  return blockSumOfWarps(warpSum(v), sm);
}

__global__ void __launch_bounds__(kPartialThreads)
crossEntropyFinishKernel(int64_t partials, const int32_t *labels, int64_t B, int64_t ignore,
                         float *out) {
  __shared__ double sm[32];
  const int64_t counted = blockCountedRows(labels, B, ignore, sm);
  const double total = sumOfPartials(partials, sm);
  if (threadIdx.x == 0) // every row ignored: NaN, as torch
    *out = B > 0 ? float(total / double(counted)) : 0.0f;
}

__global__ void crossEntropyGradKernel(const float *logits, const int32_t *labels, int64_t B,
                                       int64_t C, int64_t ignore, const float *dloss,
                                       float *dlogits, uint32_t site) {
  __shared__ double sm[32];
  // Every block counts the rows itself (B labels: cheap beside B * C logits).
  const int64_t counted = blockCountedRows(labels, B, ignore, sm);
  const int lane = threadIdx.x & 31;
  const int64_t warpsPerGrid = int64_t(gridDim.x) * (blockDim.x >> 5);
  const float scale = counted > 0 ? float(double(dloss[0]) / double(counted)) : 0.0f;
  for (int64_t b = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); b < B;
       b += warpsPerGrid) {
    const float *row = logits + b * C;
    float *drow = dlogits + b * C;
    if (labels[b] == ignore) {
      for (int64_t c = lane; c < C; c += 32)
        drow[c] = 0.0f;
      continue;
    }
    float m = -INFINITY;
    for (int64_t c = lane; c < C; c += 32)
      m = maxOf(m, row[c]);
    m = warpMax(m);
    float s = 0;
    for (int64_t c = lane; c < C; c += 32)
      s += expf(row[c] - m);
    s = warpSum(s);
    const float k = float(double(scale) / double(s));
    const int32_t label = checkedLabel(labels[b], b, C, site);
    for (int64_t c = lane; c < C; c += 32) {
      const float g = __fmul_rn(k, expf(row[c] - m));
      drow[c] = c == label ? g - scale : g;
    }
  }
}

__global__ void __launch_bounds__(kLossThreads)
mseKernel(const float *p, const float *t, int64_t n, float *out) {
  __shared__ double sm[32];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = double(p[i]) - double(t[i]);
    acc += d * d;
  }
  acc = warpSum(acc);
  const double total = blockSumOfWarps(acc, sm);
  if (threadIdx.x == 0)
    *out = n > 0 ? float(total / double(n)) : 0.0f;
}

__global__ void mseGradKernel(const float *p, const float *t, int64_t n, const float *dloss,
                              float *dp) {
  const float k = float(2.0 * double(dloss[0]) / double(n));
  for (int64_t i = globalThread(); i < n; i += gridThreads())
    dp[i] = k * (p[i] - t[i]);
}

__global__ void __launch_bounds__(kLossThreads)
accuracyKernel(const float *logits, const int32_t *labels, int64_t B, int64_t C,
                               int64_t ignore, float *out, uint32_t site) {
  __shared__ double sm[32];
  const int64_t counted = blockCountedRows(labels, B, ignore, sm);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  double correct = 0; // lane 0
  for (int64_t b = warp; b < B; b += warps) {
    if (labels[b] == ignore)
      continue;
    if (lane == 0)
      checkedLabel(labels[b], b, C, site); // a label outside never matches
    const float *row = logits + b * C;
    float bv = 0;
    int64_t bi = -1; // the first maximum (strict >, as kernels.cpp)
    for (int64_t c = lane; c < C; c += 32)
      if (bi < 0 || row[c] > bv) {
        bv = row[c];
        bi = c;
      }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
      const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (oi >= 0 && (bi < 0 || ov > bv || (!(bv > ov) && oi < bi))) {
        bv = ov;
        bi = oi;
      }
    }
    if (lane == 0 && bi == int64_t(labels[b]))
      correct += 1;
  }
  const double total = blockSumOfWarps(correct, sm);
  if (threadIdx.x == 0)
    *out = B > 0 ? float(total / double(counted)) : 0.0f;
}

//===--- embeddings -----------------------------------------------------------===//

// acc[0] += the sum of x's squares, in double over the grid: pass 1 a
// grid-stride run per thread and the block's sum into gPartials, pass 2
// (one block) their sum in a fixed order (the grid depends on n alone: the
// same result on every run).
__global__ void __launch_bounds__(kPartialThreads)
sumSquaresPartialKernel(const float *x, int64_t n) {
  __shared__ double sm[32];
  double s = 0;
  for (int64_t i = globalThread(); i < n; i += gridThreads())
    s += double(x[i]) * double(x[i]);
  const double total = blockSumOfWarps(warpSum(s), sm);
  if (threadIdx.x == 0)
    gPartials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kPartialThreads)
sumSquaresFinishKernel(int64_t partials, float *acc) {
  __shared__ double sm[32];
  const double total = sumOfPartials(partials, sm);
  if (threadIdx.x == 0)
    acc[0] = float(double(acc[0]) + total);
}

__global__ void clipCoefKernel(const float *sumSquares, float maxNorm, float *coef) {
  coef[0] = rt::clipCoefficient(sumSquares[0], maxNorm);
}

__global__ void arangeKernel(int32_t *x, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += gridThreads())
    x[i] = int32_t(i);
}

// An id outside the table reads a row clamped into it (a fault recorded).
__global__ void embeddingKernel(const float *weight, const int32_t *ids, int64_t rows,
                                int64_t num, int64_t dim, float *out, uint32_t site) {
  for (int64_t i = globalThread(); i < rows * dim; i += gridThreads()) {
    const int64_t r = i / dim, d = i - r * dim;
    out[i] = weight[checkedId(ids[r], r, num, d == 0 ? site : kNoSite) * dim + d];
  }
}

// dweight (zeroed) += dy's rows at their ids. Each element (id, d) adds
// the rows of its id in row order, as the CPU kernel: the same floats, no
// atomics. The work is split over (column, group of ids): the ids fall
// into `groups` groups (id % groups), a warp per group and 32 columns, so
// that every output element has one owner; the block stages the ids in
// shared memory tile by tile and each warp scans every row of the tile,
// adding those of its group. Grid: x over column chunks (grid-stride past
// kMaxBlocks), y over groups of 8.
constexpr int kEmbeddingGradWarps = 8;
constexpr int kEmbeddingGradTile = 32 * kEmbeddingGradWarps;
__global__ void __launch_bounds__(32 * kEmbeddingGradWarps)
embeddingGradKernel(const int32_t *ids, const float *dy, int64_t rows, int64_t num,
                    int64_t dim, int64_t groups, float *dweight, uint32_t site) {
  __shared__ int32_t tileId[kEmbeddingGradTile];
  __shared__ int32_t tileGroup[kEmbeddingGradTile];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t group = int64_t(blockIdx.y) * kEmbeddingGradWarps + warp;
  for (int64_t col0 = int64_t(blockIdx.x) * 32; col0 < dim; col0 += int64_t(gridDim.x) * 32) {
    const int64_t d = col0 + lane;
    for (int64_t r0 = 0; r0 < rows; r0 += kEmbeddingGradTile) {
      const int64_t r = r0 + threadIdx.x;
      if (r < rows) {
        // Out of the table: recorded (by one block), and in no group.
        const int32_t id = ids[r];
        const bool in = id >= 0 && id < num;
        if (!in && blockIdx.x == 0 && blockIdx.y == 0 && col0 == 0)
          recordRangeFault(site, r, id);
        tileId[threadIdx.x] = id;
        tileGroup[threadIdx.x] = in ? int32_t(id % groups) : -1;
      }
      __syncthreads();
      const int64_t n = rows - r0 < kEmbeddingGradTile ? rows - r0 : kEmbeddingGradTile;
      if (group < groups && d < dim)
        for (int64_t t = 0; t < n; ++t)
          if (tileGroup[t] == group)
            dweight[int64_t(tileId[t]) * dim + d] += dy[(r0 + t) * dim + d];
      __syncthreads(); // the tile is reused
    }
  }
}

//===--- optimizer updates ----------------------------------------------------===//

constexpr int32_t kItemsPerLaunch = 32;

struct UpdateBatch {
  rt::UpdateItem items[kItemsPerLaunch];
};

// gradScale: the clip factor (device memory), or null.
struct SgdParams {
  float lr, momentum, weightDecay, damp;
  int32_t nesterov, first;
  const float *gradScale;
};

struct AdamParams {
  float beta1, beta2, eps, stepSize, bc2Sqrt, decay, coupledWd;
  const float *gradScale;
};

// g times the clip factor, rounded as the CPU rounds it (no FMA with what
// is added next).
__device__ inline float scaledGrad(float g, const float *gradScale) {
  return gradScale ? __fmul_rn(g, *gradScale) : g;
}

// Block row blockIdx.y updates item blockIdx.y of the launch.
__global__ void sgdKernel(UpdateBatch batch, SgdParams h) {
  const rt::UpdateItem it = batch.items[blockIdx.y];
  for (int64_t i = globalThread(); i < it.n; i += gridThreads()) {
    float gi = scaledGrad(it.g[i], h.gradScale);
    if (h.weightDecay != 0.0f)
      gi += h.weightDecay * it.w[i];
    if (h.momentum != 0.0f && it.s0) {
      const float b = h.first ? gi : h.momentum * it.s0[i] + h.damp * gi;
      it.s0[i] = b;
      gi = h.nesterov ? gi + h.momentum * b : b;
    }
    it.w[i] -= h.lr * gi;
  }
}

__global__ void adamKernel(UpdateBatch batch, AdamParams h) {
  const rt::UpdateItem it = batch.items[blockIdx.y];
  for (int64_t i = globalThread(); i < it.n; i += gridThreads()) {
    const float w = it.w[i];
    const float wi = w * h.decay;
    const float gi = scaledGrad(it.g[i], h.gradScale) + h.coupledWd * w;
    const float mi = h.beta1 * it.s0[i] + (1.0f - h.beta1) * gi;
    const float vi = h.beta2 * it.s1[i] + (1.0f - h.beta2) * gi * gi;
    it.s0[i] = mi;
    it.s1[i] = vi;
    it.w[i] = wi - h.stepSize * mi / (sqrtf(vi) / h.bc2Sqrt + h.eps);
  }
}

// One launch per kItemsPerLaunch items: grid (blocks for the largest item,
// items).
template <class Params, class Kernel>
void launchUpdates(const rt::DeviceContext &c, const rt::UpdateItem *items, int32_t count,
                   const Params &p, Kernel kernel, const char *name) {
  for (int32_t first = 0; first < count; first += kItemsPerLaunch) {
    const int32_t m = std::min(kItemsPerLaunch, count - first);
    UpdateBatch batch{};
    int64_t maxN = 0;
    int32_t used = 0;
    for (int32_t i = 0; i < m; ++i)
      if (items[first + i].n > 0) {
        batch.items[used++] = items[first + i];
        maxN = std::max(maxN, items[first + i].n);
      }
    if (used == 0)
      continue;
    kernel<<<dim3(gridFor(maxN), unsigned(used)), kThreads, 0, c.stream>>>(batch, p);
    checkLaunch(name);
  }
}

} // namespace

void launched(const char *kernel) { checkLaunch(kernel); }

} // namespace dtc::cuda

namespace dtc::rt {

bool isKernelFault(cudaError_t e) {
  switch (e) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchFailure:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchTimeout:
    return true;
  default:
    return false;
  }
}

std::string launchFailure(const char *kernel, cudaError_t e, bool blocking) {
  const std::string what = cudaMessage(e);
  if (!isKernelFault(e))
    return std::string("CUDA error when launching ") + kernel + ": " + what;
  if (blocking)
    return std::string("CUDA error: kernel ") + kernel + " faulted: " + what +
           " (CUDA_LAUNCH_BLOCKING=1: the kernel named is the one that faulted)";
  return std::string("CUDA error: a kernel faulted: ") + what + "; it showed when " + kernel +
         " was launched, but the fault may be an earlier kernel's (CUDA reports a fault at "
         "the next call); rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel that faulted";
}

std::string takeRangeFault(cudaStream_t stream) {
  unsigned long long key = cuda::kNoRangeFault;
  cudaCheck(cudaMemcpyFromSymbolAsync(&key, cuda::gRangeFault, sizeof key, 0,
                                      cudaMemcpyDeviceToHost, stream),
            "reading the kernels' range check");
  cudaCheck(cudaStreamSynchronize(stream), "reading the kernels' range check");
  if (key == cuda::kNoRangeFault)
    return "";
  const unsigned long long none = cuda::kNoRangeFault;
  cudaCheck(cudaMemcpyToSymbolAsync(cuda::gRangeFault, &none, sizeof none, 0,
                                    cudaMemcpyHostToDevice, stream),
            "resetting the kernels' range check");
  cudaCheck(cudaStreamSynchronize(stream), "resetting the kernels' range check");
  const uint32_t site = uint32_t(key >> 56);
  const int64_t row = int64_t((key >> 32) & 0xffffff);
  const int32_t value = int32_t(uint32_t(key));
  cuda::RangeSite where{cuda::RangeKind::Label, -1};
  {
    std::lock_guard<std::mutex> lock(cuda::gRangeSitesMutex);
    if (site < cuda::gRangeSites.size())
      where = cuda::gRangeSites[site];
  }
  if (where.limit < 0)
    return "a kernel met a class label or an id outside its range: " + std::to_string(value) +
           " in row " + std::to_string(row);
  switch (where.kind) {
  case cuda::RangeKind::Label:
    return labelOutsideMessage(value, row, where.limit);
  case cuda::RangeKind::Embedding:
    return idOutsideMessage("embedding", value, row, where.limit);
  case cuda::RangeKind::EmbeddingGrad:
    return idOutsideMessage("embedding_grad", value, row, where.limit);
  }
  return "";
}

} // namespace dtc::rt

namespace dtc::cuda {

//===--- the API --------------------------------------------------------------===//

void gemm(const rt::DeviceContext &c, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C) {
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) { // C = beta * C
    scaleKernel<<<gridFor(M * N), kThreads, 0, c.stream>>>(C, M * N, beta);
    checkLaunch("gemm (K = 0)");
    return;
  }
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
  // row-major operands, read column-major, are already transposed.
  const int64_t lda = transA ? M : K;
  const int64_t ldb = transB ? K : N;
  const cublasStatus_t st =
      cublasSgemm_64(c.blas, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                     N, M, K, &alpha, B, ldb, A, lda, &beta, C, N);
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: error: cublasSgemm failed: %s\n", cublasGetStatusString(st));
    die();
  }
}

void gemmBatched(const rt::DeviceContext &c, bool transA, bool transB, int64_t count, int64_t M,
                 int64_t N, int64_t K, float alpha, const float *A, const float *B, float beta,
                 float *C) {
  if (count <= 0 || M <= 0 || N <= 0)
    return;
  if (K <= 0)
    return gemm(c, transA, transB, count * M, N, K, alpha, A, B, beta, C);
  // Column-major C_i^T = op(B_i)^T op(A_i)^T, as gemm, over count strided
  // products.
  const int64_t lda = transA ? M : K;
  const int64_t ldb = transB ? K : N;
  const cublasStatus_t st = cublasSgemmStridedBatched_64(
      c.blas, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
      &alpha, B, ldb, K * N, A, lda, M * K, &beta, C, N, M * N, count);
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: error: cublasSgemmStridedBatched failed: %s\n",
                 cublasGetStatusString(st));
    die();
  }
}

void permute(const rt::DeviceContext &c, const float *x, float *y, int32_t rank,
             const int64_t *xShape, const int32_t *perm) {
  if (rank < 0 || rank > kMaxRank)
    fatal("permute: rank out of range");
  PermuteArgs a{};
  a.rank = rank;
  int64_t xStrides[kMaxRank];
  int64_t s = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    xStrides[d] = s;
    s *= xShape[d];
  }
  unsigned seen = 0;
  a.total = 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (perm[d] < 0 || perm[d] >= rank || (seen >> perm[d] & 1u))
      fatal("permute: invalid permutation");
    seen |= 1u << perm[d];
    a.yShape[d] = xShape[perm[d]];
    a.srcStride[d] = xStrides[perm[d]];
    a.total *= a.yShape[d];
  }
  if (a.total == 0)
    return;
  permuteKernel<<<gridFor(a.total), kThreads, 0, c.stream>>>(x, y, a);
  checkLaunch("permute");
}

void reduceSum(const rt::DeviceContext &c, const float *x, float *y, int64_t outer, int64_t n,
               int64_t inner) {
  DTC_AXIS_LAUNCH(c.stream, "reduceSum", reduceSumKernel, x, y, outer, n, inner);
}

void reduceMax(const rt::DeviceContext &c, const float *x, float *y, int64_t outer, int64_t n,
               int64_t inner) {
  DTC_AXIS_LAUNCH(c.stream, "reduceMax", reduceMaxKernel, x, y, outer, n, inner);
}

void reduceMean(const rt::DeviceContext &c, const float *x, float *y, int64_t outer, int64_t n,
                int64_t inner) {
  reduceSum(c, x, y, outer, n, inner);
  const int64_t count = outer * inner;
  if (count <= 0)
    return;
  scaleKernel<<<gridFor(count), kThreads, 0, c.stream>>>(y, count, float(1.0 / double(n)));
  checkLaunch("reduceMean");
}

void reduceMaxGrad(const rt::DeviceContext &c, const float *x, const float *y, const float *dy,
                   float *dx, int64_t outer, int64_t n, int64_t inner) {
  DTC_AXIS_LAUNCH(c.stream, "reduceMaxGrad", reduceMaxGradKernel, x, y, dy, dx, outer, n, inner);
}

void sumTo(const rt::DeviceContext &c, const float *x, int32_t xRank, const int64_t *xShape,
           float *y, int32_t yRank, const int64_t *yShape) {
  if (xRank < 0 || xRank > kMaxRank || yRank < 0 || yRank > xRank)
    fatal("sumTo: rank out of range");
  SumToArgs a{};
  int64_t xStride = 1, strides[kMaxRank];
  for (int32_t d = xRank - 1; d >= 0; --d) {
    strides[d] = xStride;
    xStride *= xShape[d];
  }
  bool kept[kMaxRank];
  for (int32_t d = 0; d < xRank; ++d) {
    const int32_t yd = d - (xRank - yRank);
    if (yd < 0 || (yShape[yd] == 1 && xShape[d] != 1))
      kept[d] = false;
    else if (yShape[yd] == xShape[d])
      kept[d] = true;
    else
      fatal("sumTo: shapes are not broadcast-compatible");
  }
  a.yCount = 1;
  a.redCount = 1;
  for (int32_t d = 0; d < xRank; ++d) {
    if (xShape[d] == 1)
      continue;
    if (kept[d]) {
      a.keptShape[a.keptRank] = xShape[d];
      a.keptStride[a.keptRank++] = strides[d];
      a.yCount *= xShape[d];
    } else {
      a.redShape[a.redRank] = xShape[d];
      a.redStride[a.redRank++] = strides[d];
      a.redCount *= xShape[d];
    }
  }
  if (a.yCount == 0)
    return;
  if (a.yCount >= 2048) {
    sumToThreadKernel<<<gridFor(a.yCount), kThreads, 0, c.stream>>>(x, y, a);
  } else {
    sumToBlockKernel<<<unsigned(a.yCount), dim3(1, kThreads), 0, c.stream>>>(x, y, a);
  }
  checkLaunch("sumTo");
}

void softmax(const rt::DeviceContext &c, const float *x, float *y, int64_t outer, int64_t n,
             int64_t inner) {
  DTC_AXIS_LAUNCH_LOG(c.stream, "softmax", softmaxKernel, false, x, y, outer, n, inner);
}

void logSoftmax(const rt::DeviceContext &c, const float *x, float *y, int64_t outer, int64_t n,
                int64_t inner) {
  DTC_AXIS_LAUNCH_LOG(c.stream, "logSoftmax", softmaxKernel, true, x, y, outer, n, inner);
}

void softmaxGrad(const rt::DeviceContext &c, const float *y, const float *dy, float *dx,
                 int64_t outer, int64_t n, int64_t inner) {
  DTC_AXIS_LAUNCH_LOG(c.stream, "softmaxGrad", softmaxGradKernel, false, y, dy, dx, outer, n,
                      inner);
}

void logSoftmaxGrad(const rt::DeviceContext &c, const float *y, const float *dy, float *dx,
                    int64_t outer, int64_t n, int64_t inner) {
  DTC_AXIS_LAUNCH_LOG(c.stream, "logSoftmaxGrad", softmaxGradKernel, true, y, dy, dx, outer, n,
                      inner);
}

void crossEntropy(const rt::DeviceContext &c, const float *logits, const int32_t *labels,
                  int64_t B, int64_t C, int64_t ignore, float *out) {
  if (C <= 0)
    B = 0; // no rows to read: writes 0
  const uint32_t site = rangeSite(RangeKind::Label, C);
  // Pass 1: a warp per row, 8 rows a block at least.
  const unsigned blocks = partialBlocks(B, kPartialThreads / 32);
  if (B > 0) {
    crossEntropyPartialKernel<<<blocks, kPartialThreads, 0, c.stream>>>(logits, labels, B, C,
                                                                         ignore, site);
    checkLaunch("crossEntropy");
  }
  crossEntropyFinishKernel<<<1, kPartialThreads, 0, c.stream>>>(B > 0 ? blocks : 0, labels, B,
                                                                ignore, out);
  checkLaunch("crossEntropy (sum)");
}

void crossEntropyGrad(const rt::DeviceContext &c, const float *logits, const int32_t *labels,
                      int64_t B, int64_t C, int64_t ignore, const float *dloss,
                      float *dlogits) {
  if (B <= 0 || C <= 0)
    return;
  constexpr int rowsPerBlock = kThreads / 32;
  const unsigned blocks =
      unsigned(std::max<int64_t>(1, std::min<int64_t>((B + rowsPerBlock - 1) / rowsPerBlock,
                                                      kMaxBlocks)));
  crossEntropyGradKernel<<<blocks, kThreads, 0, c.stream>>>(logits, labels, B, C, ignore, dloss,
                                                            dlogits,
                                                            rangeSite(RangeKind::Label, C));
  checkLaunch("crossEntropyGrad");
}

void mse(const rt::DeviceContext &c, const float *p, const float *t, int64_t n, float *out) {
  mseKernel<<<1, kLossThreads, 0, c.stream>>>(p, t, std::max<int64_t>(n, 0), out);
  checkLaunch("mse");
}

void mseGrad(const rt::DeviceContext &c, const float *p, const float *t, int64_t n,
             const float *dloss, float *dp) {
  if (n <= 0)
    return;
  mseGradKernel<<<gridFor(n), kThreads, 0, c.stream>>>(p, t, n, dloss, dp);
  checkLaunch("mseGrad");
}

void accuracy(const rt::DeviceContext &c, const float *logits, const int32_t *labels, int64_t B,
              int64_t C, int64_t ignore, float *out) {
  if (C <= 0)
    B = 0;
  accuracyKernel<<<1, kLossThreads, 0, c.stream>>>(logits, labels, B, C, ignore, out,
                                                   rangeSite(RangeKind::Label, C));
  checkLaunch("accuracy");
}


void sumSquares(const rt::DeviceContext &c, const float *x, int64_t n, float *acc) {
  if (n <= 0)
    return;
  // Pass 1: 4 floats a thread at least, up to kMaxBlocks blocks.
  const unsigned blocks = partialBlocks(n, 4 * kPartialThreads);
  sumSquaresPartialKernel<<<blocks, kPartialThreads, 0, c.stream>>>(x, n);
  checkLaunch("sumSquares");
  sumSquaresFinishKernel<<<1, kPartialThreads, 0, c.stream>>>(blocks, acc);
  checkLaunch("sumSquares (sum)");
}

void clipCoef(const rt::DeviceContext &c, const float *sumSquares, const rt::Hyper &h,
              float *coef) {
  clipCoefKernel<<<1, 1, 0, c.stream>>>(sumSquares, h.maxGradNorm, coef);
  checkLaunch("clipCoef");
}

void arange(const rt::DeviceContext &c, int32_t *x, int64_t n) {
  if (n <= 0)
    return;
  arangeKernel<<<gridFor(n), kThreads, 0, c.stream>>>(x, n);
  checkLaunch("arange");
}

void embedding(const rt::DeviceContext &c, const float *weight, const int32_t *ids, int64_t rows,
               int64_t num, int64_t dim, float *out) {
  if (rows <= 0 || dim <= 0)
    return;
  embeddingKernel<<<gridFor(rows * dim), kThreads, 0, c.stream>>>(
      weight, ids, rows, num, dim, out, rangeSite(RangeKind::Embedding, num));
  checkLaunch("embedding");
}

void embeddingGrad(const rt::DeviceContext &c, const int32_t *ids, const float *dy, int64_t rows,
                   int64_t num, int64_t dim, float *dweight) {
  if (num <= 0 || dim <= 0)
    return;
  fillKernel<<<gridFor(num * dim), kThreads, 0, c.stream>>>(dweight, num * dim, 0.0f);
  checkLaunch("embeddingGrad (zeroing)");
  if (rows <= 0)
    return;
  // Groups of ids: enough for about 64K threads over the columns, at most
  // one per id, a multiple of the 8 warps of a block where there are more.
  const int64_t columnChunks = std::min<int64_t>((dim + 31) / 32, kMaxBlocks);
  int64_t groups = std::min<int64_t>(num, std::max<int64_t>(1, 2048 / columnChunks));
  if (groups > kEmbeddingGradWarps)
    groups = groups / kEmbeddingGradWarps * kEmbeddingGradWarps;
  const dim3 grid(unsigned(columnChunks),
                  unsigned((groups + kEmbeddingGradWarps - 1) / kEmbeddingGradWarps));
  embeddingGradKernel<<<grid, 32 * kEmbeddingGradWarps, 0, c.stream>>>(
      ids, dy, rows, num, dim, groups, dweight, rangeSite(RangeKind::EmbeddingGrad, num));
  checkLaunch("embeddingGrad");
}

void accumulate(const rt::DeviceContext &c, float *acc, const float *g, int64_t n) {
  if (n <= 0)
    return;
  accumulateKernel<<<gridFor(n), kThreads, 0, c.stream>>>(acc, g, n);
  checkLaunch("accumulate");
}

void takeAccumulated(const rt::DeviceContext &c, float *acc, const float *g, float *out,
                     int64_t n) {
  if (n <= 0)
    return;
  takeAccumulatedKernel<<<gridFor(n), kThreads, 0, c.stream>>>(acc, g, out, n);
  checkLaunch("takeAccumulated");
}

void fill(const rt::DeviceContext &c, float *x, int64_t n, float v) {
  if (n <= 0)
    return;
  fillKernel<<<gridFor(n), kThreads, 0, c.stream>>>(x, n, v);
  checkLaunch("fill");
}

void copyRows(const rt::DeviceContext &c, const float *src, int64_t srcStride, float *dst,
              int64_t dstStride, int64_t rows, int64_t len) {
  if (rows <= 0 || len <= 0)
    return;
  const cudaError_t e = cudaMemcpy2DAsync(
      dst, size_t(dstStride) * sizeof(float), src, size_t(srcStride) * sizeof(float),
      size_t(len) * sizeof(float), size_t(rows), cudaMemcpyDeviceToDevice, c.stream);
  if (e != cudaSuccess) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: error: CUDA copyRows failed: %s\n", cudaGetErrorString(e));
    die();
  }
}

void copy(const rt::DeviceContext &c, float *dst, const float *src, int64_t n) {
  if (n <= 0 || dst == src)
    return;
  const cudaError_t e =
      cudaMemcpyAsync(dst, src, size_t(n) * sizeof(float), cudaMemcpyDeviceToDevice, c.stream);
  if (e != cudaSuccess) {
    std::fflush(stdout);
    std::fprintf(stderr, "train: error: CUDA copy failed: %s\n", cudaGetErrorString(e));
    die();
  }
}

void sgdUpdate(const rt::DeviceContext &c, const rt::UpdateItem *items, int32_t count,
               const rt::Hyper &h, const float *gradScale) {
  SgdParams p;
  p.gradScale = gradScale;
  p.lr = h.lr;
  p.momentum = h.momentum;
  p.weightDecay = h.weightDecay;
  p.damp = 1.0f - h.dampening;
  p.nesterov = h.nesterov;
  p.first = h.step <= 1;
  launchUpdates(c, items, count, p, sgdKernel, "sgdUpdate");
}

void adamUpdate(const rt::DeviceContext &c, const rt::UpdateItem *items, int32_t count,
                const rt::Hyper &h, const float *gradScale, bool decoupled) {
  // The scalars exactly as kernels.cpp computes them.
  const float lr = h.lr, wd = h.weightDecay;
  const double step = static_cast<double>(std::max<int64_t>(h.step, 1));
  AdamParams p;
  p.gradScale = gradScale;
  p.beta1 = h.beta1;
  p.beta2 = h.beta2;
  p.eps = h.eps;
  p.stepSize = static_cast<float>(lr / (1.0 - std::pow(double(h.beta1), step)));
  p.bc2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double(h.beta2), step)));
  p.decay = decoupled ? 1.0f - lr * wd : 1.0f;
  p.coupledWd = decoupled ? 0.0f : wd;
  launchUpdates(c, items, count, p, adamKernel, "adamUpdate");
}

void momentumAccumulate(const rt::DeviceContext &c, float *buf, const float *g, int64_t n,
                        float share) {
  if (n <= 0)
    return;
  if (share == 0.0f) { // step 1: m = g, whatever the buffer held
    copy(c, buf, g, n);
    return;
  }
  momentumAccumulateKernel<<<gridFor(n), kThreads, 0, c.stream>>>(buf, g, n, share);
  checkLaunch("momentumAccumulate");
}

void sgdApplyMomentum(const rt::DeviceContext &c, const rt::UpdateItem *items, int32_t count,
                      const rt::Hyper &h) {
  // Plain SGD (w -= lr * g) with the summed momentum as the gradient: the
  // kernel skips momentum and weight decay when they are 0 (and s0 is null).
  SgdParams p;
  p.lr = h.lr;
  p.momentum = 0.0f;
  p.weightDecay = 0.0f;
  p.damp = 1.0f;
  p.nesterov = 0;
  p.first = h.step <= 1;
  p.gradScale = nullptr;
  for (int32_t first = 0; first < count; first += kItemsPerLaunch) {
    const int32_t m = std::min(kItemsPerLaunch, count - first);
    rt::UpdateItem plain[kItemsPerLaunch];
    for (int32_t i = 0; i < m; ++i)
      plain[i] = {items[first + i].w, items[first + i].g, nullptr, nullptr, items[first + i].n};
    launchUpdates(c, plain, m, p, sgdKernel, "sgdApplyMomentum");
  }
}

//===--- dropout ------------------------------------------------------------===//

namespace {
__global__ void maskedScaleKernel(const float *in, float *out, int64_t n, float p, uint64_t seed,
                                  int64_t salt) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t i = globalThread(); i < n; i += gridThreads())
    out[i] = rt::dropoutKeeps(seed, salt, i, p) ? in[i] * scale : 0.0f;
}
} // namespace

void dropout(const rt::DeviceContext &c, const float *x, float *y, int64_t n, float p,
             uint64_t seed, int64_t salt) {
  if (n <= 0)
    return;
  maskedScaleKernel<<<gridFor(n), kThreads, 0, c.stream>>>(x, y, n, p, seed, salt);
  checkLaunch("dropout");
}

void dropoutGrad(const rt::DeviceContext &c, const float *dy, float *dx, int64_t n, float p,
                 uint64_t seed, int64_t salt) {
  if (n <= 0)
    return;
  maskedScaleKernel<<<gridFor(n), kThreads, 0, c.stream>>>(dy, dx, n, p, seed, salt);
  checkLaunch("dropoutGrad");
}


void exportPrediction(const rt::DeviceContext &c, float *dst, const float *src, int64_t n) {
  if (dst)
    copy(c, dst, src, n);
}

} // namespace dtc::cuda
