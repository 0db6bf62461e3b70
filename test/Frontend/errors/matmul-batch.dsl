# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# Leading dimensions that do not broadcast, a dimension out of range, the
# batch moved by permute, and a permute without its list: located errors.
input x: f32[B, 4, 6]
label y: i32[B]
param a: f32[3, 6, 2]
m = x @ a
# CHECK: matmul-batch.dsl:7:7: error: matmul leading (batch) dimensions [B] and [3] do not broadcast: [B, 4, 6] @ [3, 6, 2]
t = transpose(x, 1, 3)
# CHECK: matmul-batch.dsl:9:21: error: expected a dimension from -3 to 2 of a rank-3 tensor
p = permute(x, [1, 0, 2])
# CHECK: matmul-batch.dsl:11:5: error: permute cannot move the batch dimension away from the first position
r = permute(x, 1)
# CHECK: matmul-batch.dsl:13:16: error: expected a permutation such as [0, 2, 1, 3]
loss = cross_entropy(flatten(x), y)
