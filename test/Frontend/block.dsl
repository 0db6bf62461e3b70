# RUN: dtc %s --emit=mlir | FileCheck %s
# Blocks: defined once, instantiated by assignment; every layer inside is
# named after the instance (h0.ln.weight, h0.ff.fc.weight for a block in a
# block), a dotted name inside reads the instance's own parameter, and the
# inputs are bound to the arguments. arange(n) gives the positions a
# position embedding reads. Each op an instance adds is marked with the
# innermost instance's path (dtc.block, which dtc-rematerialize reads).
input ids: i32[B, 5]
label y: i32[B, 5]

block ff(x) {
  fc = linear(x, 6, act=relu)
  proj = linear(fc, 4, bias=false)
  return x + proj
}

block layer(x, scale) {
  ln = layer_norm(x)
  ff = ff(ln * scale)
  return ff + ln.weight
}

wte = embedding(ids, 50, 4)
wpe = embedding(arange(5), 5, 4)
h0 = layer(wte + wpe, 2.0)
h1 = layer(h0, 0.5)
out = linear(h1, 50)
loss = cross_entropy(out, y)
# CHECK: dtc.param @wpe.weight : tensor<5x4xf32>
# CHECK: dtc.param @h0.ln.weight : tensor<4xf32>
# CHECK: dtc.param @h0.ln.bias : tensor<4xf32>
# CHECK: dtc.param @h0.ff.fc.weight : tensor<6x4xf32>
# CHECK: dtc.param @h0.ff.fc.bias : tensor<6xf32>
# CHECK: dtc.param @h0.ff.proj.weight : tensor<4x6xf32>
# CHECK-NOT: @h0.ff.proj.bias
# CHECK: dtc.param @h1.ln.weight
# CHECK: dtc.param @h1.ff.fc.weight
# CHECK: %[[POS:.*]] = dtc.arange : tensor<5xi32>
# CHECK: dtc.embedding %[[POS]], %{{.*}} : tensor<5xi32>, tensor<5x4xf32> -> tensor<5x4xf32>
# CHECK: dtc.param_ref @h0.ln.weight
# CHECK: %[[FC:.*]] = dtc.param_ref @h0.ff.fc.weight
# CHECK-NEXT: dtc.matmul %{{.*}}, %[[FC]] {dtc.block = "h0.ff", transpose_rhs = true}
# CHECK: %[[W0:.*]] = dtc.param_ref @h0.ln.weight
# CHECK: dtc.add %{{.*}}, %[[W0]] {dtc.block = "h0"} : tensor<?x5x4xf32>, tensor<4xf32>
# CHECK: dtc.param_ref @h1.ln.weight
