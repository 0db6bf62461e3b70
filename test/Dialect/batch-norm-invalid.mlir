// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// Batch normalization's verifiers: per-channel types against
// dtc::shape::batchNorm, eps, momentum, and the buffers an update names.

func.func @channels(%x: tensor<?x3x4x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'dtc.batch_norm' op per-channel operands must be 'tensor<3xf32>' for an input [B, 3, 4, 4], got 'tensor<4xf32>'}}
  %o, %m, %v = dtc.batch_norm %x, %c, %c, %c, %c {eps = 1.0e-05 : f64} : tensor<?x3x4x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @rank(%x: tensor<?xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{batch_norm needs an input [N, C], [N, C, L] or [N, C, H, W], got [B]}}
  %o, %m, %v = dtc.batch_norm %x, %c, %c, %c, %c {eps = 1.0e-05 : f64} : tensor<?xf32>, tensor<3xf32>
  return
}

// -----

func.func @eps(%x: tensor<?x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_inference' op eps must be > 0, got 0}}
  %o = dtc.batch_norm_inference %x, %c, %c, %c, %c {eps = 0.0 : f64} : tensor<?x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @grad_channels(%x: tensor<?x3xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_grad' op per-channel operands must be 'tensor<3xf32>'}}
  %dx, %dw, %db = dtc.batch_norm_grad %x, %x, %c, %c, %c {eps = 1.0e-05 : f64} : tensor<?x3xf32>, tensor<2xf32>
  return
}

// -----

module {
  dtc.buffer @rm : tensor<3xf32>
  dtc.buffer @rv : tensor<3xf32>
  dtc.buffer @nbt : tensor<i64>
  func.func @momentum(%x: tensor<?x3xf32>, %c: tensor<3xf32>) {
    // expected-error @+1 {{'dtc.update_running_stats' op momentum must be in [0, 1], got 1.5}}
    dtc.update_running_stats @rm, @rv, @nbt(%x, %c, %c) {momentum = 1.5 : f64} : tensor<?x3xf32>, tensor<3xf32>
    return
  }
}

// -----

module {
  dtc.buffer @rm : tensor<3xf32>
  dtc.buffer @rv : tensor<3xf32>
  dtc.buffer @nbt : tensor<f32>
  func.func @counter(%x: tensor<?x3xf32>, %c: tensor<3xf32>) {
    // expected-error @+1 {{'dtc.update_running_stats' op buffer 'nbt' must be 'tensor<i64>', got 'tensor<f32>'}}
    dtc.update_running_stats @rm, @rv, @nbt(%x, %c, %c) {momentum = 0.1 : f64} : tensor<?x3xf32>, tensor<3xf32>
    return
  }
}

// -----

module {
  dtc.param @rm : tensor<3xf32>
  dtc.buffer @rv : tensor<3xf32>
  dtc.buffer @nbt : tensor<i64>
  func.func @not_a_buffer(%x: tensor<?x3xf32>, %c: tensor<3xf32>) {
    // expected-error @+1 {{'dtc.update_running_stats' op 'rm' is not a dtc.buffer of this module}}
    dtc.update_running_stats @rm, @rv, @nbt(%x, %c, %c) {momentum = 0.1 : f64} : tensor<?x3xf32>, tensor<3xf32>
    return
  }
}

// -----

// expected-error @+1 {{'dtc.buffer' op buffer name '__metadata__' cannot be a checkpoint key}}
dtc.buffer @__metadata__ : tensor<3xf32>

// -----

module {
  dtc.buffer @rm : tensor<3xf32>
  func.func @read(%x: tensor<?x3xf32>) {
    // expected-error @+1 {{'dtc.param_ref' op type 'tensor<4xf32>' does not match buffer type 'tensor<3xf32>'}}
    %r = dtc.param_ref @rm : tensor<4xf32>
    return
  }
}

// -----

func.func @relu_result(%x: tensor<?x3xf32>, %r: tensor<?x4xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_grad' op relu_result must be of the input's type 'tensor<?x3xf32>', got 'tensor<?x4xf32>'}}
  %dx, %dw, %db = dtc.batch_norm_grad %x, %x, %c, %c, %c relu(%r : tensor<?x4xf32>) {eps = 1.0e-05 : f64} : tensor<?x3xf32>, tensor<3xf32>
  return
}

// -----

// channels_last: the channels are the last dimension of a 4-D input.
func.func @channels_last_channels(%x: tensor<?x8x8x3xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{per-channel operands must be 'tensor<3xf32>' for an input [B, 8, 8, 3], got 'tensor<8xf32>'}}
  %y, %m, %v = dtc.batch_norm %x, %w, %w, %w, %w {channels_last, eps = 1.0e-05 : f64} : tensor<?x8x8x3xf32>, tensor<8xf32>
  return
}

// -----

func.func @channels_last_rank(%x: tensor<?x3xf32>, %w: tensor<3xf32>) {
  // expected-error @+1 {{batch_norm: channels last needs an input [N, H, W, C], got [B, 3]}}
  %y, %m, %v = dtc.batch_norm %x, %w, %w, %w, %w {channels_last, eps = 1.0e-05 : f64} : tensor<?x3xf32>, tensor<3xf32>
  return
}

// -----

// Without a fused pooling, dy is of the input's type.
func.func @dy_type(%x: tensor<?x3x4x4xf32>, %dy: tensor<?x3x2x2xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_grad' op dy must be of the input's type 'tensor<?x3x4x4xf32>', got 'tensor<?x3x2x2xf32>'}}
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %c, %c, %c relu(%x : tensor<?x3x4x4xf32>) {eps = 1.0e-05 : f64} : tensor<?x3x4x4xf32>, tensor<3xf32>, dy tensor<?x3x2x2xf32>
  return
}

// -----

// A fused max-pool gradient (dtc-fuse-max-pool-grad): dy is the pooling's
// result type, the window whole, the ReLU's result given, NCHW.
func.func @pooled_dy(%x: tensor<?x3x4x4xf32>, %dy: tensor<?x3x3x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_grad' op dy: the pooling gives [B, 3, 2, 2], not [B, 3, 3, 3]}}
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %c, %c, %c relu(%x : tensor<?x3x4x4xf32>) {eps = 1.0e-05 : f64, pool_kernel = array<i64: 2, 2>, pool_stride = array<i64: 2, 2>, pool_padding = array<i64: 0, 0>} : tensor<?x3x4x4xf32>, tensor<3xf32>, dy tensor<?x3x3x3xf32>
  return
}

// -----

func.func @pooled_partial(%x: tensor<?x3x4x4xf32>, %dy: tensor<?x3x2x2xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_grad' op pool_kernel, pool_stride and pool_padding go together, 2 values (H, W) each}}
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %c, %c, %c relu(%x : tensor<?x3x4x4xf32>) {eps = 1.0e-05 : f64, pool_kernel = array<i64: 2, 2>, pool_stride = array<i64: 2, 2>} : tensor<?x3x4x4xf32>, tensor<3xf32>, dy tensor<?x3x2x2xf32>
  return
}

// -----

func.func @pooled_no_relu(%x: tensor<?x3x4x4xf32>, %dy: tensor<?x3x2x2xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_grad' op a fused max-pool gradient needs relu_result, the pooling's input}}
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %c, %c, %c {eps = 1.0e-05 : f64, pool_kernel = array<i64: 2, 2>, pool_stride = array<i64: 2, 2>, pool_padding = array<i64: 0, 0>} : tensor<?x3x4x4xf32>, tensor<3xf32>, dy tensor<?x3x2x2xf32>
  return
}

// -----

func.func @pooled_channels_last(%x: tensor<?x4x4x3xf32>, %dy: tensor<?x2x2x3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_grad' op a fused max-pool gradient is NCHW or blocked, not channels last}}
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %c, %c, %c relu(%x : tensor<?x4x4x3xf32>) {channels_last, eps = 1.0e-05 : f64, pool_kernel = array<i64: 2, 2>, pool_stride = array<i64: 2, 2>, pool_padding = array<i64: 0, 0>} : tensor<?x4x4x3xf32>, tensor<3xf32>, dy tensor<?x2x2x3xf32>
  return
}

// -----

// Blocked (dtc-blocked-layout): [N, C / 16, H, W, 16], its channels C.
func.func @blocked_channels(%x: tensor<?x2x4x4x16xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{per-channel operands must be 'tensor<32xf32>' for an input [B, 2, 4, 4, 16], got 'tensor<16xf32>'}}
  %y, %m, %v = dtc.batch_norm %x, %c, %c, %c, %c {eps = 1.0e-05 : f64} : tensor<?x2x4x4x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @blocked_not_16(%x: tensor<?x2x4x4x8xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{batch_norm: a blocked input must be [N, C / 16, H, W, 16], got [B, 2, 4, 4, 8]}}
  %y, %m, %v = dtc.batch_norm %x, %c, %c, %c, %c {eps = 1.0e-05 : f64} : tensor<?x2x4x4x8xf32>, tensor<16xf32>
  return
}

// -----

// Blocked: dy blocked too.
func.func @pooled_blocked(%x: tensor<?x1x4x4x16xf32>, %dy: tensor<?x16x2x2xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{'dtc.batch_norm_grad' op dy: the pooling gives [B, 16, 2, 2] (blocked), not [B, 16, 2, 2]}}
  %dx, %dw, %db = dtc.batch_norm_grad %x, %dy, %c, %c, %c relu(%x : tensor<?x1x4x4x16xf32>) {eps = 1.0e-05 : f64, pool_kernel = array<i64: 2, 2>, pool_stride = array<i64: 2, 2>, pool_padding = array<i64: 0, 0>} : tensor<?x1x4x4x16xf32>, tensor<16xf32>, dy tensor<?x16x2x2xf32>
  return
}
