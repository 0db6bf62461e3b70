# RUN: dtc %s --emit=cpp | FileCheck %s
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=CUDA
# RUN: dtc %s --report --emit=mlir-opt -o /dev/null | FileCheck %s --check-prefix=REPORT
# matmul over leading dimensions lowered to GEMM calls: nn.Linear on a 3-D
# input is one GEMM over all B*4 rows, its weight gradient one GEMM whose
# inner dimension is every row (contract_batch); the per-sample scores
# [B, 4, 4] and their gradients one batched call of B products
# (kern::gemmBatched; cuBLAS's strided batched GEMM on CUDA).
input x: f32[B, 4, 6]
label y: i32[B]
l1 = linear(x, 5)
s = l1 @ transpose(l1, 1, 2)
loss = cross_entropy(flatten(s), y)
train {
  data = synthetic(train=16, test=0)
  batch = 8
}
# CHECK-LABEL: trainStep
# CHECK: dtc::kern::gemm(c, false, true, B*4, 5, 6, 1.0f, const_cast<float *>(a.x),
# CHECK: dtc::kern::gemmBatched(c, false, true, B, 4, 4, 5, 1.0f, [[L1:v[0-9]+]], [[L1]], 0.0f,
# CHECK: dtc::kern::gemmBatched(c, false, false, B, 4, 5, 4, 1.0f, [[DS:v[0-9]+]], [[L1]], 0.0f,
# CHECK: dtc::kern::gemmBatched(c, true, false, B, 4, 5, 4, 1.0f, [[DS]], [[L1]], 0.0f,
# CHECK: dtc::kern::gemm(c, true, false, 5, 6, B*4, 1.0f, {{v[0-9]+}}, const_cast<float *>(a.x), 0.0f,
# CUDA-LABEL: trainStep
# CUDA: dtc::cuda::gemm(c, false, true, B*4, 5, 6,
# CUDA: dtc::cuda::gemmBatched(c, false, true, B, 4, 4, 5,
# 2 x (B*4*5*6 forward + B*4*4*5 scores + 2 x B*4*4*5 their gradients +
# B*4*5*6 the weight's), B = 8: 2 x 8 x (120 + 80 + 160 + 120) = 7680.
# REPORT: GEMM FLOPs per training step (batch 8): 7680
