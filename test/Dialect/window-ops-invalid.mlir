// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// The window ops' verifiers: every type against dtc::shape::conv2d / pool2d.

func.func @wrong_result(%x: tensor<?x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'dtc.conv2d' op result: the convolution gives [B, 4, 6, 6], not [B, 4, 8, 8]}}
  %y = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<?x4x8x8xf32>
  return
}

// -----

func.func @groups(%x: tensor<?x3x8x8xf32>, %w: tensor<4x1x3x3xf32>) {
  // expected-error @+1 {{conv2d: 3 input channels and 4 output channels must both be divisible by groups (2)}}
  %y = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64} : tensor<?x3x8x8xf32>, tensor<4x1x3x3xf32> -> tensor<?x4x6x6xf32>
  return
}

// -----

func.func @channels(%x: tensor<?x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{conv2d: the weight [4, 2, 3, 3] takes 2 channels per group, but the input [B, 3, 8, 8] has 3 (3 channels in 1 group)}}
  %y = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x8x8xf32>, tensor<4x2x3x3xf32> -> tensor<?x4x6x6xf32>
  return
}

// -----

func.func @too_large(%x: tensor<?x3x4x4xf32>, %w: tensor<4x3x5x5xf32>) {
  // expected-error @+1 {{conv2d: the kernel (5 with dilation) is larger than the padded input (4) in height}}
  %y = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x4x4xf32>, tensor<4x3x5x5xf32> -> tensor<?x4x1x1xf32>
  return
}

// -----

func.func @rank(%x: tensor<?x3x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{conv2d needs an input [N, C, H, W], got [B, 3, 8]}}
  %y = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x8xf32>, tensor<4x3x3x3xf32> -> tensor<?x4x6x6xf32>
  return
}

// -----

func.func @pairs(%x: tensor<?x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'dtc.conv2d' op 'stride' needs 2 values (H, W), got 1}}
  %y = dtc.conv2d %x, %w {stride = array<i64: 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<?x4x6x6xf32>
  return
}

// -----

func.func @grad_input(%dy: tensor<?x4x6x6xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'dtc.conv2d_grad_input' op dy: the convolution gives [B, 4, 7, 7], not [B, 4, 6, 6]}}
  %dx = dtc.conv2d_grad_input %dy, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x4x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<?x3x9x9xf32>
  return
}

// -----

func.func @grad_weight_batched(%x: tensor<?x3x8x8xf32>, %dy: tensor<?x4x6x6xf32>) {
  // expected-error @+1 {{'dtc.conv2d_grad_weight' op the weight gradient has a fixed shape}}
  %dw = dtc.conv2d_grad_weight %x, %dy {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x8x8xf32>, tensor<?x4x6x6xf32> -> tensor<?x3x3x3xf32>
  return
}

// -----

func.func @pool_padding(%x: tensor<?x3x8x8xf32>) {
  // expected-error @+1 {{max_pool2d: padding (2) must be at most half the kernel (3)}}
  %y = dtc.max_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 2, 2>} : tensor<?x3x8x8xf32> -> tensor<?x3x10x10xf32>
  return
}

// -----

func.func @pool_result(%x: tensor<?x3x8x8xf32>) {
  // expected-error @+1 {{'dtc.avg_pool2d' op result: the pooling gives [B, 3, 4, 4], not [B, 3, 4, 3]}}
  %y = dtc.avg_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, count_include_pad = true} : tensor<?x3x8x8xf32> -> tensor<?x3x4x3xf32>
  return
}

// -----

func.func @pool_grad_type(%x: tensor<?x3x8x8xf32>, %dy: tensor<?x3x4x4xf32>) {
  // expected-error @+1 {{'dtc.max_pool2d_grad' op returns the input's type}}
  %dx = dtc.max_pool2d_grad %x, %dy {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x3x8x8xf32>, tensor<?x3x4x4xf32> -> tensor<?x3x8x7xf32>
  return
}

// -----

func.func @scratch_elsewhere(%x: tensor<?x3x8x8xf32>) {
  // expected-error @+1 {{'dtc.scratch' belongs on an op that needs scratch memory, not on 'dtc.max_pool2d'}}
  %y = dtc.max_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dtc.scratch = 0 : i64} : tensor<?x3x8x8xf32> -> tensor<?x3x4x4xf32>
  return
}

// -----

// channels_last: x is [N, H, W, C] and the result [N, Ho, Wo, O].
func.func @channels_last_result(%x: tensor<?x8x8x3xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'dtc.conv2d' op result: the convolution gives [B, 6, 6, 4], not [B, 4, 6, 6]}}
  %y = dtc.conv2d %x, %w {channels_last, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x8x8x3xf32>, tensor<4x3x3x3xf32> -> tensor<?x4x6x6xf32>
  return
}

// -----

func.func @channels_last_nchw_input(%x: tensor<?x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{conv2d: the weight [4, 3, 3, 3] takes 3 channels per group, but the input [B, 8, 3, 8] has 8 (8 channels in 1 group)}}
  %y = dtc.conv2d %x, %w {channels_last, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<?x6x6x4xf32>
  return
}

// -----

func.func @channels_last_pool(%x: tensor<?x8x8x3xf32>) {
  // expected-error @+1 {{'dtc.max_pool2d' op result: the pooling gives [B, 4, 4, 3], not [B, 3, 4, 4]}}
  %y = dtc.max_pool2d %x {channels_last, kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x8x8x3xf32> -> tensor<?x3x4x4xf32>
  return
}

// -----

// Blocked (dtc-blocked-layout): a rank-5 activation is [N, C / 16, H, W, 16].
func.func @blocked_not_16(%x: tensor<?x2x8x8x8xf32>, %w: tensor<4x16x3x3xf32>) {
  // expected-error @+1 {{conv2d: a blocked input must be [N, C / 16, H, W, 16], got [B, 2, 8, 8, 8]}}
  %y = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x2x8x8x8xf32>, tensor<4x16x3x3xf32> -> tensor<?x4x6x6xf32>
  return
}

// -----

func.func @blocked_result_shape(%x: tensor<?x1x8x8x16xf32>, %w: tensor<32x16x3x3xf32>) {
  // expected-error @+1 {{'dtc.conv2d' op result: the convolution gives [B, 32, 6, 6], not [B, 2, 6, 6, 8]}}
  %y = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<?x1x8x8x16xf32>, tensor<32x16x3x3xf32> -> tensor<?x2x6x6x8xf32>
  return
}

// -----

func.func @blocked_pool_one_side(%x: tensor<?x1x8x8x16xf32>) {
  // expected-error @+1 {{'dtc.max_pool2d' op result: blocked on both sides of the pooling, or neither}}
  %y = dtc.max_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x1x8x8x16xf32> -> tensor<?x16x4x4xf32>
  return
}

// -----

func.func @blocked_channels_last(%x: tensor<?x1x8x8x16xf32>) {
  // expected-error @+1 {{max_pool2d: a blocked input is not channels last}}
  %y = dtc.max_pool2d %x {channels_last, kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<?x1x8x8x16xf32> -> tensor<?x1x4x4x16xf32>
  return
}
