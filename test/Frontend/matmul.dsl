# RUN: dtc %s --emit=mlir | FileCheck %s --enable-var-scope
# torch.matmul over leading dimensions as the frontend builds it: a 2-D
# rhs applied to every row (nn.Linear on a 3-D input: one matmul, no
# reshape), operands of rank 3 and more broadcast to the same leading
# dimensions (a 2-D lhs by broadcast_to), 1-D operands as a row or a column
# whose added dimension is dropped; transpose(x, dim0, dim1) and permute.
input x: f32[B, 4, 6]
label y: i32[B]
param v: f32[3, 5]
param u: f32[4]
l1 = linear(x, 5)
s = l1 @ transpose(l1, 1, 2)
q = permute(l1, [0, 2, 1])
m = v @ q
z = q @ u
k = transpose(m, -1, -2)
fc = linear(flatten(k), 3)
fz = linear(z, 3)
loss = cross_entropy(fc + fz, y)
metric t = mean(sum(s, axis=1))
# CHECK: %[[V:.*]] = dtc.param_ref @v : tensor<3x5xf32>
# CHECK: %[[U:.*]] = dtc.param_ref @u : tensor<4xf32>
# CHECK: %[[W:.*]] = dtc.param_ref @l1.weight : tensor<5x6xf32>
# CHECK: %[[XW:.*]] = dtc.matmul %arg0, %[[W]] {transpose_rhs = true} : tensor<?x4x6xf32>, tensor<5x6xf32> -> tensor<?x4x5xf32>
# CHECK: %[[L1:.*]] = dtc.add %[[XW]], %{{.*}} : tensor<?x4x5xf32>, tensor<5xf32> -> tensor<?x4x5xf32>
# CHECK: %[[T:.*]] = dtc.transpose %[[L1]] {perm = array<i64: 0, 2, 1>} : tensor<?x4x5xf32> -> tensor<?x5x4xf32>
# CHECK: %[[S:.*]] = dtc.matmul %[[L1]], %[[T]] : tensor<?x4x5xf32>, tensor<?x5x4xf32> -> tensor<?x4x4xf32>
# CHECK: %[[Q:.*]] = dtc.transpose %[[L1]] {perm = array<i64: 0, 2, 1>}
# CHECK: %[[VB:.*]] = dtc.broadcast_to %[[V]] : tensor<3x5xf32> -> tensor<?x3x5xf32>
# CHECK: %[[M:.*]] = dtc.matmul %[[VB]], %[[Q]] : tensor<?x3x5xf32>, tensor<?x5x4xf32> -> tensor<?x3x4xf32>
# CHECK: %[[UC:.*]] = dtc.reshape %[[U]] : tensor<4xf32> -> tensor<4x1xf32>
# CHECK: %[[QU:.*]] = dtc.matmul %[[Q]], %[[UC]] : tensor<?x5x4xf32>, tensor<4x1xf32> -> tensor<?x5x1xf32>
# CHECK: dtc.reshape %[[QU]] : tensor<?x5x1xf32> -> tensor<?x5xf32>
# CHECK: dtc.transpose %[[M]] {perm = array<i64: 0, 2, 1>} : tensor<?x3x4xf32> -> tensor<?x4x3xf32>
