//===- test_models.h - Hand-written models, as dtc would generate them ----===//
//
// A linear layer y = x W^T + b trained with softmax cross-entropy (Class
// labels) or MSE (Value labels), written against dtc/kernels.h, dtc/comm.h
// and dtc/trace.h the way generated code is (the step's context `c`
// declared at the top of each function, passed first to every kernel):
// trainStep runs forward and
// backward, starts the all-reduce of each gradient bucket as soon as its
// gradients are complete, waits for all of them, then updates with SGD.
// Every op is wrapped in traceBegin/traceEnd.
//
// persistent: W @0, b @wBytes (64-aligned), then the SGD momentum buffers.
// arena: fixed part first (dW, db: the gradient buckets), then per sample
// (out, dout), sized by the configured batch; a short batch uses a prefix.
//
// Buckets (SplitBuckets = false): bucket 0 = {fc.weight, fc.bias}, started
// after the whole backward. SplitBuckets = true: bucket 0 = {fc.bias},
// started right after db, so that its all-reduce runs while the weight
// gradient GEMM computes; bucket 1 = {fc.weight}.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/comm.h"
#include "dtc/kernels.h"
#include "dtc/runtime.h"
#include "dtc/trace.h"

namespace dtc::test {

using namespace dtc::rt;

template <int64_t F, int64_t C, bool Regression, int BiasGradBug = 0, bool SplitBuckets = false>
struct Linear {
  static constexpr int64_t align(int64_t n) { return (n + 63) / 64 * 64; }
  static constexpr int64_t wOff = 0, bOff = align(F * C * 4);
  static constexpr int64_t paramBytes = bOff + align(C * 4);
  static constexpr int64_t numel = F * C + C;

  static float *W(const StepArgs &a) { return reinterpret_cast<float *>(a.persistent + wOff); }
  static float *b(const StepArgs &a) { return reinterpret_cast<float *>(a.persistent + bOff); }
  static float *out(const StepArgs &a) { return reinterpret_cast<float *>(a.arena) + numel; }

  struct Span { // traceBegin/traceEnd around one op
    const StepArgs &a;
    Span(const StepArgs &a, const char *name) : a(a) {
      if (a.trace)
        traceBegin(a.trace, name);
    }
    ~Span() {
      if (a.trace)
        traceEnd(a.trace);
    }
  };

  static void forward(const StepArgs &a) {
    const HostContext c{};
    float *o = out(a);
    {
      Span s(a, "matmul");
      kern::gemm(c, false, true, a.batch, C, F, 1.0f, a.x, W(a), 0.0f, o);
    }
    {
      Span s(a, "bias add");
      for (int64_t i = 0; i < a.batch; ++i)
        for (int64_t j = 0; j < C; ++j)
          o[i * C + j] += b(a)[j];
    }
    Span s(a, Regression ? "mse" : "cross_entropy");
    if (Regression) {
      kern::mse(c, o, a.yValue, a.batch * C, a.outputs);
    } else {
      kern::crossEntropy(c, o, a.yClass, a.batch, C, -100, a.outputs);
      kern::accuracy(c, o, a.yClass, a.batch, C, -100, a.outputs + 1);
    }
  }

  // Writes dW then db (packed) to grads; with comm, starts the buckets
  // (requests[k]: bucket k's request).
  static void backward(const StepArgs &a, float *grads, Communicator *comm,
                       Request *requests = nullptr) {
    const HostContext c{};
    const float seed = a.gradSeed;
    float *dout = out(a) + a.batch * C;
    {
      Span s(a, Regression ? "mse grad" : "cross_entropy grad");
      if (Regression)
        kern::mseGrad(c, out(a), a.yValue, a.batch * C, &seed, dout);
      else
        kern::crossEntropyGrad(c, out(a), a.yClass, a.batch, C, -100, &seed, dout);
    }
    {
      Span s(a, "bias grad");
      const int64_t shape[2] = {a.batch, C}, bshape[1] = {C};
      kern::sumTo(c, dout, 2, shape, grads + F * C, 1, bshape);
      for (int64_t j = 0; j < C; ++j)
        grads[F * C + j] *= 1.0f + 0.5f * BiasGradBug;
    }
    if (comm && SplitBuckets)
      requests[0] = comm->allreduceStart(0, grads + F * C, C);
    {
      Span s(a, "weight grad");
      kern::gemm(c, true, false, C, F, a.batch, 1.0f, dout, a.x, 0.0f, grads);
    }
    if (comm && SplitBuckets)
      requests[1] = comm->allreduceStart(1, grads, F * C);
    if (comm && !SplitBuckets)
      requests[0] = comm->allreduceStart(0, grads, numel);
  }

  static void evalStep(const StepArgs &a) { forward(a); }
  static void gradStep(const StepArgs &a) {
    forward(a);
    backward(a, a.paramGrads, nullptr);
  }
  static void trainStep(const StepArgs &a) {
    const HostContext c{};
    forward(a);
    float *g = reinterpret_cast<float *>(a.arena);
    Request requests[2];
    backward(a, g, a.comm, requests);
    for (int bucket = 0; bucket < (SplitBuckets ? 2 : 1); ++bucket)
      a.comm->wait(requests[bucket]);
    Span s(a, "sgd");
    float *buf = reinterpret_cast<float *>(a.persistent + paramBytes);
    const UpdateItem items[2] = {{W(a), g, buf, nullptr, F * C},
                                 {b(a), g + F * C, buf + F * C, nullptr, C}};
    kern::sgdUpdate(c, items, 2, *a.hyper, nullptr);
  }

  static ModelSpec spec() {
    static const ParamSpec params[] = {
        {"fc.weight", 2, {C, F}, F * C, wOff, InitKind::GlorotUniform, 1.0, 0, F, C, paramBytes},
        {"fc.bias", 1, {C}, C, bOff, InitKind::Zeros, 0, 0, F, C, paramBytes + F * C * 4},
    };
    static const char *const classNames[] = {"loss", "accuracy"};
    static const char *const regNames[] = {"loss"};
    static const int32_t both[] = {0, 1}, biasOnly[] = {1}, weightOnly[] = {0};
    static const BucketSpec oneBucket[] = {{0, numel, 2, both}};
    static const BucketSpec twoBuckets[] = {{0, C, 1, biasOnly}, {1, F * C, 1, weightOnly}};
    ModelSpec s{};
    s.name = Regression ? "linreg" : "softmax_reg";
    s.source = "test.dtc";
    s.inputRank = 1;
    s.inputShape[0] = F;
    s.inputNumel = F;
    s.labelKind = Regression ? LabelKind::Value : LabelKind::Class;
    s.labelNumel = Regression ? C : 1;
    s.numClasses = Regression ? 0 : C;
    s.numParams = 2;
    s.params = params;
    s.paramBytes = paramBytes;
    s.persistentBytes = paramBytes + numel * 4;
    s.numStates = 1; // SGD momentum
    s.arenaPerSample = 2 * C * 4;
    s.arenaFixed = numel * 4;
    s.numOutputs = Regression ? 1 : 2;
    s.outputNames = Regression ? regNames : classNames;
    s.trainStep = trainStep;
    s.evalStep = evalStep;
    s.gradStep = gradStep;
    s.recipe.data.kind = DatasetKind::Synthetic;
    s.recipe.data.trainSize = 500;
    s.recipe.data.testSize = 200;
    s.recipe.batch = 32;
    s.recipe.epochs = 5;
    s.recipe.seed = 1;
    s.recipe.optimizer = OptimizerKind::SGD;
    s.recipe.hyper = Hyper{0.05f, 0.9f, 0.0f, 0.0f, 0.9f, 0.999f, 1e-8f, 0, 0};
    s.fingerprint = 0x4a7b000000000000ULL + uint64_t(F * 1000 + C) * 4 + (Regression ? 2 : 0) +
                    (SplitBuckets ? 1 : 0);
    s.numBuckets = SplitBuckets ? 2 : 1;
    s.buckets = SplitBuckets ? twoBuckets : oneBucket;
    return s;
  }
};

using SoftmaxReg = Linear<4, 3, false>;
using LinReg = Linear<4, 2, true>;

} // namespace dtc::test
