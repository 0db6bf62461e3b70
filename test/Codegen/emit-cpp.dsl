# RUN: dtc %s --emit=cpp | FileCheck %s
# The C++ of the seed network: GEMMs through the kernel library, the bias+relu
# chain as one loop nest over a range of rows (dtc::kern::forRanges splits the
# rows over the --threads cores), the arena from the memory plan, and user strings
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
# One function per distinct fused kernel, before the steps. The bias+relu
# writes its result over the GEMM's (dtc.in_place): it reads input 0 through
# out0, which the step passes once:
# CHECK: // fused(add,relu)
# CHECK-NEXT: static void [[K:fused[0-9]+]](int64_t B, int64_t lo, int64_t hi, const float *__restrict__ in1, float *__restrict__ out0) {
# CHECK: for (int64_t row = lo; row < hi; ++row) {
# CHECK-NEXT: for (int64_t i1 = 0; i1 < 500; ++i1) {
# CHECK-NEXT: const int64_t l = row * 500 + i1;
# CHECK-NEXT: const float x0 = out0[l];
# CHECK-NEXT: const float x1 = in1[i1];
# CHECK-NEXT: const float e0 = x0 + x1;
# CHECK-NEXT: const float e1 = e0 > 0.0f ? e0 : 0.0f;
# CHECK-NEXT: out0[l] = e1;
# CHECK: // fused(relu_grad)
# CHECK-NEXT: static void [[KG:fused[0-9]+]](
# CHECK: const float e0 = x0 > 0.0f ? x1 : 0.0f;
# CHECK-LABEL: static void evalStep(const dtc::rt::StepArgs &a) {
# The fixed region first (gradients stay put whatever the batch), then the
# per-sample region; the CPU context of the kernels:
# CHECK: char *const F = a.arena;
# CHECK-NEXT: char *const S = a.arena + 128;
# CHECK-NEXT: const dtc::rt::HostContext c{};
# CHECK: float *[[H:v[0-9]+]] = reinterpret_cast<float *>([[HAT:S \+ [0-9]+ \* B]]);
# CHECK-NEXT: dtc::kern::gemm(c, false, true, B, 500, 784, 1.0f, const_cast<float *>(a.x), [[W1:v[0-9]+]], 0.0f, [[H]]);
# CHECK: float *[[O:v[0-9]+]] = reinterpret_cast<float *>([[HAT]]);
# CHECK-NEXT: dtc::kern::forRanges(c, B*1, 500, [&](int64_t lo, int64_t hi) { [[K]](B, lo, hi, v{{[0-9]+}}, [[O]]); });
# CHECK: dtc::kern::crossEntropy(c, {{v[0-9]+}}, a.yClass, B, 10, -100, [[LOSS:v[0-9]+]]);
# CHECK: dtc::kern::copy(c, (a.outputs + 0), [[LOSS]], 1);
# CHECK: dtc::kern::copy(c, (a.outputs + 1),
# CHECK-LABEL: static void trainStep(const dtc::rt::StepArgs &a) {
# SGD momentum is folded into the gradient bucket (dtc-fold-momentum): the
# momentum buffers (from P + 1590144) are laid out like the bucket, and each
# rank accumulates its gradients into them with the share mu / W of the
# momentum (0 on step 1); the all-reduce sums them to the new momentum.
# Backward starts from the run-time gradient seed (dtc.grad_seed):
# CHECK: dtc::kern::fill(c, [[SEED:v[0-9]+]], 1, a.gradSeed);
# CHECK: dtc::kern::crossEntropyGrad(c, {{v[0-9]+}}, a.yClass, B, 10, -100, [[SEED]],
# A gradient made by another kernel is accumulated after it:
# CHECK: dtc::kern::sumTo(c, {{v[0-9]+}}, 2, {{s[0-9]+}}, [[DB2:v[0-9]+]], 1, {{s[0-9]+}});
# CHECK-NEXT: float *[[M:v[0-9]+]] = reinterpret_cast<float *>(P + 1590144);
# CHECK-NEXT: dtc::kern::momentumAccumulate(c, [[M]], [[DB2]], 10, dtc::rt::momentumShare(*a.hyper, a.comm->size()));
# CHECK: dtc::kern::gemm(c, false, false, B, 500, 10, 1.0f, {{v[0-9]+}}, {{v[0-9]+}}, 0.0f,
# A gradient GEMM accumulates itself (beta = the share):
# CHECK: dtc::kern::gemm(c, true, false, 10, 500, B, 1.0f, {{v[0-9]+}}, {{v[0-9]+}}, dtc::rt::momentumShare(*a.hyper, a.comm->size()),
# CHECK: dtc::kern::forRanges(c, B*500, 1, [&](int64_t lo, int64_t hi) { [[KG]](B, lo, hi,
# CHECK: if (a.trace) dtc::rt::traceBegin(a.trace, "matmul");
# CHECK-NEXT: float *[[DW1:v[0-9]+]] = reinterpret_cast<float *>(P + 1612192);
# CHECK-NEXT: dtc::kern::gemm(c, true, false, 500, 784, B, 1.0f, {{v[0-9]+}}, const_cast<float *>(a.x), dtc::rt::momentumShare(*a.hyper, a.comm->size()), [[DW1]]);
# CHECK-NEXT: if (a.trace) dtc::rt::traceEnd(a.trace);
# The one gradient bucket starts right after the last gradient, on the
# momentum buffers:
# CHECK-NEXT: float *[[MB:v[0-9]+]] = reinterpret_cast<float *>(P + 1590144);
# CHECK-NEXT: const dtc::rt::Request [[R:r[0-9]+]] = a.comm->allreduceStart(0, [[MB]], 397512);
# CHECK-NEXT: a.comm->wait([[R]]);
# The loss and metrics are written before any parameter changes:
# CHECK-NEXT: dtc::kern::copy(c, (a.outputs + 0),
# CHECK-NEXT: dtc::kern::copy(c, (a.outputs + 1),
# One update call for the bucket, each weight with its summed momentum:
# CHECK: const dtc::rt::UpdateItem [[U:u[0-9]+]][] = {
# CHECK-NEXT: {{[{]}}[[W:v[0-9]+]], [[G:v[0-9]+]], nullptr, nullptr, 10},
# CHECK-COUNT-3: {v{{[0-9]+}}, v{{[0-9]+}}, nullptr, nullptr,
# CHECK: dtc::kern::sgdApplyMomentum(c, [[U]], 4, *a.hyper);
# gradStep keeps local gradients: no communication, no momentum.
# CHECK-LABEL: static void gradStep(const dtc::rt::StepArgs &a) {
# CHECK-NOT: a.comm
# CHECK-NOT: momentum
# CHECK-DAG: dtc::kern::copy(c, (a.paramGrads + 0), v{{[0-9]+}}, 392000);
# CHECK-DAG: dtc::kern::copy(c, (a.paramGrads + 397500), v{{[0-9]+}}, 10);
# CHECK: {"fc1.weight", 2, {500, 784, 0, 0, 0, 0}, 392000, 0, dtc::rt::InitKind::Uniform
# CHECK: static const int32_t kBucket0Params[] = {3, 2, 1, 0};
# CHECK: static const dtc::rt::BucketSpec kBuckets[] = {
# CHECK-NEXT: {0, 397512, 4, kBucket0Params},
# CHECK: static const char *const kOutputNames[] = {"loss", "accuracy"};
# CHECK: s.arenaPerSample = 4048;
# CHECK: s.recipe.data.trainPath = "evil\"); system(\"rm -rf /\"); //\012.csv";
# CHECK: s.fingerprint = 0x{{[0-9a-f]+}}ULL;
# CHECK: s.numBuckets = 1;
# CHECK: int main(int argc, char **argv) {
