// RUN: dtc-opt %s --dtc-lower-to-runtime | FileCheck %s
// RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
// The planned steps of a one-layer classifier (SGD with momentum, folded)
// lowered to runtime calls: every buffer at its planned place, one call per
// kernel with the runtime's parameters in order, the outputs written before
// the update, the folded momentum accumulated where each gradient is made,
// the bucket's all-reduce on the momentum buffers, one grouped update. The
// C++ printer prints the same calls (CPP), starting from this planned IR.

// What the runtime reads besides the steps, decided here: the bucket (its
// parameters by index), the input and labels from @eval_step's signature,
// the classes from its loss, the memory (the arena's fixed region the
// largest step's, 256, plus 64 of alignment), the fans of each initializer.
// The dtc parameters and module attributes it replaces are gone.
// CHECK-LABEL: module {
// CHECK-NEXT: dtcrt.spec <cpu> {buckets = [#dtcrt.bucket<0, 16, [1, 0]>], buffers = []
// CHECK-SAME: hyper = #dtcrt.hyper<SGD, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64
// CHECK-SAME: input = #dtcrt.input<[4], numel = 4, type = F32, id_limit = 0>
// CHECK-SAME: labels = #dtcrt.labels<Class, numel = 1, classes = 3, ignore_index = -100>
// CHECK-SAME: memory = #dtcrt.memory<persistent = 192, params = 128, buffers = 0, states = 1, per_sample = 32, fixed = 256, grad_per_sample = 32, grad_fixed = 320>
// CHECK-SAME: name = "tinym", outputs = ["loss", "accuracy"]
// CHECK-SAME: params = [#dtcrt.param<"fc.weight", [3, 4], offset = 0, state_offset = 144, init = Uniform, a = -5.000000e-01 : f64, b = 5.000000e-01 : f64, fan_in = 3, fan_out = 4>, #dtcrt.param<"fc.bias", [3], offset = 64, state_offset = 128, init = Uniform
// CHECK-SAME: predict_width = 0 : i64, recipe = #dtcrt.recipe<None,
// CHECK-SAME: source = "tiny.dsl"}
// CHECK-NOT: dtc.param
// CHECK-LABEL: func.func @eval_step()
// CHECK-SAME: attributes {dtcrt.fixed_bytes = 128 : i64}
// CHECK: %[[X:.*]] = dtcrt.step_arg input : !dtcrt.ptr<f32>
// CHECK: %[[Y:.*]] = dtcrt.step_arg class_labels : !dtcrt.ptr<i32>
// CHECK: %[[W:.*]] = dtcrt.buffer persistent[0]
// CHECK: %[[B:.*]] = dtcrt.size 1 batched
// CHECK: %[[H:.*]] = dtcrt.buffer per_sample[0]
// CHECK: dtcrt.gemm(%{{.*}}, %{{.*}}, %[[B]], %{{.*}}, %{{.*}}, %{{.*}}, %[[X]], %[[W]], %{{.*}}, %[[H]])
// CHECK: dtcrt.elementwise ins(%[[H]], %{{.*}} : !dtcrt.ptr<f32>, !dtcrt.ptr<f32>) outs(%[[O:.*]] : !dtcrt.ptr<f32>)
// CHECK-SAME: shape = array<i64: -1, 3>, strides = [array<i64>, array<i64: 0, 1>]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: dtc.add
// CHECK-NEXT: dtc.yield
// CHECK: dtcrt.cross_entropy(%[[O]], %[[Y]],
// CHECK: dtcrt.step_arg outputs
// CHECK: dtcrt.copy
// CHECK-NOT: dtcrt.trace_begin
// CHECK: return

// CHECK-LABEL: func.func @train_step()
// CHECK: dtcrt.trace_begin "matmul"
// CHECK: dtcrt.step_scalar grad_seed
// CHECK: dtcrt.cross_entropy_grad
// The bias gradient, made by sum_to, is accumulated into its momentum
// buffer right after; the weight gradient's GEMM accumulates with beta:
// CHECK: dtcrt.sum_to(%{{.*}}, %{{.*}}, %{{.*}}, %[[DB:.*]], %{{.*}}, %{{.*}})
// CHECK: %[[MB:.*]] = dtcrt.buffer persistent[128]
// CHECK: %[[SHARE:.*]] = dtcrt.step_scalar momentum_share
// CHECK: dtcrt.momentum_accumulate(%[[MB]], %[[DB]], %{{.*}}, %[[SHARE]])
// CHECK: %[[MW:.*]] = dtcrt.buffer persistent[144]
// CHECK: %[[BETA:.*]] = dtcrt.step_scalar momentum_share
// CHECK: dtcrt.gemm(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[X2:.*]], %[[BETA]], %[[MW]])
// CHECK: %[[BUCKET:.*]] = dtcrt.buffer persistent[128]
// CHECK: %[[REQ:.*]] = dtcrt.allreduce_start %[[BUCKET]], %{{.*}} bucket 0
// CHECK-NEXT: dtcrt.wait %[[REQ]]
// CHECK: dtcrt.copy
// CHECK: dtcrt.copy
// CHECK: dtcrt.trace_begin "update fc.bias fc.weight"
// CHECK: %[[ITEMS:.*]] = dtcrt.update_items weights(%{{.*}}, %{{.*}} : {{.*}}) grads(%{{.*}}, %{{.*}} : {{.*}}) states() sizes(%{{.*}}, %{{.*}}) {states_per_item = 0 : i64}
// CHECK: dtcrt.sgd_apply_momentum(%[[ITEMS]], %{{.*}}, %{{.*}})

// CHECK-LABEL: func.func @grad_step()
// CHECK-NOT: allreduce
// CHECK-NOT: momentum
// CHECK: dtcrt.step_arg param_grads
// CHECK: dtcrt.offset %{{.*}}[0]
// CHECK: dtcrt.copy
// CHECK: dtcrt.offset %{{.*}}[12]
// CHECK: dtcrt.copy

// CPP-LABEL: static void trainStep(
// CPP: dtc::kern::momentumAccumulate(c, {{v[0-9]+}}, {{v[0-9]+}}, 3, dtc::rt::momentumShare(*a.hyper, a.comm->size()));
// CPP: dtc::kern::gemm(c, true, false, 3, 4, B, 1.0f, {{v[0-9]+}}, const_cast<float *>(a.x), dtc::rt::momentumShare(*a.hyper, a.comm->size()), {{v[0-9]+}});
// CPP: const dtc::rt::Request [[R:r[0-9]+]] = a.comm->allreduceStart(0, {{v[0-9]+}}, 16);
// CPP: a.comm->wait([[R]]);
// CPP: dtc::kern::sgdApplyMomentum(c, {{u[0-9]+}}, 2, *a.hyper);
// CPP-LABEL: static void gradStep(
// CPP: dtc::kern::copy(c, (a.paramGrads + 12), {{v[0-9]+}}, 3);

module attributes {dtc.model = "tinym", dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0, momentum = 0.9>, dtc.persistent = #dtc.persistent<param_bytes = 128, bytes = 192>, dtc.recipe = #dtc.recipe<>, dtc.source = "tiny.dsl"} {
  dtc.param @fc.weight : tensor<3x4xf32> {a = -5.000000e-01 : f64, b = 5.000000e-01 : f64, dtc.placement = #dtc.placement<offset = 0, state_offset = 144>, init = #dtc.init<uniform>}
  dtc.param @fc.bias : tensor<3xf32> {a = -5.000000e-01 : f64, b = 5.000000e-01 : f64, dtc.placement = #dtc.placement<offset = 64, state_offset = 128>, init = #dtc.init<uniform>}
  func.func @eval_step(%arg0: tensor<?x4xf32> {dtc.name = "x"}, %arg1: tensor<?xi32> {dtc.name = "y"}) -> (tensor<f32>, tensor<f32>) attributes {dtc.arena = #dtc.arena<per_sample = 32, fixed = 128, naive_per_sample = 32, naive_fixed = 128>, dtc.outputs = ["loss", "accuracy"]} {
    %0 = dtc.param_ref @fc.weight : tensor<3x4xf32>
    %1 = dtc.matmul %arg0, %0 {dtc.offsets = array<i64: 0>, transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
    %2 = dtc.param_ref @fc.bias : tensor<3xf32>
    %3 = dtc.fused(%1, %2) {dtc.offsets = array<i64: 16>} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32> {
    ^bb0(%arg2: tensor<?x3xf32>, %arg3: tensor<3xf32>):
      %6 = dtc.add %arg2, %arg3 : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
      dtc.yield %6 : tensor<?x3xf32>
    }
    %4 = dtc.cross_entropy %3, %arg1 {dtc.offsets = array<i64: 0>} : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %5 = dtc.accuracy %3, %arg1 {dtc.offsets = array<i64: 64>} : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    return %4, %5 : tensor<f32>, tensor<f32>
  }
  func.func @train_step(%arg0: tensor<?x4xf32> {dtc.name = "x"}, %arg1: tensor<?xi32> {dtc.name = "y"}) -> (tensor<f32>, tensor<f32>) attributes {dtc.arena = #dtc.arena<per_sample = 32, fixed = 192, naive_per_sample = 48, naive_fixed = 256>, dtc.outputs = ["loss", "accuracy"], dtc.traced} {
    %0 = dtc.param_ref @fc.weight : tensor<3x4xf32>
    %1 = dtc.matmul %arg0, %0 {dtc.offsets = array<i64: 0>, transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
    %2 = dtc.param_ref @fc.bias : tensor<3xf32>
    %3 = dtc.fused(%1, %2) {dtc.offsets = array<i64: 16>} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32> {
    ^bb0(%arg2: tensor<?x3xf32>, %arg3: tensor<3xf32>):
      %12 = dtc.add %arg2, %arg3 : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
      dtc.yield %12 : tensor<?x3xf32>
    }
    %4 = dtc.cross_entropy %3, %arg1 {dtc.offsets = array<i64: 0>} : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %5 = dtc.accuracy %3, %arg1 {dtc.offsets = array<i64: 64>} : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %6 = dtc.grad_seed {dtc.offsets = array<i64: 128>} : tensor<f32>
    %7 = dtc.cross_entropy_grad %3, %arg1, %6 {dtc.offsets = array<i64: 0>} : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x3xf32>
    %8 = dtc.sum_to %7 {dtc.offsets = array<i64: 128>} : tensor<?x3xf32> -> tensor<3xf32>
    %9 = dtc.matmul %7, %arg0 {dtc.offsets = array<i64: 144>, transpose_lhs = true} : tensor<?x3xf32>, tensor<?x4xf32> -> tensor<3x4xf32>
    %10 = dtc.all_reduce_start(%8, %9) {bucket = 0 : i64, dtc.bucket_plan = #dtc.bucket_plan<offset = 128, count = 16, momentum_offset = 128>} : tensor<3xf32>, tensor<3x4xf32>
    %11:2 = dtc.all_reduce_wait %10, (%8, %9) {bucket = 0 : i64} : (tensor<3xf32>, tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3x4xf32>)
    dtc.update_group [@fc.bias, @fc.weight](%11#0, %11#1) {momentum_folded} : tensor<3xf32>, tensor<3x4xf32>
    return %4, %5 : tensor<f32>, tensor<f32>
  }
  func.func @grad_step(%arg0: tensor<?x4xf32> {dtc.name = "x"}, %arg1: tensor<?xi32> {dtc.name = "y"}) -> (tensor<f32>, tensor<f32>) attributes {dtc.arena = #dtc.arena<per_sample = 32, fixed = 256, naive_per_sample = 48, naive_fixed = 320>, dtc.outputs = ["loss", "accuracy"]} {
    %0 = dtc.param_ref @fc.weight : tensor<3x4xf32>
    %1 = dtc.matmul %arg0, %0 {dtc.offsets = array<i64: 0>, transpose_rhs = true} : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
    %2 = dtc.param_ref @fc.bias : tensor<3xf32>
    %3 = dtc.fused(%1, %2) {dtc.offsets = array<i64: 16>} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32> {
    ^bb0(%arg2: tensor<?x3xf32>, %arg3: tensor<3xf32>):
      %10 = dtc.add %arg2, %arg3 : tensor<?x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
      dtc.yield %10 : tensor<?x3xf32>
    }
    %4 = dtc.cross_entropy %3, %arg1 {dtc.offsets = array<i64: 0>} : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %5 = dtc.accuracy %3, %arg1 {dtc.offsets = array<i64: 64>} : tensor<?x3xf32>, tensor<?xi32> -> tensor<f32>
    %6 = dtc.grad_seed {dtc.offsets = array<i64: 128>} : tensor<f32>
    %7 = dtc.cross_entropy_grad %3, %arg1, %6 {dtc.offsets = array<i64: 0>} : (tensor<?x3xf32>, tensor<?xi32>, tensor<f32>) -> tensor<?x3xf32>
    %8 = dtc.sum_to %7 {dtc.offsets = array<i64: 128>} : tensor<?x3xf32> -> tensor<3xf32>
    %9 = dtc.matmul %7, %arg0 {dtc.offsets = array<i64: 192>, transpose_lhs = true} : tensor<?x3xf32>, tensor<?x4xf32> -> tensor<3x4xf32>
    dtc.export_gradient @fc.weight, %9 at 0 : tensor<3x4xf32>
    dtc.export_gradient @fc.bias, %8 at 12 : tensor<3xf32>
    return %4, %5 : tensor<f32>, tensor<f32>
  }
}
