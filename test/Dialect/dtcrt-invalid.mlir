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

// -----

// The program's spec: a bucket names parameters of the spec.
module {
  // expected-error @+1 {{bucket 0 carries parameter 1 of 1}}
  dtcrt.spec <cpu> {
    name = "m", source = "m.dsl",
    input = #dtcrt.input<[2], numel = 2, type = F32, id_limit = 0>,
    labels = #dtcrt.labels<Class, numel = 1, classes = 3, ignore_index = -100>,
    buffers = [], outputs = ["loss"], predict_width = 0,
    recipe = #dtcrt.recipe<None, dir = "", train = "", test = "", train_size = 0, test_size = 0, batch = 8, epochs = 1, seed = 0, validation = 0.0 : f64, accumulate = 1>,
    hyper = #dtcrt.hyper<SGD, lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, nesterov = false>,
    params = [#dtcrt.param<"w", [3, 2], offset = 0, state_offset = 32, init = Zeros, a = 0.0 : f64, b = 0.0 : f64, fan_in = 2, fan_out = 3>], buckets = [#dtcrt.bucket<0, 6, [1]>], memory = #dtcrt.memory<persistent = 64, params = 32, buffers = 0, states = 0, per_sample = 0, fixed = 64>}
}

// -----

// The program's spec: the parameters lie inside the persistent block.
module {
  // expected-error @+1 {{the parameters and buffers (96 bytes) exceed the persistent block (64)}}
  dtcrt.spec <cpu> {
    name = "m", source = "m.dsl",
    input = #dtcrt.input<[2], numel = 2, type = F32, id_limit = 0>,
    labels = #dtcrt.labels<Class, numel = 1, classes = 3, ignore_index = -100>,
    buffers = [], outputs = ["loss"], predict_width = 0,
    recipe = #dtcrt.recipe<None, dir = "", train = "", test = "", train_size = 0, test_size = 0, batch = 8, epochs = 1, seed = 0, validation = 0.0 : f64, accumulate = 1>,
    hyper = #dtcrt.hyper<SGD, lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, nesterov = false>,
    params = [#dtcrt.param<"w", [3, 2], offset = 0, state_offset = 32, init = Zeros, a = 0.0 : f64, b = 0.0 : f64, fan_in = 2, fan_out = 3>], buckets = [], memory = #dtcrt.memory<persistent = 64, params = 96, buffers = 0, states = 0, per_sample = 0, fixed = 64>}
}

// -----

// The program's spec: the runtime's shapes have rank 6 at most.
module {
  // expected-error @+1 {{parameter 'w' has rank 7 (at most 6)}}
  dtcrt.spec <cpu> {
    name = "m", source = "m.dsl",
    input = #dtcrt.input<[2], numel = 2, type = F32, id_limit = 0>,
    labels = #dtcrt.labels<Class, numel = 1, classes = 3, ignore_index = -100>,
    buffers = [], outputs = ["loss"], predict_width = 0,
    recipe = #dtcrt.recipe<None, dir = "", train = "", test = "", train_size = 0, test_size = 0, batch = 8, epochs = 1, seed = 0, validation = 0.0 : f64, accumulate = 1>,
    hyper = #dtcrt.hyper<SGD, lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, nesterov = false>,
    params = [#dtcrt.param<"w", [1, 1, 1, 1, 1, 1, 1], offset = 0, state_offset = 32, init = Zeros, a = 0.0 : f64, b = 0.0 : f64, fan_in = 1, fan_out = 1>], buckets = [], memory = #dtcrt.memory<persistent = 64, params = 32, buffers = 0, states = 0, per_sample = 0, fixed = 64>}
}

// -----

// The spec stands in the module, nowhere else.
func.func @nested() {
  // expected-error @+1 {{expects parent op 'builtin.module'}}
  dtcrt.spec <cpu> {
    name = "m", source = "m.dsl",
    input = #dtcrt.input<[2], numel = 2, type = F32, id_limit = 0>,
    labels = #dtcrt.labels<Class, numel = 1, classes = 3, ignore_index = -100>,
    buffers = [], outputs = ["loss"], predict_width = 0,
    recipe = #dtcrt.recipe<None, dir = "", train = "", test = "", train_size = 0, test_size = 0, batch = 8, epochs = 1, seed = 0, validation = 0.0 : f64, accumulate = 1>,
    hyper = #dtcrt.hyper<SGD, lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, nesterov = false>,
    params = [], buckets = [], memory = #dtcrt.memory<persistent = 0, params = 0, buffers = 0, states = 0, per_sample = 0, fixed = 64>}
  return
}
