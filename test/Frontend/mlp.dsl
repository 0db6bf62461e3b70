# RUN: dtc %s --emit=mlir | FileCheck %s --enable-var-scope
# The DSL's layer sugar, operators and recipe as dtc IR.
model tiny
input x: f32[N, 8]
label y: i32[N]
param scale: f32[4] = constant(0.5)
fc1 = dense(x, 16, act=gelu)
fc2 = linear(fc1, 4, bias=false)
logits = log_softmax(fc2 * scale - 1, axis=1)
loss = mean(neg(sum(logits, axis=1)))
metric accuracy = accuracy(fc2, y)
train {
  data = synthetic(train=100, test=20)
  batch = 10
  epochs = 3
  optimizer = adamw(lr=0.002, weight_decay=0.05)
  seed = 7
}
# CHECK: module attributes {dtc.model = "tiny", dtc.model_digest = {{-?[0-9]+}} : i64, dtc.optimizer = #dtc.optimizer<adamw, lr = 0.002, weight_decay = 0.05>, dtc.recipe = #dtc.recipe<data = synthetic, train_size = 100, test_size = 20, batch = 10, epochs = 3, seed = 7>
# CHECK-DAG: dtc.param @scale : tensor<4xf32> {a = 5.000000e-01 : f64, init = #dtc.init<constant>}
# CHECK-DAG: dtc.param @fc1.weight : tensor<16x8xf32> {a = -0.35355339059327373 : f64, b = 0.35355339059327373 : f64, init = #dtc.init<uniform>}
# CHECK-DAG: dtc.param @fc1.bias : tensor<16xf32>
# CHECK-DAG: dtc.param @fc2.weight : tensor<4x16xf32>
# CHECK-NOT: dtc.param @fc2.bias
# CHECK-LABEL: func.func @forward(%{{.*}}: tensor<?x8xf32> {dtc.name = "x"}, %{{.*}}: tensor<?xi32> {dtc.name = "y"}) -> (tensor<f32>, tensor<f32>) attributes {dtc.outputs = ["loss", "accuracy"]}
# CHECK: %[[H:.*]] = dtc.matmul %arg0, %{{.*}} {transpose_rhs = true} : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
# CHECK: %[[HB:.*]] = dtc.add %[[H]], %{{.*}} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
# CHECK: %[[G:.*]] = dtc.gelu %[[HB]]
# CHECK: %[[O:.*]] = dtc.matmul %[[G]], %{{.*}} {transpose_rhs = true} : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
# CHECK: %[[S:.*]] = dtc.mul %[[O]], %{{.*}} : tensor<?x4xf32>, tensor<4xf32> -> tensor<?x4xf32>
# CHECK: %[[C:.*]] = dtc.constant {value = 1.000000e+00 : f32} : tensor<f32>
# CHECK: %[[D:.*]] = dtc.sub %[[S]], %[[C]]
# CHECK: %[[LS:.*]] = dtc.log_softmax %[[D]] {axis = 1 : i64}
# CHECK: %[[R:.*]] = dtc.reduce_sum %[[LS]] {axis = 1 : i64} : tensor<?x4xf32> -> tensor<?xf32>
# CHECK: %[[N:.*]] = dtc.neg %[[R]]
# CHECK: %[[M:.*]] = dtc.reduce_mean %[[N]] {axis = 0 : i64} : tensor<?xf32> -> tensor<f32>
# CHECK: %[[A:.*]] = dtc.accuracy %[[O]], %arg1
# CHECK: return %[[M]], %[[A]]
