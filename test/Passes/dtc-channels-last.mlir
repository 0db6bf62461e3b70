// RUN: dtc-opt %s --dtc-channels-last --canonicalize | FileCheck %s --enable-var-scope
// RUN: dtc-opt %s --dtc-channels-last --canonicalize --dtc-autodiff | FileCheck %s --check-prefix=GRAD
// conv -> batch norm (relu) -> max pool -> conv -> avg pool, then a reshape:
// each op in its channels_last form, one transpose to NHWC at the start
// and one back before the reshape (the ones between cancel); the batch
// norm's update reads the NHWC input; the weights stay [O, C, kH, kW].

// CHECK-LABEL: func.func @forward
// CHECK: %[[X:.*]] = dtc.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : tensor<?x3x8x8xf32> -> tensor<?x8x8x3xf32>
// CHECK: %[[C1:.*]] = dtc.conv2d %[[X]], %{{.*}}, %{{.*}} {channels_last, {{.*}}} : tensor<?x8x8x3xf32>, tensor<4x3x3x3xf32>, tensor<4xf32> -> tensor<?x8x8x4xf32>
// CHECK-NOT: dtc.transpose
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[VAR:.*]] = dtc.batch_norm %[[C1]], {{.*}} {channels_last, eps = {{.*}}, relu} : tensor<?x8x8x4xf32>, tensor<4xf32>
// CHECK: dtc.update_running_stats @n.running_mean, @n.running_var, @n.num_batches_tracked(%[[C1]], %[[MEAN]], %[[VAR]]) {channels_last, {{.*}}} : tensor<?x8x8x4xf32>, tensor<4xf32>
// CHECK: %[[M:.*]] = dtc.max_pool2d %[[Y]] {channels_last, {{.*}}} : tensor<?x8x8x4xf32> -> tensor<?x4x4x4xf32>
// CHECK: %[[C2:.*]] = dtc.conv2d %[[M]], %{{.*}} {channels_last, {{.*}}} : tensor<?x4x4x4xf32>, tensor<6x4x1x1xf32> -> tensor<?x4x4x6xf32>
// CHECK: %[[A:.*]] = dtc.avg_pool2d %[[C2]] {channels_last, {{.*}}} : tensor<?x4x4x6xf32> -> tensor<?x2x2x6xf32>
// CHECK: %[[BACK:.*]] = dtc.transpose %[[A]] {perm = array<i64: 0, 3, 1, 2>} : tensor<?x2x2x6xf32> -> tensor<?x6x2x2xf32>
// CHECK-NOT: dtc.transpose
// CHECK: dtc.reshape %[[BACK]] : tensor<?x6x2x2xf32> -> tensor<?x24xf32>

// The gradients inherit the layout from the ops they differentiate.
// GRAD-LABEL: func.func @train_step
// GRAD: dtc.avg_pool2d_grad %{{.*}} {channels_last, {{.*}}} : tensor<?x2x2x6xf32> -> tensor<?x4x4x6xf32>
// GRAD: dtc.conv2d_grad_input %{{.*}}, %{{.*}} {channels_last, {{.*}}} : tensor<?x4x4x6xf32>, tensor<6x4x1x1xf32> -> tensor<?x4x4x4xf32>
// GRAD: dtc.conv2d_grad_weight %{{.*}}, %{{.*}} {channels_last, {{.*}}} : tensor<?x4x4x4xf32>, tensor<?x4x4x6xf32> -> tensor<6x4x1x1xf32>
// GRAD: dtc.max_pool2d_grad %{{.*}}, %{{.*}} {channels_last, {{.*}}} : tensor<?x8x8x4xf32>, tensor<?x4x4x4xf32> -> tensor<?x8x8x4xf32>
// GRAD: dtc.batch_norm_grad {{.*}} relu({{.*}} : tensor<?x8x8x4xf32>) {channels_last, {{.*}}} : tensor<?x8x8x4xf32>, tensor<4xf32>
// GRAD: dtc.conv2d_grad_weight %{{.*}}, %{{.*}} {channels_last, {{.*}}} : tensor<?x8x8x3xf32>, tensor<?x8x8x4xf32> -> tensor<4x3x3x3xf32>, tensor<4xf32>
module {
  dtc.param @c1.weight : tensor<4x3x3x3xf32>
  dtc.param @c1.bias : tensor<4xf32>
  dtc.param @n.weight : tensor<4xf32>
  dtc.param @n.bias : tensor<4xf32>
  dtc.buffer @n.running_mean : tensor<4xf32>
  dtc.buffer @n.running_var : tensor<4xf32>
  dtc.buffer @n.num_batches_tracked : tensor<i64>
  dtc.param @c2.weight : tensor<6x4x1x1xf32>
  dtc.param @fc.weight : tensor<2x24xf32>
  func.func @forward(%x: tensor<?x3x8x8xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w1 = dtc.param_ref @c1.weight : tensor<4x3x3x3xf32>
    %b1 = dtc.param_ref @c1.bias : tensor<4xf32>
    %c1 = dtc.conv2d %x, %w1, %b1 {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32> -> tensor<?x4x8x8xf32>
    %nw = dtc.param_ref @n.weight : tensor<4xf32>
    %nb = dtc.param_ref @n.bias : tensor<4xf32>
    %rm = dtc.param_ref @n.running_mean : tensor<4xf32>
    %rv = dtc.param_ref @n.running_var : tensor<4xf32>
    %n, %mean, %var = dtc.batch_norm %c1, %nw, %nb, %rm, %rv {eps = 1.0e-05 : f64, relu} : tensor<?x4x8x8xf32>, tensor<4xf32>
    dtc.update_running_stats @n.running_mean, @n.running_var, @n.num_batches_tracked(%c1, %mean, %var) {momentum = 1.0e-01 : f64} : tensor<?x4x8x8xf32>, tensor<4xf32>
    %m = dtc.max_pool2d %n {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x4x8x8xf32> -> tensor<?x4x4x4xf32>
    %w2 = dtc.param_ref @c2.weight : tensor<6x4x1x1xf32>
    %c2 = dtc.conv2d %m, %w2 {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x4x4x4xf32>, tensor<6x4x1x1xf32> -> tensor<?x6x4x4xf32>
    %a = dtc.avg_pool2d %c2 {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, count_include_pad = true} : tensor<?x6x4x4xf32> -> tensor<?x6x2x2xf32>
    %r = dtc.reshape %a : tensor<?x6x2x2xf32> -> tensor<?x24xf32>
    %wf = dtc.param_ref @fc.weight : tensor<2x24xf32>
    %o = dtc.matmul %r, %wf {transpose_rhs = true} : tensor<?x24xf32>, tensor<2x24xf32> -> tensor<?x2xf32>
    %l = dtc.cross_entropy %o, %y : tensor<?x2xf32>, tensor<?xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
