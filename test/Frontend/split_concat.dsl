# RUN: dtc %s --emit=mlir | FileCheck %s --enable-var-scope
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=CUDA
# q, k, v = split(x, 3, axis=-1) (torch.chunk; one name per piece) and
# concat([...], axis) (torch.cat; the last axis by default), each lowered to
# one row copy per piece between the whole [rows, n, inner] and the piece.
input x: f32[B, 4, 6]
label y: i32[B]
qkv = linear(x, 12)
q, k, v = split(qkv, 3, axis=-1)
h = concat([v, q * k])
fc = linear(flatten(h), 3)
loss = cross_entropy(fc, y)
# CHECK: %[[QKV:.*]] = dtc.add
# CHECK: %[[S:.*]]:3 = dtc.split %[[QKV]] {axis = 2 : i64} : tensor<?x4x12xf32> -> tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32>
# CHECK: %[[QK:.*]] = dtc.mul %[[S]]#0, %[[S]]#1
# CHECK: dtc.concat %[[S]]#2, %[[QK]] {axis = 2 : i64} : tensor<?x4x4xf32>, tensor<?x4x4xf32> -> tensor<?x4x8xf32>
# CPP-LABEL: trainStep
# CPP: dtc::kern::copyRows(c, ([[W:v[0-9]+]] + 0), 12, {{v[0-9]+}}, 4, B*4, 4);
# CPP: dtc::kern::copyRows(c, ([[W]] + 4), 12, {{v[0-9]+}}, 4, B*4, 4);
# CPP: dtc::kern::copyRows(c, ([[W]] + 8), 12, {{v[0-9]+}}, 4, B*4, 4);
# CPP: dtc::kern::copyRows(c, {{v[0-9]+}}, 4, ([[H:v[0-9]+]] + 0), 8, B*4, 4);
# CPP: dtc::kern::copyRows(c, {{v[0-9]+}}, 4, ([[H]] + 4), 8, B*4, 4);
# CUDA: dtc::cuda::copyRows(c,
