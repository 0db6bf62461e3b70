# RUN: dtc %s --emit=mlir-opt | FileCheck %s --check-prefix=PLAN
# RUN: dtc %s --emit=mlir-runtime | FileCheck %s --check-prefix=RT
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# Elementwise kernels written over an input whose last use they are
# (dtc-plan-memory's dtc.in_place): h's bias add over h's GEMM result (its
# buffer), then bias + tanh + the residual add over t's GEMM result (h, the
# other input of its type that dies there, keeps its buffer); carried to the
# runtime calls as `in_place` and printed as kernels that read that input
# through their output. In the training step the second kernel also keeps
# tanh's result for the backward: a second output, in a buffer of its own.
input x: f32[B, 8]
label y: i32[B]
h = linear(x, 8)
t = linear(h, 8, act=tanh)
r = h + t
loss = cross_entropy(r, y)
train {
  data = synthetic(train=16, test=0)
  batch = 8
}
# PLAN-LABEL: func.func @eval_step
# PLAN: %[[G:.*]] = dtc.matmul {{.*}}dtc.offsets = array<i64: [[OFF:[0-9]+]]>
# PLAN: %[[H:.*]] = dtc.fused(%[[G]], %{{.*}}) {dtc.in_place = array<i64: 0>, dtc.offsets = array<i64: [[OFF]]>}
# PLAN: %[[G2:.*]] = dtc.matmul %[[H]], {{.*}}dtc.offsets = array<i64: [[OFF2:[0-9]+]]>
# PLAN: dtc.fused(%[[G2]], %{{.*}}, %[[H]]) {dtc.in_place = array<i64: 0>, dtc.offsets = array<i64: [[OFF2]]>}
# PLAN-LABEL: func.func @train_step
# PLAN: dtc.fused({{.*}}) {dtc.in_place = array<i64: 0, -1>, dtc.offsets = array<i64: [[T:[0-9]+]], {{[0-9]+}}>}
# RT-LABEL: func.func @eval_step
# RT: dtcrt.elementwise ins({{.*}}) outs({{.*}}) count %{{.*}} attributes {in_place = array<i64: 0>, label = "add",
# RT: dtcrt.elementwise ins({{.*}}) outs({{.*}}) count %{{.*}} attributes {in_place = array<i64: 0>, label = "add,tanh,add",
# CPP: // fused(add)
# CPP-NEXT: static void {{fused[0-9]+}}(int64_t B, int64_t lo, int64_t hi, const float *__restrict__ in1, float *__restrict__ out0) {
# CPP: const float x0 = out0[l];
# CPP-NEXT: const float x1 = in1[i1];
# CPP: out0[l] = e0;
# CPP: // fused(add,tanh,add)
# CPP-NEXT: static void {{fused[0-9]+}}(int64_t B, int64_t lo, int64_t hi, const float *__restrict__ in1, const float *__restrict__ in2, float *__restrict__ out0) {
# CPP: const float x0 = out0[l];
# CPP-NEXT: const float x1 = in1[i1];
# CPP-NEXT: const float x2 = in2[l];
