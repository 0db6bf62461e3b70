// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// The runtime calls' arguments are checked: the ABI in ODS, and the verifiers.

func.func @labels() {
  // expected-error @+1 {{class labels and input ids are i32, every other step argument f32}}
  %y = dtcrt.step_arg class_labels : !dtcrt.ptr<f32>
  return
}

// -----

func.func @items(%w: !dtcrt.ptr<f32>, %n: i64) {
  // expected-error @+1 {{needs 2 state buffers per weight}}
  %items = dtcrt.update_items weights(%w : !dtcrt.ptr<f32>) grads(%w : !dtcrt.ptr<f32>) states(%w : !dtcrt.ptr<f32>) sizes(%n) {states_per_item = 2 : i64}
  return
}

// -----

func.func @gemm(%p: !dtcrt.ptr<f32>, %l: !dtcrt.ptr<i32>, %n: i64, %f: f32, %b: i1) {
  // expected-error @+1 {{operand #6 must be pointer to f32}}
  dtcrt.gemm(%b, %b, %n, %n, %n, %f, %l, %p, %f, %p) : i1, i1, i64, i64, i64, f32, !dtcrt.ptr<i32>, !dtcrt.ptr<f32>, f32, !dtcrt.ptr<f32>
  return
}

// -----

func.func @kernel(%p: !dtcrt.ptr<f32>, %n: i64) {
  // expected-error @+1 {{each input's strides are empty (read at the linear index) or one per dimension of the shape}}
  dtcrt.elementwise ins(%p : !dtcrt.ptr<f32>) outs(%p : !dtcrt.ptr<f32>) count %n attributes {label = "neg", shape = array<i64: -1, 4>, strides = [array<i64: 1>]} {
  ^bb0(%a: tensor<?x4xf32>):
    %r = dtc.neg %a : tensor<?x4xf32>
    dtc.yield %r : tensor<?x4xf32>
  }
  return
}

// -----

func.func @constant() {
  // expected-error @+1 {{result #0 must be}}
  %c = dtcrt.constant 1.0 : f64
  return
}

// -----

// An output over an input read with broadcast strides (not at its own index).
func.func @kernel(%p: !dtcrt.ptr<f32>, %q: !dtcrt.ptr<f32>, %n: i64) {
  // expected-error @+1 {{'in_place' names, for each output, an input read at the linear index that no other output overwrites, or -1}}
  dtcrt.elementwise ins(%p, %q : !dtcrt.ptr<f32>, !dtcrt.ptr<f32>) outs(%p : !dtcrt.ptr<f32>) count %n attributes {in_place = array<i64: 1>, label = "add", shape = array<i64: -1, 4>, strides = [array<i64>, array<i64: 0, 1>]} {
  ^bb0(%a: tensor<?x4xf32>, %b: tensor<4xf32>):
    %r = dtc.add %a, %b : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
    dtc.yield %r : tensor<?x4xf32>
  }
  return
}

// -----

func.func @kernel(%p: !dtcrt.ptr<f32>, %n: i64) {
  // expected-error @+1 {{'in_place' needs one entry per output}}
  dtcrt.elementwise ins(%p : !dtcrt.ptr<f32>) outs(%p : !dtcrt.ptr<f32>) count %n attributes {in_place = array<i64: 0, -1>, label = "neg", shape = array<i64: -1, 4>, strides = [array<i64>]} {
  ^bb0(%a: tensor<?x4xf32>):
    %r = dtc.neg %a : tensor<?x4xf32>
    dtc.yield %r : tensor<?x4xf32>
  }
  return
}
