//===- onednn.cpp - GEMM engine: oneDNN (dtc --gemm=onednn, the default) -===//
//
// oneDNN's dnnl_sgemm: JIT-generated AVX2/AVX-512 kernels that reach 84-95%
// of the core's peak on the seed MLP's large batch-64 GEMMs, where OpenBLAS
// reaches 70-80% (benchmarks/gemm_engines.sh, docs/performance.md). Each
// call runs on one thread: Debian's oneDNN threads with OpenMP, whose idle
// threads spin and would take the cores from the rank's communication
// thread. This engine splits a large product over the --threads cores
// itself (rt::parallelFor): the rows of C when it has at least as many rows
// as columns, else its columns, in contiguous blocks, at most one per
// thread.
//
// One kind of product goes to OpenBLAS instead (cblas_sgemm, one thread
// per call, split as oneDNN's are), on hosts without AVX-512, where oneDNN
// runs its AVX2 sgemm: a transposed A with a long reduction and both sides
// of C between 128 and 512 (weight gradients dW = dY^T X over hundreds of
// tokens, the GPT's). There oneDNN's AVX2 kernels ran at 49-63 GFLOP/s in
// a training step against OpenBLAS's 62-80 (1.10-1.54x apart alone, on a
// 2-core Zen 3; docs/performance.md), while for short reductions (a batch
// of 64 images) and other shapes oneDNN stays ahead. The choice depends on
// the shape and the host alone, never on a timing: the same products take
// the same path run after run (exact resume, the same floats on every
// rank of a host).
//
// Convolutions run as oneDNN's convolution primitives (forward, backward
// data, backward weights), each of which picks its own blocked layouts
// (format "any": nChw16c and the like, where its JIT kernels run at 1.8x
// its plain-NCHW implementation on the CNN example's second convolution);
// the NCHW tensors of the step are reordered into and out of them. Channels-
// last tensors (dtc --layout=channels-last) go in as they are: oneDNN's
// NHWC kernels are as fast, except for a first layer of few channels; so
// do blocked ones (dtc --layout=blocked, nChw16c: its own choice). The
// batch is split over the --threads cores as the GEMMs are (each thread
// runs the primitive of its share, one OpenMP thread each); the weight
// gradients of the shares are summed in share order.
//
//===----------------------------------------------------------------------===//
#include "kernels/gemm/engine.h"

#include "kernels/parallel.h"

#include <cblas.h>
#include <dnnl.h>
#include <dnnl.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

extern "C" void openblas_set_num_threads(int);

// libgomp's (libdnnl's OpenMP runtime; declared here rather than through
// <omp.h>, which only an OpenMP compiler is sure to have).
extern "C" void omp_set_num_threads(int);

namespace dtc::rt::gemm_engine {
namespace {

// Below this many multiply-adds a product runs on the calling thread alone
// (waking a helper costs a few microseconds).
constexpr int64_t kMinSplitMacs = int64_t(1) << 21;

// OpenMP's thread count is per calling thread: one, in every thread that
// calls oneDNN (the step's thread and parallelFor's helpers).
void serialOpenMp() {
  thread_local bool serial = false;
  if (!serial) {
    omp_set_num_threads(1);
    serial = true;
  }
}

// Whether the whole product op(A) op(B) of M x N x K goes to OpenBLAS
// (see the top): decided before the product is split over threads.
bool byOpenBlas(bool transA, int64_t M, int64_t N, int64_t K) {
  static const bool avx2Only = !__builtin_cpu_supports("avx512f");
  return avx2Only && transA && K >= 256 && std::min(M, N) >= 128 && std::max(M, N) <= 512;
}

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
           const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
           int64_t ldc, bool openblas = false) {
  if (openblas) {
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
    return;
  }
  serialOpenMp();
  dnnl_status_t s = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, alpha, A, lda,
                               B, ldb, beta, C, ldc);
  if (s != dnnl_success) {
    std::fprintf(stderr,
                 "train: error: internal error in runtime kernel: dnnl_sgemm(%c%c, M=%lld, "
                 "N=%lld, K=%lld) failed with status %d\n",
                 transA ? 'T' : 'N', transB ? 'T' : 'N', (long long)M, (long long)N,
                 (long long)K, int(s));
    std::exit(1);
  }
}


//===--- convolutions -------------------------------------------------------===//

namespace conv {
using dnnl::memory;
using Tag = memory::format_tag;

enum class Kind { Forward, BackwardData, BackwardWeights };

// A tensor the step passes in plain layout (NCHW, OIHW / GOIHW) and the
// primitive wants in its own: the plain and the chosen descriptors, and a
// buffer in the chosen layout when they differ.
struct Operand {
  int arg = 0;
  memory plain, chosen; // chosen == plain's layout: the same memory
  bool reorder = false, output = false;
  dnnl::reorder in, out;
};

// One primitive for one kind, window and batch share, with its operands
// (inputs first, the output last) and scratchpad.
struct Plan {
  dnnl::primitive primitive;
  std::vector<Operand> operands;
  memory scratchpad;
  std::vector<unsigned char> scratch;
  std::unordered_map<int, memory> args; // the primitive's, made once
};

struct Key {
  Kind kind;
  std::array<int64_t, Window2d::kValues> window;
  int64_t n;
  bool bias; // forward: adds a bias; backward weights: also its gradient
  bool operator<(const Key &o) const {
    return std::tie(kind, window, n, bias) < std::tie(o.kind, o.window, o.n, o.bias);
  }
};

// Per thread (each thread runs its own share): the engine, the stream and
// the plans made so far (null: oneDNN has no implementation, fall back).
struct ThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, std::unique_ptr<Plan>> plans;
};
ThreadState &state() {
  thread_local ThreadState s;
  return s;
}

std::array<int64_t, Window2d::kValues> valuesOf(const Window2d &w) {
  return {w.C,  w.H,  w.W,  w.O,      w.kH, w.kW, w.sH, w.sW,
          w.pH, w.pW, w.dH, w.dW, w.groups, w.Ho, w.Wo, w.layout};
}

Operand operand(int arg, const memory::desc &plain, const memory::desc &chosen,
                const dnnl::engine &e, bool isOutput) {
  Operand o;
  o.arg = arg;
  o.output = isOutput;
  o.plain = memory(plain, e, DNNL_MEMORY_NONE);
  o.reorder = chosen != plain;
  o.chosen = o.reorder ? memory(chosen, e) : o.plain;
  if (o.reorder) {
    if (isOutput)
      o.out = dnnl::reorder(o.chosen, o.plain);
    else
      o.in = dnnl::reorder(o.plain, o.chosen);
  }
  return o;
}

std::unique_ptr<Plan> makePlan(const Key &key, ThreadState &ts) {
  const Window2d w = Window2d::from(key.window.data());
  const memory::dim n = key.n, g = w.groups;
  const auto f32 = memory::data_type::f32;
  // Channels last: the step's tensors are NHWC, and so are the primitive's
  // (its NHWC kernels run as fast as its blocked ones: no reorders).
  // Blocked (dtc-blocked-layout): nChw16c, the layout oneDNN's AVX-512
  // kernels pick for themselves, taken as it is.
  const Tag act = w.channelsLast() ? Tag::nhwc : Tag::nchw;
  memory::desc src({n, w.C, w.H, w.W}, f32, w.inBlocked() ? Tag::nChw16c : act),
      dst({n, w.O, w.Ho, w.Wo}, f32, w.outBlocked() ? Tag::nChw16c : act);
  memory::desc wei = g == 1 ? memory::desc({w.O, w.C, w.kH, w.kW}, f32, Tag::oihw)
                            : memory::desc({g, w.O / g, w.C / g, w.kH, w.kW}, f32, Tag::goihw);
  // Except for a first layer (fewer than 16 input channels, an image's
  // planes): oneDNN's NHWC kernels for it ran at half the speed of its
  // blocked ones (CNN example: 1.03 against 0.54 ms forward, 1.07 against
  // 0.41 weight gradient), so it gets blocked tensors and reorders.
  const bool plain = w.channelsLast() && w.C >= 16;
  memory::desc anySrc = plain || w.inBlocked() ? src : memory::desc(src.dims(), f32, Tag::any),
               anyDst = plain || w.outBlocked() ? dst : memory::desc(dst.dims(), f32, Tag::any),
               anyWei(wei.dims(), f32, Tag::any);
  const memory::desc bias({w.O}, f32, Tag::x), none;
  const memory::dims strides{w.sH, w.sW}, dilates{w.dH - 1, w.dW - 1}, pad{w.pH, w.pW};
  // The right padding that gives exactly Ho x Wo (PyTorch drops what a
  // stride leaves over).
  const memory::dims padR{(w.Ho - 1) * w.sH + w.dH * (w.kH - 1) + 1 - w.H - w.pH,
                          (w.Wo - 1) * w.sW + w.dW * (w.kW - 1) + 1 - w.W - w.pW};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto plan = std::make_unique<Plan>();
  const auto &e = ts.engine;
  const bool withBias = key.bias && key.kind != Kind::BackwardData;
  dnnl::convolution_forward::primitive_desc fwd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, anySrc, anyWei,
                                      withBias ? bias : none, anyDst, strides, dilates, pad, padR),
      attr, e);
  memory::desc scratch;
  switch (key.kind) {
  case Kind::Forward:
    plan->primitive = dnnl::convolution_forward(fwd);
    plan->operands = {operand(DNNL_ARG_SRC, src, fwd.src_desc(), e, false),
                      operand(DNNL_ARG_WEIGHTS, wei, fwd.weights_desc(), e, false),
                      operand(DNNL_ARG_DST, dst, fwd.dst_desc(), e, true)};
    if (withBias)
      plan->operands.push_back(operand(DNNL_ARG_BIAS, bias, bias, e, false));
    scratch = fwd.scratchpad_desc();
    break;
  case Kind::BackwardData: {
    dnnl::convolution_backward_data::primitive_desc bwd(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, anySrc, anyWei,
                                              anyDst, strides, dilates, pad, padR),
        attr, e, fwd);
    plan->primitive = dnnl::convolution_backward_data(bwd);
    plan->operands = {operand(DNNL_ARG_DIFF_DST, dst, bwd.diff_dst_desc(), e, false),
                      operand(DNNL_ARG_WEIGHTS, wei, bwd.weights_desc(), e, false),
                      operand(DNNL_ARG_DIFF_SRC, src, bwd.diff_src_desc(), e, true)};
    scratch = bwd.scratchpad_desc();
    break;
  }
  case Kind::BackwardWeights: {
    dnnl::convolution_backward_weights::primitive_desc bwd(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, anySrc,
                                                 anyWei, withBias ? bias : none, anyDst,
                                                 strides, dilates, pad, padR),
        attr, e, fwd);
    plan->primitive = dnnl::convolution_backward_weights(bwd);
    plan->operands = {operand(DNNL_ARG_SRC, src, bwd.src_desc(), e, false),
                      operand(DNNL_ARG_DIFF_DST, dst, bwd.diff_dst_desc(), e, false),
                      operand(DNNL_ARG_DIFF_WEIGHTS, wei, bwd.diff_weights_desc(), e, true)};
    if (withBias)
      plan->operands.push_back(operand(DNNL_ARG_DIFF_BIAS, bias, bias, e, true));
    scratch = bwd.scratchpad_desc();
    break;
  }
  }
  plan->scratch.resize(scratch.get_size() + 64);
  plan->scratchpad = memory(scratch, e, plan->scratch.data());
  plan->args[DNNL_ARG_SCRATCHPAD] = plan->scratchpad;
  for (const Operand &o : plan->operands)
    plan->args[o.arg] = o.chosen; // the same handle as plain when not reordered
  return plan;
}

// Runs one share of n samples on this thread: the inputs at in0, in1, the
// output at out, and the bias (forward: an input) or its gradient (backward
// weights: an output) at extra unless it is null. False when oneDNN has no
// such convolution.
bool runShare(Kind kind, const Window2d &w, int64_t n, const float *in0, const float *in1,
              float *out, const float *extra = nullptr) {
  serialOpenMp();
  ThreadState &ts = state();
  const Key key{kind, valuesOf(w), n, extra != nullptr};
  auto it = ts.plans.find(key);
  if (it == ts.plans.end()) {
    std::unique_ptr<Plan> made;
    try {
      made = makePlan(key, ts);
    } catch (const dnnl::error &) {
      made = nullptr; // unimplemented: im2col + gemm
    }
    it = ts.plans.emplace(key, std::move(made)).first;
  }
  Plan *plan = it->second.get();
  if (!plan)
    return false;
  const void *ptrs[4] = {in0, in1, out, extra};
  for (size_t i = 0; i < plan->operands.size(); ++i) {
    Operand &o = plan->operands[i];
    o.plain.set_data_handle(const_cast<void *>(ptrs[i]));
    if (o.reorder && !o.output)
      o.in.execute(ts.stream, o.plain, o.chosen);
  }
  plan->primitive.execute(ts.stream, plan->args);
  for (Operand &o : plan->operands)
    if (o.reorder && o.output)
      o.out.execute(ts.stream, o.chosen, o.plain);
  ts.stream.wait();
  return true;
}

// The batch in shares over the --threads cores (parallelFor's blocks, at
// most one per thread). fn(begin, end) runs one share; false if any failed.
template <class F> bool overShares(int64_t N, const F &fn) {
  std::atomic<bool> ok{true};
  const int threads = kernelThreads();
  parallelFor(N, std::max<int64_t>(1, N / std::max(threads, 1)), [&](int64_t b, int64_t e) {
    if (!fn(b, e))
      ok = false;
  });
  return ok;
}
} // namespace conv

} // namespace

const char *name() {
  static const std::string n = [] {
    const dnnl_version_t *v = dnnl_version();
    std::string s = "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) +
                    "." + std::to_string(v->patch);
    if (byOpenBlas(true, 128, 128, 256))
      s += " + openblas for long weight gradients";
    return s;
  }();
  return n.c_str();
}

void setThreads(int) {
  // oneDNN generates a kernel the first time a call needs it: 4-22 ms each,
  // 30-50 ms in all for the examples, once per process. Generate them now, before the first
  // (timed) step: every transposition, beta 0, 1 and another (the folded
  // momentum's share), at the shapes that select its blocked, small-matrix
  // and matrix-vector paths.
  // OpenBLAS's products run on the calling thread: this engine splits them.
  openblas_set_num_threads(1);
  static bool done = false;
  if (done)
    return;
  done = true;
  const int64_t shapes[][3] = {{64, 512, 512}, {512, 512, 64}, {64, 16, 512},
                               {8, 8, 8},      {1, 256, 256},  {256, 1, 256}};
  std::vector<float> a(512 * 512, 0.5f), b(512 * 512, 0.25f), c(512 * 512, 0.0f);
  for (int t = 0; t < 4; ++t)
    for (const auto &s : shapes)
      for (float beta : {0.0f, 1.0f, 0.45f}) {
        const bool ta = t & 1, tb = t & 2;
        sgemm(ta, tb, s[0], s[1], s[2], 1.0f, a.data(), ta ? s[0] : s[2], b.data(),
              tb ? s[2] : s[1], beta, c.data(), s[1]);
      }
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
          const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
          int64_t ldc) {
  const int threads = kernelThreads();
  const bool openblas = byOpenBlas(transA, M, N, K);
  if (threads <= 1 || M * N * K < kMinSplitMacs) {
    sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, openblas);
    return;
  }
  // Contiguous blocks of at least n / threads rows (columns), at most one
  // per thread (parallelFor starts blocks at multiples of 16).
  if (M >= N) {
    parallelFor(M, std::max<int64_t>(16, M / threads), [&](int64_t b, int64_t e) {
      sgemm(transA, transB, e - b, N, K, alpha, transA ? A + b : A + b * lda, lda, B, ldb,
            beta, C + b * ldc, ldc, openblas);
    });
  } else {
    parallelFor(N, std::max<int64_t>(16, N / threads), [&](int64_t b, int64_t e) {
      sgemm(transA, transB, M, e - b, K, alpha, A, lda, transB ? B + b * ldb : B + b, ldb,
            beta, C + b, ldc, openblas);
    });
  }
}

void gemmBatched(bool transA, bool transB, int64_t count, int64_t M, int64_t N, int64_t K,
                 float alpha, const float *A, const float *B, float beta, float *C) {
  const int64_t lda = transA ? M : K, ldb = transB ? K : N;
  auto one = [&](int64_t i, bool split) {
    const float *a = A + i * M * K, *b = B + i * K * N;
    float *c = C + i * M * N;
    if (split)
      gemm(transA, transB, M, N, K, alpha, a, lda, b, ldb, beta, c, N);
    else
      sgemm(transA, transB, M, N, K, alpha, a, lda, b, ldb, beta, c, N,
            byOpenBlas(transA, M, N, K));
  };
  // Large products split themselves (gemm); small ones (attention's [T, T]
  // scores of a head) go to the cores whole, in contiguous runs.
  if (M * N * K >= kMinSplitMacs || kernelThreads() <= 1) {
    for (int64_t i = 0; i < count; ++i)
      one(i, true);
    return;
  }
  const int64_t per = std::max<int64_t>(1, kMinSplitMacs / (M * N * K));
  parallelFor(count, per, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      one(i, false);
  });
}

bool conv2d(const Window2d &w, int64_t N, const float *x, const float *weight, const float *bias,
            float *y) {
  const int64_t xs = w.C * w.H * w.W, ys = w.O * w.Ho * w.Wo;
  return conv::overShares(N, [&](int64_t b, int64_t e) {
    return conv::runShare(conv::Kind::Forward, w, e - b, x + b * xs, weight, y + b * ys, bias);
  });
}

bool conv2dGradInput(const Window2d &w, int64_t N, const float *dy, const float *weight,
                     float *dx) {
  const int64_t xs = w.C * w.H * w.W, ys = w.O * w.Ho * w.Wo;
  return conv::overShares(N, [&](int64_t b, int64_t e) {
    return conv::runShare(conv::Kind::BackwardData, w, e - b, dy + b * ys, weight, dx + b * xs);
  });
}

bool conv2dGradWeight(const Window2d &w, int64_t N, const float *x, const float *dy,
                      float *dw, float *db) {
  const int64_t xs = w.C * w.H * w.W, ys = w.O * w.Ho * w.Wo;
  const int64_t nw = w.O * (w.C / w.groups) * w.kH * w.kW;
  const int64_t nb = db ? w.O : 0; // a share's bias gradient follows its weight gradient
  // Share s > 0 writes its weight gradient apart; the shares are summed in
  // order after (the same sums for the same --threads, run after run).
  // Kept between calls (only the step's thread calls): no allocation per step.
  static std::vector<std::vector<float>> partial;
  static std::vector<int64_t> begins;
  const size_t maxShares = size_t(N / 16 + 2);
  if (partial.size() < maxShares)
    partial.resize(maxShares);
  begins.assign(maxShares, -1);
  const bool ok = conv::overShares(N, [&](int64_t b, int64_t e) {
    const size_t slot = size_t(b / 16);
    float *out = dw, *outBias = db;
    if (b > 0) {
      partial[slot].resize(size_t(nw + nb));
      out = partial[slot].data();
      outBias = db ? out + nw : nullptr;
    }
    begins[slot] = b;
    return conv::runShare(conv::Kind::BackwardWeights, w, e - b, x + b * xs, dy + b * ys, out,
                          outBias);
  });
  if (!ok)
    return false;
  for (size_t slot = 1; slot < begins.size(); ++slot)
    if (begins[slot] > 0) {
      const float *p = partial[slot].data();
      for (int64_t i = 0; i < nw; ++i)
        dw[i] += p[i];
      for (int64_t i = 0; i < nb; ++i)
        db[i] += p[nw + i];
    }
  return true;
}

} // namespace dtc::rt::gemm_engine
