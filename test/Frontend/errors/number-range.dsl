# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
input x: f32[B, 4]
label y: i32[B]
param w: f32[4] = constant(1e999)
# CHECK: number-range.dsl:4:28: error: number 1e999 is out of range (f32 values are at most 3.4e38)
