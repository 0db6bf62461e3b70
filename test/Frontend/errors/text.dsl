# RUN: not dtc %s -o %t.train 2>&1 | FileCheck %s
# RUN: not dtc %S/Inputs/text-f32.dsl -o %t.train 2>&1 | FileCheck %s --check-prefix=F32
# RUN: not dtc %S/Inputs/ids-rank.dsl -o %t.train 2>&1 | FileCheck %s --check-prefix=RANK
# text() data and token ids: located errors.
input ids: i32[B, 6]
label y: i32[B, 6]
e = embedding(ids, 256, 4)
l = linear(e, 256)
loss = cross_entropy(l, y)
train {
  data = text("/usr/share/games/fortunes", block=8)
}
# CHECK: text.dsl:11:50: error: block 8 must be the input's length T = 6 ([B, 6])
# F32: text-f32.dsl:5:10: error: text() data feeds token ids: the model's input must be i32[B, T], got [B, 6]
# RANK: ids-rank.dsl:1:12: error: token ids are i32[B, T]: a sequence of T per sample
