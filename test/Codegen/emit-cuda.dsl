# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=NOSYNC
# The CUDA source of a 784-1024-1024-10 GELU network with AdamW and two
# gradient buckets: one generated kernel per distinct fused chain, GEMMs
# through cuBLAS, everything on the step's stream, bucket 0's all-reduce
# started while backward still runs, and one update launch per bucket.
input x: f32[B, 784]
label y: i32[B]
fc1 = linear(x, 1024, act=gelu)
fc2 = linear(fc1, 1024, act=gelu)
fc3 = linear(fc2, 10)
loss = cross_entropy(fc3, y)
metric accuracy = accuracy(fc3, y)
train {
  optimizer = adamw(lr=0.001)
}
# The CPU steps are in the same program (the device is picked at run time).
# CHECK: static void trainStep(const dtc::rt::StepArgs &a) {
# CHECK: dtc::kern::gemm(
# Kernels: bias + GELU (forward only, for evaluation), bias alone, bias +
# GELU and its derivative (for the backward: dtc-derivatives-in-forward), the
# GELU gradient as a product; each emitted once although several steps
# launch them. Each writes its first result over its first input, the
# GEMM's result, whose last read it is (dtc.in_place): read through out0.
# CHECK: // fused(add,gelu)
# CHECK-NEXT: __global__ void fusedKernel0(int64_t B, const float *__restrict__ in1, float *__restrict__ out0) {
# CHECK: // fused(add)
# CHECK-NEXT: __global__ void fusedKernel1(int64_t B, const float *__restrict__ in1, float *__restrict__ out0) {
# CHECK: const int64_t n = B*10;
# CHECK: for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < n; l += int64_t(gridDim.x) * blockDim.x) {
# CHECK-NEXT: int64_t r = l;
# CHECK-NEXT: const int64_t i1 = r % 10;
# CHECK-NEXT: const float x0 = out0[l];
# CHECK-NEXT: const float x1 = in1[i1];
# CHECK: // fused(add,gelu,gelu_deriv)
# CHECK-NEXT: __global__ void fusedKernel2(int64_t B, const float *__restrict__ in1, float *__restrict__ out0, float *__restrict__ out1) {
# CHECK: const float e1 = 0.5f * e0 * (1.0f + erff(e0 * 0.70710678118654752f));
# CHECK-NEXT: const float e2 = (0.5f * (1.0f + erff(e0 * 0.70710678118654752f)) + e0 * 0.39894228040143268f * expf(-0.5f * e0 * e0));
# CHECK: out0[l] = e1;
# CHECK-NEXT: out1[l] = e2;
# CHECK: // fused(mul)
# CHECK-NEXT: __global__ void fusedKernel3(
# CHECK-NOT: __global__
# CHECK-LABEL: static void trainStepCuda(const dtc::rt::StepArgs &a) {
# CHECK: const dtc::rt::DeviceContext &c = *a.device;
# CHECK: dtc::cuda::gemm(c, false, true, B, 1024, 784, 1.0f, const_cast<float *>(a.x), {{v[0-9]+}}, 0.0f, {{v[0-9]+}});
# CHECK: [[K:fusedKernel[0-9]+]]<<<dtc::cuda::gridFor(B*1024), dtc::cuda::kThreads, 0, c.stream>>>(B,
# A failed launch is reported under the kernel's own name:
# CHECK-NEXT: dtc::cuda::launched("[[K]]");
# CHECK: dtc::cuda::fill(c, [[SEED:v[0-9]+]], 1, a.gradSeed);
# CHECK: dtc::cuda::crossEntropyGrad(c, {{.*}}, [[SEED]],
# Bucket 0 (fc3, fc2) starts before fc1's gradients are computed:
# CHECK: const dtc::rt::Request [[R0:r[0-9]+]] = a.comm->allreduceStart(0, {{v[0-9]+}}, 1059852);
# CHECK: dtc::cuda::gemm(c, true, false, 1024, 784, B,
# CHECK: const dtc::rt::Request [[R1:r[0-9]+]] = a.comm->allreduceStart(1, {{v[0-9]+}}, 803840);
# CHECK-NEXT: a.comm->wait([[R0]]);
# Loss and metrics stay on the device:
# CHECK-NEXT: dtc::cuda::copy(c, (a.outputs + 0),
# CHECK-NEXT: dtc::cuda::copy(c, (a.outputs + 1),
# One update launch per bucket, the items (weight, gradient, exp_avg,
# exp_avg_sq, size) in a host array of the runtime's UpdateItem:
# CHECK: const dtc::rt::UpdateItem [[U0:u[0-9]+]][] = {
# CHECK-COUNT-4: {v{{[0-9]+}}, v{{[0-9]+}}, v{{[0-9]+}}, v{{[0-9]+}},
# CHECK: dtc::cuda::adamUpdate(c, [[U0]], 4, *a.hyper, nullptr, true);
# CHECK: a.comm->wait([[R1]]);
# CHECK: const dtc::rt::UpdateItem [[U1:u[0-9]+]][] = {
# CHECK-COUNT-2: {v{{[0-9]+}}, v{{[0-9]+}}, v{{[0-9]+}}, v{{[0-9]+}},
# CHECK: dtc::cuda::adamUpdate(c, [[U1]], 2, *a.hyper, nullptr, true);
# CHECK: }
# CHECK-LABEL: static void gradStepCuda(const dtc::rt::StepArgs &a) {
# CHECK-NOT: a.comm
# CHECK: dtc::cuda::copy(c, (a.paramGrads +
# CHECK: s.trainStepCuda = trainStepCuda;
# CHECK: return dtc::rt::runMain(argc, argv, makeSpecWithCuda());
# No step waits for the device or copies to the host:
# NOSYNC-NOT: cudaDeviceSynchronize
# NOSYNC-NOT: cudaStreamSynchronize
# NOSYNC-NOT: cudaMemcpy
