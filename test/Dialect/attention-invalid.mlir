// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// The verifiers of attention: q, k, v's shapes, the causal mask's, the
// results', the scale.

func.func @features(%q: tensor<?x6x4xf32>, %k: tensor<?x6x5xf32>) {
  // expected-error @+1 {{attention's q and k need the same feature size D, got [B, 6, 4] and [B, 6, 5]}}
  %o, %l = dtc.attention %q, %k, %k {scale = 0.5 : f64} : tensor<?x6x4xf32>, tensor<?x6x5xf32>, tensor<?x6x5xf32> -> tensor<?x6x5xf32>, tensor<?x6xf32>
  return
}

// -----

func.func @keys(%q: tensor<?x6x4xf32>, %k: tensor<?x7x4xf32>, %v: tensor<?x6x4xf32>) {
  // expected-error @+1 {{attention's k and v need the same number of keys Tk, got [B, 7, 4] and [B, 6, 4]}}
  %o, %l = dtc.attention %q, %k, %v {scale = 0.5 : f64} : tensor<?x6x4xf32>, tensor<?x7x4xf32>, tensor<?x6x4xf32> -> tensor<?x6x4xf32>, tensor<?x6xf32>
  return
}

// -----

func.func @causal(%q: tensor<?x6x4xf32>, %k: tensor<?x7x4xf32>) {
  // expected-error @+1 {{a causal mask needs square scores (as many queries as keys), got 6 queries and 7 keys}}
  %o, %l = dtc.attention %q, %k, %k {causal, scale = 0.5 : f64} : tensor<?x6x4xf32>, tensor<?x7x4xf32>, tensor<?x7x4xf32> -> tensor<?x6x4xf32>, tensor<?x6xf32>
  return
}

// -----

func.func @leading(%q: tensor<?x2x6x4xf32>, %k: tensor<?x3x6x4xf32>) {
  // expected-error @+1 {{attention's q, k and v need the same leading (batch and head) dimensions}}
  %o, %l = dtc.attention %q, %k, %k {scale = 0.5 : f64} : tensor<?x2x6x4xf32>, tensor<?x3x6x4xf32>, tensor<?x3x6x4xf32> -> tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
  return
}

// -----

func.func @result(%q: tensor<?x6x4xf32>) {
  // expected-error @+1 {{result and lse must be 'tensor<?x6x4xf32>' and 'tensor<?x6xf32>', got 'tensor<?x6x4xf32>' and 'tensor<?x4xf32>'}}
  %o, %l = dtc.attention %q, %q, %q {scale = 0.5 : f64} : tensor<?x6x4xf32>, tensor<?x6x4xf32>, tensor<?x6x4xf32> -> tensor<?x6x4xf32>, tensor<?x4xf32>
  return
}

// -----

func.func @scale(%q: tensor<?x6x4xf32>) {
  // expected-error @+1 {{scale must be finite and > 0, got 0}}
  %o, %l = dtc.attention %q, %q, %q {scale = 0.0 : f64} : tensor<?x6x4xf32>, tensor<?x6x4xf32>, tensor<?x6x4xf32> -> tensor<?x6x4xf32>, tensor<?x6xf32>
  return
}

// -----

// tokens_first: q, k, v [B, T, H, D], the result too, lse [B, H, T].
func.func @tokens_first_rank(%q: tensor<6x4xf32>) {
  // expected-error @+1 {{tokens_first needs q, k, v and the result of rank 3 or more ([..., T, H, D]), got 'tensor<6x4xf32>'}}
  %o, %l = dtc.attention %q, %q, %q {scale = 0.5 : f64, tokens_first} : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32> -> tensor<6x4xf32>, tensor<6xf32>
  return
}

// -----

func.func @tokens_first_result(%q: tensor<?x6x2x4xf32>) {
  // expected-error @+1 {{result and lse must be 'tensor<?x6x2x4xf32>' and 'tensor<?x2x6xf32>', got 'tensor<?x2x6x4xf32>' and 'tensor<?x2x6xf32>'}}
  %o, %l = dtc.attention %q, %q, %q {scale = 0.5 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x6x2x4xf32> -> tensor<?x2x6x4xf32>, tensor<?x2x6xf32>
  return
}

// -----

func.func @tokens_first_keys(%q: tensor<?x6x2x4xf32>, %k: tensor<?x7x2x4xf32>) {
  // expected-error @+1 {{a causal mask needs square scores (as many queries as keys), got 6 queries and 7 keys}}
  %o, %l = dtc.attention %q, %k, %k {causal, scale = 0.5 : f64, tokens_first} : tensor<?x6x2x4xf32>, tensor<?x7x2x4xf32>, tensor<?x7x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  return
}

// -----

func.func @packed_not_three(%qkv: tensor<?x6x2x2x4xf32>) {
  // expected-error @+1 {{qkv must be [..., T, 3, H, D] (q, k and v packed), got 'tensor<?x6x2x2x4xf32>'}}
  %o, %l = dtc.attention_qkvpacked %qkv {scale = 0.5 : f64} : tensor<?x6x2x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  return
}

// -----

func.func @packed_result(%qkv: tensor<?x6x3x2x4xf32>) {
  // expected-error @+1 {{result and lse must be 'tensor<?x6x2x4xf32>' and 'tensor<?x2x6xf32>', got 'tensor<?x6x2x4xf32>' and 'tensor<?x6x2xf32>'}}
  %o, %l = dtc.attention_qkvpacked %qkv {scale = 0.5 : f64} : tensor<?x6x3x2x4xf32> -> tensor<?x6x2x4xf32>, tensor<?x6x2xf32>
  return
}

// -----

func.func @packed_grad_scale(%qkv: tensor<?x6x3x2x4xf32>, %o: tensor<?x6x2x4xf32>, %l: tensor<?x2x6xf32>) {
  // expected-error @+1 {{scale must be finite and > 0, got 0}}
  %d = dtc.attention_qkvpacked_grad %qkv, %o, %l, %o {scale = 0.0 : f64} : tensor<?x6x3x2x4xf32>, tensor<?x6x2x4xf32>, tensor<?x2x6xf32>
  return
}
