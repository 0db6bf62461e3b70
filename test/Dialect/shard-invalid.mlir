// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// The sharded collectives' verifiers (dtc-shard-weight-update makes them).

func.func @wait_for_another_bucket(%g: tensor<8xf32>) {
  %r, %s = dtc.reduce_scatter_start(%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
  // expected-error @+1 {{must wait for the same gradients, shard and bucket as its start}}
  %t = dtc.reduce_scatter_wait %r, %s, (%g) {bucket = 1 : i64} : tensor<8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @shard_read_in_flight(%g: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{shard is written until the wait: only dtc.reduce_scatter_wait may read it, not 'func.return'}}
  %r, %s = dtc.reduce_scatter_start(%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
  %t = dtc.reduce_scatter_wait %r, %s, (%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

func.func @gradient_read_elsewhere(%g: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{reduces its operands in place, but one is also used by 'func.return'}}
  %r, %s = dtc.reduce_scatter_start(%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
  %t = dtc.reduce_scatter_wait %r, %s, (%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
  return %g : tensor<8xf32>
}

// -----

module {
  dtc.param @w : tensor<8xf32>
  func.func @update_of_another_bucket(%g: tensor<8xf32>) {
    %r, %s = dtc.reduce_scatter_start(%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
    %t = dtc.reduce_scatter_wait %r, %s, (%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
    // expected-error @+1 {{shard must come from the dtc.reduce_scatter_wait of bucket 1}}
    dtc.shard_update [@w](%t) {bucket = 1 : i64} : tensor<4xf32>
    return
  }
}

// -----

module {
  dtc.param @w : tensor<8xf32>
  dtc.param @b : tensor<8xf32>
  func.func @update_of_other_parameters(%g: tensor<8xf32>) {
    %r, %s = dtc.reduce_scatter_start(%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
    %t = dtc.reduce_scatter_wait %r, %s, (%g) {bucket = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
    // expected-error @+1 {{updates 2 parameters of a bucket of 1 gradients}}
    dtc.shard_update [@w, @b](%t) {bucket = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

func.func @gather_of_another_bucket() {
  %r = dtc.all_gather_start [@w] {bucket = 0 : i64}
  // expected-error @+1 {{request must come from the dtc.all_gather_start of bucket 2}}
  dtc.all_gather_wait %r {bucket = 2 : i64}
  return
}

// -----

func.func @carried_gather_waited_for_in_its_step() {
  // expected-error @+1 {{a carried all-gather is waited for by a later step (dtc.all_gather_wait without a request), not by its own}}
  %r = dtc.all_gather_start [@w] {bucket = 0 : i64, carried}
  dtc.all_gather_wait %r {bucket = 0 : i64}
  return
}

// -----

// expected-error @+1 {{#dtc.bucket_plan: a shard of 5 floats does not divide the bucket's 12}}
func.func @plan() attributes {p = #dtc.bucket_plan<offset = 0, count = 12, shard = 5>} {
  return
}
