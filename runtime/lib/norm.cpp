//===- norm.cpp - Batch normalization kernels (CPU) -----------------------===//
//
// x is [n, channels, inner] (inner: the plane of a BatchNorm2d, 1 for a
// BatchNorm1d on [N, C]); each channel's statistics are over n * inner
// elements, in runs of `inner` contiguous floats. The channels are split
// over the --threads cores. A run's sum is accumulated in float, in 8 lanes
// (vectorized), and the runs' sums in double, so that a channel of 50,000
// elements loses no more than a run of 784 does.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"
#include "parallel.h"

#include <algorithm>
#include <cmath>

namespace dtc::kern {
namespace {

// Sums of a run in 8 independent float lanes (GCC vectorizes them, where one
// sequential sum it may not reorder stays scalar), then pairwise.
template <class Term> float laneSum(int64_t k, const Term &term) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j)
      lane[j] += term(i + j);
  float tail = 0.0f;
  for (; i < k; ++i)
    tail += term(i);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
         ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;
}
float runSum(const float *x, int64_t k) {
  return laneSum(k, [x](int64_t i) { return x[i]; });
}
float runCenteredSquares(const float *x, int64_t k, float mean) {
  return laneSum(k, [x, mean](int64_t i) {
    const float d = x[i] - mean;
    return d * d;
  });
}
float runDot(const float *a, const float *b, int64_t k, float mean) {
  return laneSum(k, [a, b, mean](int64_t i) { return a[i] * (b[i] - mean); });
}
// y = x * scale + shift (with relu, its max with 0) over the runs of channel c.
void scaleShift(const float *x, float *y, int64_t n, int64_t channels, int64_t inner, int64_t c,
                float scale, float shift, bool relu) {
  for (int64_t s = 0; s < n; ++s) {
    const float *xr = x + (s * channels + c) * inner;
    float *yr = y + (s * channels + c) * inner;
    if (relu)
      for (int64_t i = 0; i < inner; ++i)
        yr[i] = std::max(xr[i] * scale + shift, 0.0f);
    else
      for (int64_t i = 0; i < inner; ++i)
        yr[i] = xr[i] * scale + shift;
  }
}
// The gradient through a ReLU: dy where its result r is positive, else 0.
// (Both loaded, then selected: no branch on the mask, which is random.)
inline float through(const float *r, const float *dy, int64_t i) {
  const float g = dy[i];
  return r[i] > 0.0f ? g : 0.0f;
}
// Channels per helper: enough that a thread's share is worth waking it.
int64_t minChannels(int64_t n, int64_t inner) {
  const int64_t perChannel = std::max<int64_t>(1, n * inner);
  return std::max<int64_t>(1, (int64_t(1) << 15) / perChannel);
}

} // namespace

void batchNorm(const rt::HostContext &, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *var, int64_t n, int64_t channels, int64_t inner,
               float eps, bool relu) {
  const double count = double(std::max<int64_t>(1, n * inner));
  rt::parallelFor(channels, minChannels(n, inner), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k)
        s += runSum(x + (k * channels + c) * inner, inner);
      const float m = float(s / count);
      double q = 0;
      for (int64_t k = 0; k < n; ++k)
        q += runCenteredSquares(x + (k * channels + c) * inner, inner, m);
      const float v = float(q / count);
      mean[c] = m;
      var[c] = v;
      const float scale = weight[c] / std::sqrt(v + eps);
      scaleShift(x, y, n, channels, inner, c, scale, bias[c] - m * scale, relu);
    }
  });
}

void batchNormInference(const rt::HostContext &, const float *x, const float *weight,
                        const float *bias, const float *mean, const float *var, float *y,
                        int64_t n, int64_t channels, int64_t inner, float eps, bool relu) {
  rt::parallelFor(channels, minChannels(n, inner), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const float scale = weight[c] / std::sqrt(var[c] + eps);
      scaleShift(x, y, n, channels, inner, c, scale, bias[c] - mean[c] * scale, relu);
    }
  });
}

// With xhat = (x - mean) invstd: dbias = sum dy, dweight = sum dy xhat, and
// dx = weight invstd (dy - dbias / count - xhat dweight / count); dy through
// the ReLU when its result r is given.
void batchNormGrad(const rt::HostContext &, const float *x, const float *dy, const float *mean,
                   const float *var, const float *weight, const float *r, float *dx,
                   float *dweight, float *dbias, int64_t n, int64_t channels, int64_t inner,
                   float eps) {
  const double count = double(std::max<int64_t>(1, n * inner));
  rt::parallelFor(channels, minChannels(n, inner), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const float m = mean[c], invstd = 1.0f / std::sqrt(var[c] + eps);
      double sdy = 0, sdyx = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t at = (k * channels + c) * inner;
        if (r) {
          const float *ra = r + at, *dya = dy + at, *xa = x + at;
          sdy += laneSum(inner, [ra, dya](int64_t i) { return through(ra, dya, i); });
          sdyx += laneSum(inner, [ra, dya, xa, m](int64_t i) {
            return through(ra, dya, i) * (xa[i] - m);
          });
        } else {
          sdy += runSum(dy + at, inner);
          sdyx += runDot(dy + at, x + at, inner, m);
        }
      }
      dbias[c] = float(sdy);
      dweight[c] = float(sdyx * invstd);
      const float scale = weight[c] * invstd;
      const float meanDy = float(sdy / count);
      const float k2 = float(sdyx / count) * invstd * invstd;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t at = (k * channels + c) * inner;
        const float *xr = x + at, *dyr = dy + at;
        float *dxr = dx + at;
        if (r) {
          const float *rr = r + at;
          for (int64_t i = 0; i < inner; ++i)
            dxr[i] = scale * (through(rr, dyr, i) - meanDy - (xr[i] - m) * k2);
        } else {
          for (int64_t i = 0; i < inner; ++i)
            dxr[i] = scale * (dyr[i] - meanDy - (xr[i] - m) * k2);
        }
      }
    }
  });
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
