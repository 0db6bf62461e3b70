# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
fc = linear(x, 3)
loss = cross_entropy(fc, y)
train {
  data = synthetic(train=8)
  dataset = csv("a.csv")
  batch = 8
  batch_size = 32
}
# CHECK: duplicate-setting.dsl:8:3: error: 'data' is set twice in the train block
# CHECK: duplicate-setting.dsl:10:3: error: 'batch' is set twice in the train block
