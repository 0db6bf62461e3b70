# RUN: dtc %s --emit=mlir | FileCheck %s
# RUN: dtc %s --emit=mlir-opt | FileCheck %s --check-prefix=OPT
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# RUN: sed 's/accumulate = 4/accumulate = 0/' %s > %t.dsl && not dtc %t.dsl -o %t.train 2>&1 | FileCheck %s --check-prefix=ERR
# The recipe's accumulate = K: a module attribute; dtc-accumulate-gradients
# adds @accumulate_step, dtc-plan-memory places each parameter's accumulator
# after the optimizer state, and the program's spec has both steps.
input x: f32[B, 4]
label y: i32[B]
fc = linear(x, 3)
loss = cross_entropy(fc, y)
train {
  optimizer = sgd(lr=0.1)
  accumulate = 4
}
# CHECK: dtc.accumulate = 4 : i64
# OPT: dtc.persistent = #dtc.persistent<param_bytes = 128, bytes = 256>
# OPT-LABEL: func.func @train_step
# OPT: dtc.take_accumulated @fc.bias, %{{.*}} {dtc.offsets = array<i64: 128>, dtc.placement = #dtc.placement<offset = 192>} : tensor<3xf32>
# OPT: dtc.take_accumulated @fc.weight, %{{.*}} {dtc.offsets = array<i64: 144>, dtc.placement = #dtc.placement<offset = 128>} : tensor<3x4xf32>
# OPT-NEXT: dtc.all_reduce_start
# OPT-LABEL: func.func @accumulate_step
# OPT-NOT: dtc.all_reduce
# OPT: dtc.accumulate_gradient @fc.weight, %{{.*}} {dtc.placement = #dtc.placement<offset = 128>} : tensor<3x4xf32>
# OPT-NEXT: dtc.accumulate_gradient @fc.bias, %{{.*}} {dtc.placement = #dtc.placement<offset = 192>} : tensor<3xf32>
# OPT-NOT: dtc.all_reduce
# OPT-LABEL: func.func @grad_step
# CPP: static void accumulateStep(const dtc::rt::StepArgs &a)
# CPP: dtc::kern::accumulate(
# CPP: s.accumulateStep = accumulateStep;
# CPP: s.recipe.accumulate = 4;
# ERR: accumulate.dsl.tmp.dsl:14:16: error: expected an integer from 1 to 2^40 for the micro-batches per optimizer step
