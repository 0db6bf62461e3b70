// RUN: dtc-opt %s -split-input-file -verify-diagnostics --dtc-lower-to-runtime
// The lowering takes only IR that keeps the backend contract.

// expected-error @+3 {{backend contract: the module has no @train_step}}
// expected-error @+2 {{backend contract: the module has no @grad_step}}
// expected-error @+1 {{backend contract: the module has no @eval_step}}
module attributes {dtc.optimizer = #dtc.optimizer<sgd, lr = 0.1, weight_decay = 0.0>,
                   dtc.recipe = #dtc.recipe<>,
                   dtc.persistent = #dtc.persistent<param_bytes = 0, bytes = 0>} {
}
