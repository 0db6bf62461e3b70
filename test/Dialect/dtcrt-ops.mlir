// RUN: dtc-opt %s | dtc-opt | FileCheck %s
// The runtime-call dialect round-trips: buffers, sizes, constants, arrays,
// update items, kernel calls, elementwise kernels, collectives, traces.

// CHECK-LABEL: func.func @step
func.func @step() {
  // CHECK: %[[X:.*]] = dtcrt.step_arg input : !dtcrt.ptr<f32>
  %x = dtcrt.step_arg input : !dtcrt.ptr<f32>
  // CHECK: dtcrt.step_arg class_labels : !dtcrt.ptr<i32>
  %y = dtcrt.step_arg class_labels : !dtcrt.ptr<i32>
  // CHECK: %[[W:.*]] = dtcrt.buffer persistent[64] : !dtcrt.ptr<f32>
  %w = dtcrt.buffer persistent[64] : !dtcrt.ptr<f32>
  // CHECK: dtcrt.buffer per_sample[16] : !dtcrt.ptr<f32>
  %h = dtcrt.buffer per_sample[16] : !dtcrt.ptr<f32>
  // CHECK: dtcrt.size 4 batched
  %n = dtcrt.size 4 batched
  %k = dtcrt.size 4
  %t = dtcrt.constant true
  %f = dtcrt.constant false
  %one = dtcrt.constant 1.0 : f32
  %zero = dtcrt.constant 0.0 : f32
  // CHECK: dtcrt.gemm(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[X]], %[[W]], %{{.*}}, %{{.*}}) : i1, i1, i64, i64, i64, f32, !dtcrt.ptr<f32>, !dtcrt.ptr<f32>, f32, !dtcrt.ptr<f32>
  dtcrt.gemm(%f, %t, %n, %k, %k, %one, %x, %w, %zero, %h) : i1, i1, i64, i64, i64, f32, !dtcrt.ptr<f32>, !dtcrt.ptr<f32>, f32, !dtcrt.ptr<f32>
  // CHECK: dtcrt.array [-1, 4] : !dtcrt.array<i64>
  %s = dtcrt.array [-1, 4] : !dtcrt.array<i64>
  // CHECK: dtcrt.elementwise ins(%{{.*}} : !dtcrt.ptr<f32>) outs(%{{.*}} : !dtcrt.ptr<f32>) count %{{.*}} attributes {label = "relu", shape = array<i64: -1, 4>, strides = [array<i64>]}
  dtcrt.elementwise ins(%h : !dtcrt.ptr<f32>) outs(%h : !dtcrt.ptr<f32>) count %n attributes {label = "relu", shape = array<i64: -1, 4>, strides = [array<i64>]} {
  ^bb0(%a: tensor<?x4xf32>):
    %r = dtc.relu %a : tensor<?x4xf32>
    dtc.yield %r : tensor<?x4xf32>
  }
  %g = dtcrt.buffer fixed[0] : !dtcrt.ptr<f32>
  %c16 = dtcrt.constant 16 : i64
  // CHECK: %[[R:.*]] = dtcrt.allreduce_start %{{.*}}, %{{.*}} bucket 0 : <f32>
  %req = dtcrt.allreduce_start %g, %c16 bucket 0 : !dtcrt.ptr<f32>
  // CHECK: dtcrt.wait %[[R]]
  dtcrt.wait %req
  // CHECK: dtcrt.update_items weights(%[[W]] : !dtcrt.ptr<f32>) grads(%{{.*}} : !dtcrt.ptr<f32>) states(%{{.*}} : !dtcrt.ptr<f32>) sizes(%{{.*}}) {states_per_item = 1 : i64}
  %items = dtcrt.update_items weights(%w : !dtcrt.ptr<f32>) grads(%g : !dtcrt.ptr<f32>) states(%h : !dtcrt.ptr<f32>) sizes(%k) {states_per_item = 1 : i64}
  %count = dtcrt.constant 1 : i32
  %hyper = dtcrt.hyper
  // CHECK: dtcrt.trace_begin "update w"
  dtcrt.trace_begin "update w"
  // CHECK: %[[N:.*]] = dtcrt.null
  %none = dtcrt.null : !dtcrt.ptr<f32>
  // CHECK: dtcrt.sgd_update(%{{.*}}, %{{.*}}, %{{.*}}, %[[N]]) : !dtcrt.items, i32, !dtcrt.hyper, !dtcrt.ptr<f32>
  dtcrt.sgd_update(%items, %count, %hyper, %none) : !dtcrt.items, i32, !dtcrt.hyper, !dtcrt.ptr<f32>
  dtcrt.trace_end
  return
}
