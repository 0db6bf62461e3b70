# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# split's and concat's bad arguments and uses: located errors.
input x: f32[B, 4, 6]
label y: i32[B]
a, b = split(x, 3)
# CHECK: split.dsl:5:17: error: split() into 3 pieces gives 3 values, but 2 names are assigned
c, d = split(x, 2, axis=1)
e, f, g, h = split(x, 4)
# CHECK: split.dsl:8:23: error: split() cannot cut dimension 2 of [B, 4, 6] (6) into 4 equal pieces
i, j = split(x, 2, axis=0)
# CHECK: split.dsl:10:8: error: split() cannot cut the batch dimension B
s = split(x, 2)
# CHECK: split.dsl:12:5: error: split() gives several values: assign one name to each, as in 'q, k, v = split(x, 3, axis=-1)'
m, n = x * 2
# CHECK: split.dsl:14:10: error: only split() gives several values; assign this to one name
o = concat(x)
# CHECK: split.dsl:16:12: error: expected a list of tensors such as [a, b]
k = concat([c, x], axis=2)
# CHECK: split.dsl:18:5: error: tensors joined along axis 2 must have the same shape elsewhere, got [B, 2, 6] and [B, 4, 6]
loss = cross_entropy(flatten(c), y)
