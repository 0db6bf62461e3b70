# The recipe's shard and ranks become the module's dtc.shard; dtc --shard
# and --ranks override them.
# RUN: dtc %s --emit=mlir | FileCheck %s
# RUN: dtc %s --emit=mlir --shard=2 | FileCheck %s --check-prefix=OVERRIDE
# RUN: dtc %s --emit=mlir --shard=none --ranks 8 | FileCheck %s --check-prefix=NONE
# RUN: not dtc %s --emit=mlir --shard=zero3 2>&1 | FileCheck %s --check-prefix=BADFLAG
# RUN: not dtc %s --emit=mlir --ranks 0 2>&1 | FileCheck %s --check-prefix=BADRANKS
# RUN: sed 's/shard = optimizer/shard = zero3/; s/ranks = 4/ranks = 0/' %s > %t.bad.dsl && not dtc %t.bad.dsl --emit=mlir 2>&1 | FileCheck %s --check-prefix=BADRECIPE
# RUN: sed '/ranks = 4/d' %s > %t.noranks.dsl && not dtc %t.noranks.dsl --emit=mlir-opt 2>&1 | FileCheck %s --check-prefix=NORANKS
# CHECK: dtc.shard = #dtc.shard<optimizer, ranks = 4>
# OVERRIDE: dtc.shard = #dtc.shard<gradients, ranks = 4>
# NONE: dtc.shard = #dtc.shard<none, ranks = 8>
# BADFLAG: unknown --shard 'zero3' (expected none, optimizer, gradients, parameters, 0 to 3, or auto)
# BADRANKS: --ranks must be >= 1
# BADRECIPE: :{{[0-9]+}}:11: error: shard is none, optimizer, gradients or parameters (or the stage, 0 to 3)
# BADRECIPE: :{{[0-9]+}}:11: error: expected an integer from 1 to 2^40 for the ranks the shards are planned for
# NORANKS: error: sharding (optimizer) plans the shards for a world size: give it with dtc --ranks N or the recipe's ranks = N
input x: f32[B, 4]
label y: i32[B]
h = linear(x, 3)
loss = cross_entropy(h, y)
train {
  optimizer = adamw(lr=0.001)
  shard = optimizer
  ranks = 4
}
