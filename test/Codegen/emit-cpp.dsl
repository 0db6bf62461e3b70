# RUN: dtc %s --emit=cpp | FileCheck %s
# The C++ of the seed network: GEMMs through the kernel library, the bias+relu
# chain as one loop nest, the arena from the memory plan, and user strings
# only ever inside escaped C++ string literals.
input x: f32[B, 784]
label y: i32[B]
fc1 = linear(x, 500, act=relu)
fc2 = linear(fc1, 10)
loss = cross_entropy(fc2, y)
metric accuracy = accuracy(fc2, y)
train {
  data = csv("evil\"); system(\"rm -rf /\"); //\n.csv", "t.csv")
  optimizer = sgd(lr=0.01, momentum=0.9)
}
# One function per distinct fused kernel, before the steps:
# CHECK: // fused(add,relu)
# CHECK-NEXT: static void [[K:fused[0-9]+]](int64_t B, const float *__restrict__ in0, const float *__restrict__ in1, float *__restrict__ out0) {
# CHECK: for (int64_t i0 = 0; i0 < B; ++i0) {
# CHECK-NEXT: for (int64_t i1 = 0; i1 < 500; ++i1) {
# CHECK-NEXT: const int64_t l = i0 * 500 + i1;
# CHECK-NEXT: const float x0 = in0[l];
# CHECK-NEXT: const float x1 = in1[i1];
# CHECK-NEXT: const float e0 = x0 + x1;
# CHECK-NEXT: const float e1 = e0 > 0.0f ? e0 : 0.0f;
# CHECK-NEXT: out0[l] = e1;
# CHECK: // fused(relu_grad)
# CHECK-NEXT: static void [[KG:fused[0-9]+]](
# CHECK: const float e0 = x0 > 0.0f ? x1 : 0.0f;
# CHECK-LABEL: static void evalStep(const dtc::rt::StepArgs &a) {
# The fixed region first (gradients stay put whatever the batch), then the
# per-sample region:
# CHECK: char *const F = a.arena;
# CHECK-NEXT: char *const S = a.arena + 128;
# CHECK: dtc::kern::gemm(false, true, B, 500, 784, 1.0f, x, [[W1:v[0-9]+]], 0.0f, [[H:v[0-9]+]]);
# CHECK: [[K]](B, [[H]], v{{[0-9]+}}, v{{[0-9]+}});
# CHECK: crossEntropy(
# CHECK: a.outputs[0] =
# CHECK: a.outputs[1] =
# CHECK-LABEL: static void trainStep(const dtc::rt::StepArgs &a) {
# SGD momentum is folded into the gradient bucket (dtc.fold_momentum): the
# momentum buffers (from P + 1590144) are laid out like the bucket, and each
# rank accumulates its gradients into them with the share mu / W of the
# momentum (0 on step 1); the all-reduce sums them to the new momentum.
# CHECK: const float share = dtc::kern::momentumShare(*a.hyper, a.comm->size());
# Backward starts from the run-time gradient seed (dtc.grad_seed):
# CHECK: [[SEED:v[0-9]+]][0] = a.gradSeed;
# CHECK: dtc::kern::crossEntropyGrad({{v[0-9]+}}, y, B, 10, [[SEED]],
# A gradient made by another kernel is accumulated after it:
# CHECK: dtc::kern::sumTo(
# CHECK-NEXT: dtc::kern::momentumAccumulate(reinterpret_cast<float *>(P + 1590144), {{v[0-9]+}}, 10, share);
# CHECK: dtc::kern::gemm(false, false, B, 500, 10, 1.0f, {{v[0-9]+}}, {{v[0-9]+}}, 0.0f,
# A gradient GEMM accumulates itself (beta = share):
# CHECK: dtc::kern::gemm(true, false, 10, 500, B, 1.0f, {{v[0-9]+}}, {{v[0-9]+}}, share,
# CHECK: [[KG]](B,
# CHECK: if (a.trace) dtc::rt::traceBegin(a.trace, "matmul");
# CHECK-NEXT: float *[[DW1:v[0-9]+]] = reinterpret_cast<float *>(P + 1612192);
# CHECK-NEXT: dtc::kern::gemm(true, false, 500, 784, B, 1.0f, {{v[0-9]+}}, x, share, [[DW1]]);
# CHECK-NEXT: if (a.trace) dtc::rt::traceEnd(a.trace);
# The one gradient bucket starts right after the last gradient, in place:
# CHECK-NEXT: a.comm->allreduceStart(0, reinterpret_cast<float *>(P + 1590144), 397512);
# CHECK-NEXT: a.comm->wait(0);
# CHECK: dtc::kern::sgdApplyMomentum(reinterpret_cast<float *>(P + 1590080), reinterpret_cast<float *>(P + 1590144 + 0 * 10 * 4), 10, *a.hyper);
# CHECK: dtc::kern::sgdApplyMomentum(reinterpret_cast<float *>(P + 0), reinterpret_cast<float *>(P + 1612192 + 0 * 392000 * 4), 392000, *a.hyper);
# gradStep keeps local gradients: no communication, no momentum.
# CHECK-LABEL: static void gradStep(const dtc::rt::StepArgs &a) {
# CHECK-NOT: a.comm
# CHECK-NOT: share
# CHECK-DAG: std::memcpy(a.paramGrads + 0, v{{[0-9]+}}, 392000 * sizeof(float));
# CHECK-DAG: std::memcpy(a.paramGrads + 397500, v{{[0-9]+}}, 10 * sizeof(float));
# CHECK: {"fc1.weight", 2, {500, 784, 0, 0, 0, 0}, 392000, 0, dtc::rt::InitKind::Uniform
# CHECK: static const int32_t kBucket0Params[] = {3, 2, 1, 0};
# CHECK: static const dtc::rt::BucketSpec kBuckets[] = {
# CHECK-NEXT: {0, 397512, 4, kBucket0Params},
# CHECK: static const char *const kOutputNames[] = {"loss", "accuracy"};
# CHECK: s.arenaPerSample = 6000;
# CHECK: s.recipe.data.trainPath = "evil\"); system(\"rm -rf /\"); //\012.csv";
# CHECK: s.fingerprint = 0x{{[0-9a-f]+}}ULL;
# CHECK: s.numBuckets = 1;
# CHECK: int main(int argc, char **argv) {
