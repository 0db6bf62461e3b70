// RUN: dtc-opt %s --dtc-blocked-layout --canonicalize | FileCheck %s --enable-var-scope
// RUN: dtc-opt %s --dtc-blocked-layout --canonicalize --dtc-autodiff | FileCheck %s --check-prefix=GRAD
// conv (3 -> 16 channels) -> batch norm (relu) -> max pool -> conv (16 ->
// 16) -> avg pool -> conv (16 -> 6), then a reshape: activations of 16
// channels blocked, [N, 1, H, W, 16]; the first convolution reads its 3
// channels NCHW and writes blocked, the last reads blocked and writes NCHW;
// the conversions between the ops cancel, so none is left; the batch norm's
// update reads the blocked input; the weights stay [O, C, kH, kW].

// CHECK-LABEL: func.func @forward
// CHECK-NOT: dtc.transpose
// CHECK: %[[C1:.*]] = dtc.conv2d %arg0, %{{.*}}, %{{.*}} {{.*}} : tensor<?x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32> -> tensor<?x1x8x8x16xf32>
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[VAR:.*]] = dtc.batch_norm %[[C1]], {{.*}} : tensor<?x1x8x8x16xf32>, tensor<16xf32>
// CHECK: dtc.update_running_stats @n.running_mean, @n.running_var, @n.num_batches_tracked(%[[C1]], %[[MEAN]], %[[VAR]]) {{.*}} : tensor<?x1x8x8x16xf32>, tensor<16xf32>
// CHECK: %[[M:.*]] = dtc.max_pool2d %[[Y]] {{.*}} : tensor<?x1x8x8x16xf32> -> tensor<?x1x4x4x16xf32>
// CHECK: %[[C2:.*]] = dtc.conv2d %[[M]], %{{.*}} {{.*}} : tensor<?x1x4x4x16xf32>, tensor<16x16x1x1xf32> -> tensor<?x1x4x4x16xf32>
// CHECK: %[[A:.*]] = dtc.avg_pool2d %[[C2]] {{.*}} : tensor<?x1x4x4x16xf32> -> tensor<?x1x2x2x16xf32>
// CHECK: %[[C3:.*]] = dtc.conv2d %[[A]], %{{.*}} {{.*}} : tensor<?x1x2x2x16xf32>, tensor<6x16x1x1xf32> -> tensor<?x6x2x2xf32>
// CHECK-NOT: dtc.transpose
// CHECK: dtc.reshape %[[C3]] : tensor<?x6x2x2xf32> -> tensor<?x24xf32>

// The gradients take the blocked types of what they differentiate.
// GRAD-LABEL: func.func @train_step
// GRAD: dtc.conv2d_grad_input %{{.*}}, %{{.*}} {{.*}} : tensor<?x6x2x2xf32>, tensor<6x16x1x1xf32> -> tensor<?x1x2x2x16xf32>
// GRAD: dtc.avg_pool2d_grad %{{.*}} {{.*}} : tensor<?x1x2x2x16xf32> -> tensor<?x1x4x4x16xf32>
// GRAD: dtc.max_pool2d_grad %{{.*}}, %{{.*}} {{.*}} : tensor<?x1x8x8x16xf32>, tensor<?x1x4x4x16xf32> -> tensor<?x1x8x8x16xf32>
// GRAD: dtc.batch_norm_grad {{.*}} relu({{.*}} : tensor<?x1x8x8x16xf32>) {{.*}} : tensor<?x1x8x8x16xf32>, tensor<16xf32>
// GRAD: dtc.conv2d_grad_weight %arg0, %{{.*}} {{.*}} : tensor<?x3x8x8xf32>, tensor<?x1x8x8x16xf32> -> tensor<16x3x3x3xf32>, tensor<16xf32>
// GRAD-NOT: dtc.transpose
module {
  dtc.param @c1.weight : tensor<16x3x3x3xf32>
  dtc.param @c1.bias : tensor<16xf32>
  dtc.param @n.weight : tensor<16xf32>
  dtc.param @n.bias : tensor<16xf32>
  dtc.buffer @n.running_mean : tensor<16xf32>
  dtc.buffer @n.running_var : tensor<16xf32>
  dtc.buffer @n.num_batches_tracked : tensor<i64>
  dtc.param @c2.weight : tensor<16x16x1x1xf32>
  dtc.param @c3.weight : tensor<6x16x1x1xf32>
  dtc.param @fc.weight : tensor<2x24xf32>
  func.func @forward(%x: tensor<?x3x8x8xf32>, %y: tensor<?xi32>) -> tensor<f32> {
    %w1 = dtc.param_ref @c1.weight : tensor<16x3x3x3xf32>
    %b1 = dtc.param_ref @c1.bias : tensor<16xf32>
    %c1 = dtc.conv2d %x, %w1, %b1 {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32> -> tensor<?x16x8x8xf32>
    %nw = dtc.param_ref @n.weight : tensor<16xf32>
    %nb = dtc.param_ref @n.bias : tensor<16xf32>
    %rm = dtc.param_ref @n.running_mean : tensor<16xf32>
    %rv = dtc.param_ref @n.running_var : tensor<16xf32>
    %n, %mean, %var = dtc.batch_norm %c1, %nw, %nb, %rm, %rv {eps = 1.0e-05 : f64, relu} : tensor<?x16x8x8xf32>, tensor<16xf32>
    dtc.update_running_stats @n.running_mean, @n.running_var, @n.num_batches_tracked(%c1, %mean, %var) {momentum = 1.0e-01 : f64} : tensor<?x16x8x8xf32>, tensor<16xf32>
    %m = dtc.max_pool2d %n {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x16x8x8xf32> -> tensor<?x16x4x4xf32>
    %w2 = dtc.param_ref @c2.weight : tensor<16x16x1x1xf32>
    %c2 = dtc.conv2d %m, %w2 {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x16x4x4xf32>, tensor<16x16x1x1xf32> -> tensor<?x16x4x4xf32>
    %a = dtc.avg_pool2d %c2 {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, count_include_pad = true} : tensor<?x16x4x4xf32> -> tensor<?x16x2x2xf32>
    %w3 = dtc.param_ref @c3.weight : tensor<6x16x1x1xf32>
    %c3 = dtc.conv2d %a, %w3 {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x16x2x2xf32>, tensor<6x16x1x1xf32> -> tensor<?x6x2x2xf32>
    %r = dtc.reshape %c3 : tensor<?x6x2x2xf32> -> tensor<?x24xf32>
    %wf = dtc.param_ref @fc.weight : tensor<2x24xf32>
    %o = dtc.matmul %r, %wf {transpose_rhs = true} : tensor<?x24xf32>, tensor<2x24xf32> -> tensor<?x2xf32>
    %l = dtc.cross_entropy %o, %y : tensor<?x2xf32>, tensor<?xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
