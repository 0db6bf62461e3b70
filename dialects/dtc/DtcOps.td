//===- DtcOps.td - Operations of the dtc dialect ------------*- tablegen -*-===//
#ifndef DTC_OPS_TD
#define DTC_OPS_TD

include "DtcDialect.td"
include "DtcAttrs.td"
include "DtcInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

include "mlir/IR/AttrTypeBase.td"

def Dtc_F32Tensor : RankedTensorOf<[F32]>;
// A 0-d f32 tensor, whose type the assembly need not spell (tensor<f32>).
def Dtc_F32Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

def Dtc_RequestType : TypeDef<Dtc_Dialect, "Request"> {
  let mnemonic = "request";
  let summary = "An all-reduce in flight";
  let description = [{
    Produced by `dtc.all_reduce_start`, consumed by `dtc.all_reduce_wait`:
    the communication of one gradient bucket between the two.
  }];
}
// i32 tensors: class labels (cross_entropy, accuracy) and token ids (embedding).
def Dtc_LabelTensor : RankedTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

def Dtc_ParamOp : Dtc_Op<"param", [Symbol]> {
  let summary = "A trainable parameter of the model";
  let description = [{
    Declares a parameter at module level: its name (the key it has in
    checkpoints), its type, and its initializer. `init` is one of `zeros`,
    `constant` (value `a`), `uniform` (in [`a`, `b`)), `normal` (mean `a`, std
    `b`), `glorot_uniform`, `glorot_normal`, `he_uniform`, `he_normal`
    (`#dtc.init<...>`). The
    fan-in of a parameter is the product of all its dimensions but the last,
    its fan-out the last dimension (both the size, for rank 1).

    ```mlir
    dtc.param @"fc1.weight" : tensor<500x784xf32> {a = -0.0357 : f64, b = 0.0357 : f64, init = #dtc.init<uniform>}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Dtc_F32Tensor>:$type,
                       DefaultValuedAttr<Dtc_InitKindAttr, "InitKind::Zeros">:$init,
                       DefaultValuedAttr<F64Attr, "0.0">:$a,
                       DefaultValuedAttr<F64Attr, "0.0">:$b);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def Dtc_BufferOp : Dtc_Op<"buffer", [Symbol]> {
  let summary = "A non-trainable tensor of the model's state (a torch.nn buffer)";
  let description = [{
    Declares state that the training step updates but the optimizer does
    not (batch normalization's `running_mean`, `running_var` and
    `num_batches_tracked`): no gradient, no optimizer state, never
    all-reduced. It lives in the persistent block after the parameters
    (`#dtc.placement` without a state offset), is saved in checkpoints
    under its name, and is broadcast from rank 0 with the parameters at
    the start, as DDP broadcasts a module's buffers. `f32` or `i64`
    (torch's `num_batches_tracked` is int64); every element starts at
    `value`. `dtc.param_ref` reads an `f32` buffer.

    ```mlir
    dtc.buffer @"bn1.running_var" : tensor<32xf32> {value = 1.0 : f64}
    dtc.buffer @"bn1.num_batches_tracked" : tensor<i64>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<RankedTensorOf<[F32, I64]>>:$type,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def Dtc_ParamRefOp : Dtc_Op<"param_ref", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads the current value of a parameter or of an f32 buffer";
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

def Dtc_ConstantOp : Dtc_Op<"constant", [Pure, ConstantLike]> {
  let summary = "A tensor filled with one value";
  let description = [{
    A splat constant; most often a 0-d tensor that broadcasts against others.
    ```mlir
    %one = dtc.constant {value = 1.0 : f32} : tensor<f32>
    ```
  }];
  let arguments = (ins F32Attr:$value);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Dtc_ArangeOp : Dtc_Op<"arange", [Pure]> {
  let summary = "The ids 0, 1, ..., n - 1 (torch.arange(n), as int32)";
  let description = [{
    A 1-D i32 tensor of the positions of a sequence, for a position
    embedding: `dtc.embedding` of it reads the table's first n rows.
    ```mlir
    %pos = dtc.arange : tensor<64xi32>
    ```
  }];
  let results = (outs 1DTensorOf<[I32]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dtc_BatchSizeOp : Dtc_Op<"batch_size", [Pure]> {
  let summary = "The number of rows in the current batch, as a float scalar";
  let description = [{
    The size of the dynamic batch dimension `?` when the step runs (the last
    batch of an epoch may be short). Used by the gradient of a mean over the
    batch dimension.
  }];
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Dtc_GradSeedOp : Dtc_Op<"grad_seed", [Pure]> {
  let summary = "The loss gradient that seeds backward, supplied at run time";
  let description = [{
    `dtc-autodiff` starts backward from this value instead of a constant 1.
    It is 1 when one process trains. Under data parallelism it is this
    rank's weight in the gradient average: its share of the global batch
    (1 / number of ranks when all ranks' batches are equal). Backward is
    linear in its seed, so every gradient arrives already weighted, and the
    all-reduces only sum: no pass over the gradients before or after the
    collective (the prescaling of Horovod and DeepSpeed, without its pass).
  }];
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

class Dtc_UnaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Dtc_Op<mnemonic, !listconcat([Pure, Dtc_Elementwise,
        SameOperandsAndResultType,
        DeclareOpInterfaceMethods<Dtc_GradientOpInterface>], traits)> {
  let summary = "Elementwise " # what;
  let arguments = (ins Dtc_F32Tensor:$x);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}

def Dtc_NegOp : Dtc_UnaryOp<"neg", "negation: -x"> { let hasFolder = 1; }
def Dtc_ReluOp : Dtc_UnaryOp<"relu", "rectifier: max(x, 0)">;
def Dtc_TanhOp : Dtc_UnaryOp<"tanh", "hyperbolic tangent">;
def Dtc_SigmoidOp : Dtc_UnaryOp<"sigmoid", "logistic sigmoid: 1 / (1 + exp(-x))">;
def Dtc_GeluOp : Dtc_UnaryOp<"gelu",
    "GELU, exact form: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))">;
def Dtc_GeluTanhOp : Dtc_UnaryOp<"gelu_tanh",
    "GELU, tanh approximation (GPT-2's; torch's approximate='tanh'): "
    "0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))">;
def Dtc_SiluOp : Dtc_UnaryOp<"silu",
    "SiLU (swish; torch.nn.SiLU): x * sigmoid(x) = x / (1 + exp(-x))">;
def Dtc_ExpOp : Dtc_UnaryOp<"exp", "exponential">;
def Dtc_LogOp : Dtc_UnaryOp<"log", "natural logarithm">;
def Dtc_SqrtOp : Dtc_UnaryOp<"sqrt", "square root">;

class Dtc_BinaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Dtc_Op<mnemonic, !listconcat([Pure, Dtc_Elementwise, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<Dtc_GradientOpInterface>], traits)> {
  let summary = "Elementwise " # what # " with numpy broadcasting";
  let description = [{
    Operand shapes broadcast as in numpy: right-aligned, each dimension equal
    or 1. The dynamic batch dimension `?` broadcasts only against `?` or 1.
  }];
  let arguments = (ins Dtc_F32Tensor:$lhs, Dtc_F32Tensor:$rhs);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}

def Dtc_AddOp : Dtc_BinaryOp<"add", "addition", [Commutative]> {
  let hasFolder = 1;
}
def Dtc_SubOp : Dtc_BinaryOp<"sub", "subtraction"> { let hasFolder = 1; }
def Dtc_MulOp : Dtc_BinaryOp<"mul", "multiplication", [Commutative]> {
  let hasFolder = 1;
}
def Dtc_DivOp : Dtc_BinaryOp<"div", "division"> { let hasFolder = 1; }

// Gradient helpers: elementwise, produced by autodiff, not differentiable.
class Dtc_GradHelperOp<string mnemonic, string what>
    : Dtc_Op<mnemonic, [Pure, Dtc_Elementwise, SameOperandsAndResultType]> {
  let summary = what;
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$dy);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($result)";
}
def Dtc_ReluGradOp : Dtc_GradHelperOp<"relu_grad",
    "Gradient of relu from its input or result: dy where x > 0, else 0">;
def Dtc_GeluGradOp : Dtc_GradHelperOp<"gelu_grad",
    "Gradient of exact GELU: dy * (Phi(x) + x phi(x))">;
def Dtc_SiluGradOp : Dtc_GradHelperOp<"silu_grad",
    "Gradient of SiLU: dy * s (1 + x (1 - s)), s = sigmoid(x)">;
def Dtc_GeluTanhGradOp : Dtc_GradHelperOp<"gelu_tanh_grad",
    "Gradient of the tanh GELU: dy * (0.5 (1 + t) + 0.5 x (1 - t^2) "
    "sqrt(2 / pi) (1 + 3 0.044715 x^2)), t = tanh(sqrt(2 / pi) (x + 0.044715 x^3))">;

// An activation's derivative at its input, for the backward to multiply by
// (dtc-derivatives-in-forward computes it in the forward's kernel, where the
// activation's own intermediate values are at hand): elementwise, not
// differentiable.
class Dtc_DerivativeOp<string mnemonic, string what>
    : Dtc_Op<mnemonic, [Pure, Dtc_Elementwise, SameOperandsAndResultType]> {
  let summary = what;
  let arguments = (ins Dtc_F32Tensor:$x);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}
def Dtc_GeluDerivOp : Dtc_DerivativeOp<"gelu_deriv",
    "Derivative of exact GELU at x: Phi(x) + x phi(x) (gelu_grad(x, dy) = dy * it)">;
def Dtc_GeluTanhDerivOp : Dtc_DerivativeOp<"gelu_tanh_deriv",
    "Derivative of the tanh GELU at x (gelu_tanh_grad(x, dy) = dy * it)">;

def Dtc_BroadcastToOp : Dtc_Op<"broadcast_to", [Pure, Dtc_Elementwise,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Broadcasts a tensor to a larger shape (numpy rules)";
  let arguments = (ins Dtc_F32Tensor:$x);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def Dtc_SumToOp : Dtc_Op<"sum_to", [Pure,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Sums a tensor down to a shape it broadcasts from";
  let description = [{
    The inverse of broadcasting (`sum_to_size` in PyTorch): dimensions that
    the result lacks or has as 1 are summed over. Autodiff uses it for the
    gradients of broadcasting operands.
  }];
  let arguments = (ins Dtc_F32Tensor:$x);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Dtc_ReshapeOp : Dtc_Op<"reshape", [Pure,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Dtc_TiedOpInterface>]> {
  let summary = "Reinterprets a tensor with another shape of the same size";
  let description = [{
    Row-major reinterpretation; the number of elements is unchanged. A
    dynamic batch dimension must stay the first dimension.
  }];
  let arguments = (ins Dtc_F32Tensor:$x);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
  let hasVerifier = 1;
}

def Dtc_SplitOp : Dtc_Op<"split", [Pure,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Consecutive pieces of a tensor along an axis";
  let description = [{
    Result i is the i-th run of `x` along `axis` (each result's size along
    it; they add up to x's): `q, k, v = split(x, 3, axis=-1)` in the DSL,
    torch.chunk. The axis is not the batch dimension.

    ```mlir
    %q, %k, %v = dtc.split %x {axis = 2 : i64} : tensor<?x4x12xf32> -> tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$x, I64Attr:$axis);
  let results = (outs Variadic<Dtc_F32Tensor>:$results);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($results)";
  let hasVerifier = 1;
}

def Dtc_ConcatOp : Dtc_Op<"concat", [Pure,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Tensors joined along an axis (torch.cat)";
  let description = [{
    The operands, of the same shape except along `axis` (not the batch
    dimension), one after another along it.
  }];
  let arguments = (ins Variadic<Dtc_F32Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def Dtc_TransposeOp : Dtc_Op<"transpose", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Permutes the dimensions of a tensor";
  let description = [{
    `result.shape[i] = x.shape[perm[i]]`.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Dtc_MatmulOp : Dtc_Op<"matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Matrix product, batched over leading dimensions, with optional transposes";
  let description = [{
    `result = op(lhs) x op(rhs)` where `op` transposes the last two
    dimensions of its operand when the matching flag is set; the flags let
    GEMM libraries read a transposed operand in place (canonicalization
    folds `dtc.transpose` into them).

    Operands of rank 2 or more: `[..., M, K] x [..., K, N] -> [..., M, N]`,
    one product per leading (batch) index, both operands with the same
    leading dimensions (torch.matmul; the frontend broadcasts them first);
    or a 2-D rhs `[K, N]` broadcast over the lhs's leading dimensions (the
    lhs not transposed: nn.Linear on any rank, one GEMM over all its rows).
    With `contract_batch` the leading dimensions are summed over instead:
    `[..., K, M]^T x [..., K, N] -> [M, N]` (the gradient of the broadcast
    rhs: one GEMM whose inner dimension is every row).
  }];
  let arguments = (ins Dtc_F32Tensor:$lhs, Dtc_F32Tensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                       UnitAttr:$contract_batch);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Embeddings (as torch.nn.Embedding)
//===----------------------------------------------------------------------===//

def Dtc_EmbeddingOp : Dtc_Op<"embedding", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Rows of a table picked by integer ids (torch.nn.Embedding)";
  let description = [{
    `ids` is an i32 tensor of any shape, `weight` the table `[num, dim]`;
    the result is `ids`' shape with `dim` appended, row `weight[id]` for
    each id. Ids lie in `[0, num)`: the runtime checks the data before a
    step reads it (an id outside is an error naming its place in the data).

    ```mlir
    %e = dtc.embedding %ids, %w : tensor<?x64xi32>, tensor<256x128xf32> -> tensor<?x64x128xf32>
    ```
  }];
  let arguments = (ins Dtc_LabelTensor:$ids, Dtc_F32Tensor:$weight);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat =
      "$ids `,` $weight attr-dict `:` type($ids) `,` type($weight) `->` type($result)";
}

def Dtc_EmbeddingGradOp : Dtc_Op<"embedding_grad", [Pure]> {
  let summary = "Gradient of an embedding's table: dy's rows summed into the rows of their ids";
  let description = [{
    `dy` is the gradient of a `dtc.embedding` of `ids` (`ids`' shape with
    `dim` appended); the result, the table's gradient `[num, dim]`, holds in
    row r the sum of the rows of `dy` whose id is r (zero where no id is r),
    summed in the order of the ids.
  }];
  let arguments = (ins Dtc_LabelTensor:$ids, Dtc_F32Tensor:$dy);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat =
      "$ids `,` $dy attr-dict `:` type($ids) `,` type($dy) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention (as F.scaled_dot_product_attention)
//===----------------------------------------------------------------------===//

def Dtc_AttentionOp : Dtc_Op<"attention", [Pure,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Scaled dot-product attention, fused (F.scaled_dot_product_attention)";
  let description = [{
    `q` `[..., Tq, D]`, `k` `[..., Tk, D]` and `v` `[..., Tk, Dv]`, the same
    leading dimensions (batch, heads): `result = softmax(q k^T * scale) v`
    `[..., Tq, Dv]`, where with `causal` query i sees the keys 0..i only
    (Tq = Tk). Also returns each query row's log-sum-exp of its scaled
    scores, `lse` `[..., Tq]`: all the gradient keeps of the forward (it
    recomputes the probabilities). One kernel on each target: no
    `[Tq, Tk]` scores in memory.

    With `tokens_first` (set by dtc-attention-tokens-first, never by the
    frontend) q, k, v and the result have the heads after the tokens:
    `[..., Tq, H, D]`, `[..., Tk, H, D]`, `[..., Tk, H, Dv]` ->
    `[..., Tq, H, Dv]`, the layout of `reshape(linear(x), [B, T, H, D])`
    before torch's `transpose(1, 2)`; the kernels read the heads' rows at
    a stride of H rows. lse stays `[..., H, Tq]`.

    ```mlir
    %o, %lse = dtc.attention %q, %k, %v {causal, scale = 0.25 : f64}
        : tensor<?x4x64x16xf32>, tensor<?x4x64x16xf32>, tensor<?x4x64x16xf32>
        -> tensor<?x4x64x16xf32>, tensor<?x4x64xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$q, Dtc_F32Tensor:$k, Dtc_F32Tensor:$v,
                       UnitAttr:$causal, F64Attr:$scale, UnitAttr:$tokens_first);
  let results = (outs Dtc_F32Tensor:$result, Dtc_F32Tensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v attr-dict `:` type($q) `,` type($k) `,` type($v) `->` type($result) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def Dtc_AttentionGradOp : Dtc_Op<"attention_grad", [Pure,
    AllTypesMatch<["q", "dq"]>, AllTypesMatch<["k", "dk"]>, AllTypesMatch<["v", "dv"]>,
    AllTypesMatch<["out", "dy"]>]> {
  let summary = "Gradient of dtc.attention from its result, lse and the result's gradient";
  let description = [{
    Recomputes each row's probabilities `P = exp(q k^T scale - lse)`, then
    `dv = P^T dy`, `dS = P (dy v^T - rowsum(dy out))`,
    `dq = scale dS k`, `dk = scale dS^T q` (FlashAttention's backward).
    `tokens_first` as dtc.attention's: q, k, v, out, dy and the gradients
    `[..., T, H, D]`.
  }];
  let arguments = (ins Dtc_F32Tensor:$q, Dtc_F32Tensor:$k, Dtc_F32Tensor:$v,
                       Dtc_F32Tensor:$out, Dtc_F32Tensor:$lse, Dtc_F32Tensor:$dy,
                       UnitAttr:$causal, F64Attr:$scale, UnitAttr:$tokens_first);
  let results = (outs Dtc_F32Tensor:$dq, Dtc_F32Tensor:$dk, Dtc_F32Tensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $lse `,` $dy attr-dict `:` type($q) `,` type($k) `,` type($v) `,` type($dy) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def Dtc_AttentionQkvPackedOp : Dtc_Op<"attention_qkvpacked", [Pure]> {
  let summary = "dtc.attention on q, k, v packed in one tensor (flash_attn_qkvpacked_func)";
  let description = [{
    `qkv` `[..., T, 3, H, D]` holds q, k and v tokens-first, in that order
    (the projection `linear(x)` `[..., T, 3 H D]` that torch's block splits
    into three, reshaped): the same as `dtc.attention` with `tokens_first`
    on its three slices, `result` `[..., T, H, D]` and `lse` `[..., H, T]`.
    The kernels read the slices in place (rows 3 H D floats apart): no copy
    of q, k and v. Made by dtc-attention-qkv-packed, never by the frontend;
    it has no gradient of its own (it appears after dtc-autodiff).

    ```mlir
    %o, %lse = dtc.attention_qkvpacked %qkv {causal, scale = 0.25 : f64}
        : tensor<?x64x3x4x16xf32> -> tensor<?x64x4x16xf32>, tensor<?x4x64xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$qkv, UnitAttr:$causal, F64Attr:$scale);
  let results = (outs Dtc_F32Tensor:$result, Dtc_F32Tensor:$lse);
  let assemblyFormat = [{
    $qkv attr-dict `:` type($qkv) `->` type($result) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def Dtc_AttentionQkvPackedGradOp : Dtc_Op<"attention_qkvpacked_grad", [Pure,
    AllTypesMatch<["qkv", "dqkv"]>, AllTypesMatch<["out", "dy"]>]> {
  let summary = "Gradient of dtc.attention_qkvpacked: dq, dk, dv packed as its qkv";
  let description = [{
    dtc.attention_grad (tokens-first) on the slices of `qkv`
    `[..., T, 3, H, D]`, its dq, dk and dv written into the slices of one
    `dqkv` of qkv's type: the gradient of the projection that torch's block
    splits, without the concatenation.

    ```mlir
    %dqkv = dtc.attention_qkvpacked_grad %qkv, %o, %lse, %dy {causal, scale = 0.25 : f64}
        : tensor<?x64x3x4x16xf32>, tensor<?x64x4x16xf32>, tensor<?x4x64xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$qkv, Dtc_F32Tensor:$out, Dtc_F32Tensor:$lse,
                       Dtc_F32Tensor:$dy, UnitAttr:$causal, F64Attr:$scale);
  let results = (outs Dtc_F32Tensor:$dqkv);
  let assemblyFormat = [{
    $qkv `,` $out `,` $lse `,` $dy attr-dict `:` type($qkv) `,` type($dy) `,` type($lse)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (NCHW, as torch.nn)
//===----------------------------------------------------------------------===//
//
// With `channels_last` (set by dtc-channels-last, never by the frontend) the
// activations are NHWC instead: x [N, H, W, C], the result [N, Ho, Wo, O];
// a convolution's weight stays [O, C / groups, kH, kW] (torch's layout,
// the checkpoint's). The batch-norm ops take it too: the channels are then
// x's last dimension.

def Dtc_Conv2dOp : Dtc_Op<"conv2d", [Pure,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Dtc_ScratchOpInterface>]> {
  let summary = "2-D convolution (cross-correlation) of NCHW input, as torch.nn.Conv2d";
  let description = [{
    `x` is `[N, C, H, W]`, `weight` `[O, C / groups, kH, kW]`; the result is
    `[N, O, Ho, Wo]` with `Ho = (H + 2 pH - dH (kH - 1) - 1) / sH + 1` (and
    likewise `Wo`). `stride`, `padding` and `dilation` are (H, W) pairs;
    zero padding. With `bias` (`[O]`, optional) it is added to every
    position of its channel, as nn.Conv2d does (one pass: the kernel adds
    it). Scratch: the im2col columns of one sample, `C kH kW Ho Wo` floats.

    ```mlir
    %y = dtc.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>,
           dilation = array<i64: 1, 1>, groups = 1 : i64}
         : tensor<?x1x28x28xf32>, tensor<32x1x3x3xf32> -> tensor<?x32x28x28xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$weight,
                       Optional<Dtc_F32Tensor>:$bias,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = [{
    $x `,` $weight (`,` $bias^)? attr-dict `:` type($x) `,` type($weight)
    (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The geometry, for shape inference (dtc::shape::conv2d).
    ::dtc::shape::Window window();
  }];
}

def Dtc_Conv2dGradInputOp : Dtc_Op<"conv2d_grad_input", [Pure,
    DeclareOpInterfaceMethods<Dtc_ScratchOpInterface>]> {
  let summary = "Gradient of conv2d with respect to its input";
  let description = [{
    `dy` is the gradient of a `dtc.conv2d` of the same attributes and
    `weight`; the result (the input's type, which the output does not
    determine when a stride drops rows) is its gradient with respect to
    `x`: the transposed convolution of `dy`.
  }];
  let arguments = (ins Dtc_F32Tensor:$dy, Dtc_F32Tensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat =
      "$dy `,` $weight attr-dict `:` type($dy) `,` type($weight) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::dtc::shape::Window window();
  }];
}

def Dtc_Conv2dGradWeightOp : Dtc_Op<"conv2d_grad_weight", [Pure,
    DeclareOpInterfaceMethods<Dtc_ScratchOpInterface>]> {
  let summary = "Gradient of conv2d with respect to its weight";
  let description = [{
    The gradient of the weight of a `dtc.conv2d` of input `x` and the same
    attributes, from the gradient `dy` of its result, summed over the batch;
    with a second result, also the gradient of its bias (`dy` summed per
    channel), in the same pass over `dy`.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$dy,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result, Optional<Dtc_F32Tensor>:$bias_grad);
  let assemblyFormat = [{
    $x `,` $dy attr-dict `:` type($x) `,` type($dy) `->` type($result) (`,` type($bias_grad)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::dtc::shape::Window window();
  }];
}

def Dtc_MaxPool2dOp : Dtc_Op<"max_pool2d", [Pure,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "2-D max pooling of NCHW input, as torch.nn.MaxPool2d";
  let description = [{
    The maximum of each `kernel` window, moved by `stride`, over the input
    padded with `padding` (padding never wins: it is -inf). `[N, C, H, W]`
    to `[N, C, Ho, Wo]`.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::dtc::shape::Window window();
  }];
}

def Dtc_MaxPool2dGradOp : Dtc_Op<"max_pool2d_grad", [Pure]> {
  let summary = "Gradient of max_pool2d: dy to the first maximum of each window";
  let description = [{
    Each window's maximum found again in `x` (the first in row-major order,
    as PyTorch's CPU kernel picks; by `>`, so a NaN is kept only where it
    comes first); the window's `dy` added there.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$dy,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x) `,` type($dy) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::dtc::shape::Window window();
  }];
}

def Dtc_AvgPool2dOp : Dtc_Op<"avg_pool2d", [Pure,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "2-D average pooling of NCHW input, as torch.nn.AvgPool2d";
  let description = [{
    The mean of each `kernel` window over the zero-padded input: divided by
    the whole window with `count_include_pad` (PyTorch's default), else by
    the window's part inside the input.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       BoolAttr:$count_include_pad,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::dtc::shape::Window window();
  }];
}

def Dtc_AvgPool2dGradOp : Dtc_Op<"avg_pool2d_grad", [Pure]> {
  let summary = "Gradient of avg_pool2d: each window's dy spread over it";
  let arguments = (ins Dtc_F32Tensor:$dy, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       BoolAttr:$count_include_pad,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$dy attr-dict `:` type($dy) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::dtc::shape::Window window();
  }];
}

//===----------------------------------------------------------------------===//
// Random ops (training only)
//===----------------------------------------------------------------------===//

def Dtc_DropoutOp : Dtc_Op<"dropout", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Dtc_ModeOpInterface>]> {
  let summary = "Inverted dropout, as torch.nn.Dropout in training mode";
  let description = [{
    Each element is kept with probability 1 - p and scaled by 1 / (1 - p),
    else zeroed. The mask is a function of the step's random seed (which
    mixes the run's seed, the optimizer step and the rank: different on
    every rank and step, reproducible), `salt` (distinct per dropout op of
    a model) and the element's index, so the gradient recomputes it rather
    than storing it. The identity in @eval_step.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, F64Attr:$p, I64Attr:$salt);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dtc_DropoutGradOp : Dtc_Op<"dropout_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of dropout: dy through the same mask and scale";
  let arguments = (ins Dtc_F32Tensor:$dy, F64Attr:$p, I64Attr:$salt);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$dy attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class Dtc_ReduceOp<string mnemonic, string what>
    : Dtc_Op<mnemonic, [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = what # " over one axis (the axis is removed)";
  let arguments = (ins Dtc_F32Tensor:$x, I64Attr:$axis);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}
def Dtc_ReduceSumOp : Dtc_ReduceOp<"reduce_sum", "Sum">;
def Dtc_ReduceMeanOp : Dtc_ReduceOp<"reduce_mean", "Mean">;
def Dtc_ReduceMaxOp : Dtc_ReduceOp<"reduce_max", "Maximum">;

def Dtc_ReduceMaxGradOp : Dtc_Op<"reduce_max_grad", [Pure]> {
  let summary = "Gradient of reduce_max: dy routed to the first maximum";
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$y, Dtc_F32Tensor:$dy,
                       I64Attr:$axis);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat =
      "$x `,` $y `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Dtc_SoftmaxLikeOp<string mnemonic, string what>
    : Dtc_Op<mnemonic, [Pure, SameOperandsAndResultType,
        DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = what # " along one axis";
  let arguments = (ins Dtc_F32Tensor:$x, I64Attr:$axis);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
  let hasVerifier = 1;
}
def Dtc_SoftmaxOp : Dtc_SoftmaxLikeOp<"softmax", "Softmax">;
def Dtc_LogSoftmaxOp : Dtc_SoftmaxLikeOp<"log_softmax", "Log-softmax">;

class Dtc_SoftmaxGradLikeOp<string mnemonic, string what>
    : Dtc_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what;
  let arguments = (ins Dtc_F32Tensor:$y, Dtc_F32Tensor:$dy, I64Attr:$axis);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($result)";
  let hasVerifier = 1;
}
def Dtc_SoftmaxGradOp : Dtc_SoftmaxGradLikeOp<"softmax_grad",
    "Gradient of softmax from its result: y * (dy - sum(dy * y))">;
def Dtc_LogSoftmaxGradOp : Dtc_SoftmaxGradLikeOp<"log_softmax_grad",
    "Gradient of log_softmax from its result: dy - exp(y) * sum(dy)">;

//===----------------------------------------------------------------------===//
// Batch normalization (as torch.nn.BatchNorm1d / 2d)
//===----------------------------------------------------------------------===//

def Dtc_BatchNormOp : Dtc_Op<"batch_norm", [Pure,
    AllTypesMatch<["x", "result"]>,
    AllTypesMatch<["weight", "bias", "running_mean", "running_var", "mean", "var"]>,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Dtc_ModeOpInterface>]> {
  let summary = "Batch normalization in training: the batch's statistics";
  let description = [{
    `x` is `[N, C, ...]` (channels second, as torch.nn.BatchNorm1d on
    `[N, C]` or `[N, C, L]` and BatchNorm2d on `[N, C, H, W]`); the
    statistics of each channel are taken over the batch and every other
    dimension: `y = (x - mean) / sqrt(var + eps) * weight + bias`, where
    `var` is the biased variance. Also returns the batch's `mean` and
    `var` (`[C]`), which the gradient reads and `dtc.update_running_stats`
    folds into the running statistics. `running_mean` and `running_var`
    are not read in training: they are what the evaluation form
    (`dtc.batch_norm_inference`, built in @eval_step) normalizes with. With
    `relu`, the result is `max(y, 0)` (the kernel applies it as it writes:
    `batch_norm(x, act=relu)` has no pass of its own for the activation).

    ```mlir
    %y, %mean, %var = dtc.batch_norm %x, %w, %b, %rm, %rv {eps = 1.0e-05 : f64}
        : tensor<?x32x28x28xf32>, tensor<32xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$weight,
                       Dtc_F32Tensor:$bias, Dtc_F32Tensor:$running_mean,
                       Dtc_F32Tensor:$running_var, F64Attr:$eps, UnitAttr:$relu,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result, Dtc_F32Tensor:$mean,
                      Dtc_F32Tensor:$var);
  let assemblyFormat = [{
    $x `,` $weight `,` $bias `,` $running_mean `,` $running_var attr-dict
    `:` type($x) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Dtc_BatchNormGradOp : Dtc_Op<"batch_norm_grad", [Pure,
    AllTypesMatch<["x", "dx"]>,
    AllTypesMatch<["mean", "var", "weight", "dweight", "dbias"]>]> {
  let summary = "Gradient of batch normalization in training";
  let description = [{
    From the input `x`, the gradient `dy` of the result, the batch's
    statistics and the weight of a `dtc.batch_norm` of the same `eps`: the
    gradients of its input (through the statistics too), weight and bias.
    With `relu_result` (the result of a `dtc.batch_norm` with `relu`), `dy`
    counts only where that result is positive (the ReLU's gradient, applied
    as the kernel reads `dy`).

    With `pool_kernel`, `pool_stride` and `pool_padding` (set by
    dtc-fuse-max-pool-grad, NCHW only), `dy` is the gradient of
    `dtc.max_pool2d` of `relu_result` with that window, of the pooling's
    result type (printed after the types as `dy <type>`): the op routes it
    to each window's maximum itself, as `dtc.max_pool2d_grad` would, plane
    by plane as it reads it.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$dy,
                       Dtc_F32Tensor:$mean, Dtc_F32Tensor:$var,
                       Dtc_F32Tensor:$weight, Optional<Dtc_F32Tensor>:$relu_result,
                       F64Attr:$eps,
                       UnitAttr:$channels_last,
                       OptionalAttr<DenseI64ArrayAttr>:$pool_kernel,
                       OptionalAttr<DenseI64ArrayAttr>:$pool_stride,
                       OptionalAttr<DenseI64ArrayAttr>:$pool_padding);
  let results = (outs Dtc_F32Tensor:$dx, Dtc_F32Tensor:$dweight,
                      Dtc_F32Tensor:$dbias);
  let assemblyFormat = [{
    $x `,` $dy `,` $mean `,` $var `,` $weight (`relu` `(` $relu_result^ `:` type($relu_result) `)`)? attr-dict
    `:` custom<BatchNormGradTypes>(type($x), type($weight), type($dy))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The window of the max pooling whose gradient `dy` is, if fused.
    std::optional<::dtc::shape::Window> maxPoolWindow();
  }];
}

def Dtc_BatchNormInferenceOp : Dtc_Op<"batch_norm_inference", [Pure,
    AllTypesMatch<["x", "result"]>,
    AllTypesMatch<["weight", "bias", "mean", "var"]>]> {
  let summary = "Batch normalization with given statistics (evaluation)";
  let description = [{
    `y = (x - mean) / sqrt(var + eps) * weight + bias` per channel (with
    `relu`, `max(y, 0)`): the evaluation form of `dtc.batch_norm`, with the
    running statistics.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$weight,
                       Dtc_F32Tensor:$bias, Dtc_F32Tensor:$mean,
                       Dtc_F32Tensor:$var, F64Attr:$eps, UnitAttr:$relu,
                       UnitAttr:$channels_last);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = [{
    $x `,` $weight `,` $bias `,` $mean `,` $var attr-dict `:` type($x) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Dtc_LayerNormOp : Dtc_Op<"layer_norm", [Pure,
    AllTypesMatch<["x", "result"]>, AllTypesMatch<["weight", "bias"]>,
    AllTypesMatch<["mean", "rstd"]>,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Layer normalization over the last dimension (torch.nn.LayerNorm)";
  let description = [{
    `x` is `[..., D]`; each row of D elements is normalized by its own mean
    and biased variance: `y = (x - mean) * rstd * weight + bias`, `rstd =
    1 / sqrt(var + eps)`, with `weight` and `bias` `[D]`. Also returns each
    row's `mean` and `rstd` (x's shape without its last dimension), which
    the gradient reads. The same in training and evaluation.

    ```mlir
    %y, %mean, %rstd = dtc.layer_norm %x, %w, %b {eps = 1.0e-05 : f64}
        : tensor<?x64x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$weight,
                       Dtc_F32Tensor:$bias, F64Attr:$eps);
  let results = (outs Dtc_F32Tensor:$result, Dtc_F32Tensor:$mean,
                      Dtc_F32Tensor:$rstd);
  let assemblyFormat = [{
    $x `,` $weight `,` $bias attr-dict `:` type($x) `,` type($weight) `,` type($mean)
  }];
  let hasVerifier = 1;
}

def Dtc_LayerNormGradOp : Dtc_Op<"layer_norm_grad", [Pure,
    AllTypesMatch<["x", "dy", "dx"]>,
    AllTypesMatch<["weight", "dweight", "dbias"]>, AllTypesMatch<["mean", "rstd"]>]> {
  let summary = "Gradient of layer normalization";
  let description = [{
    From the input `x`, the gradient `dy` of the result, each row's `mean`
    and `rstd` and the `weight` of a `dtc.layer_norm`: with `xhat = (x -
    mean) rstd` and `g = dy weight`, `dx = rstd (g - mean(g) - xhat
    mean(g xhat))` (means over the row), `dweight = sum dy xhat` and `dbias
    = sum dy` over every row.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$dy,
                       Dtc_F32Tensor:$mean, Dtc_F32Tensor:$rstd,
                       Dtc_F32Tensor:$weight);
  let results = (outs Dtc_F32Tensor:$dx, Dtc_F32Tensor:$dweight,
                      Dtc_F32Tensor:$dbias);
  let assemblyFormat = [{
    $x `,` $dy `,` $mean `,` $rstd `,` $weight attr-dict `:` type($x) `,` type($weight) `,` type($mean)
  }];
}

def Dtc_RmsNormOp : Dtc_Op<"rms_norm", [Pure,
    AllTypesMatch<["x", "result"]>,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "RMS normalization over the last dimension (torch.nn.RMSNorm)";
  let description = [{
    `x` is `[..., D]`; each row of D elements is divided by its root mean
    square: `y = x * rstd * weight`, `rstd = 1 / sqrt(mean(x^2) + eps)`,
    with `weight` `[D]` (LLaMA's RMSNorm; no bias, no mean subtracted).
    Also returns each row's `rstd` (x's shape without its last dimension),
    which the gradient reads. The same in training and evaluation.

    ```mlir
    %y, %rstd = dtc.rms_norm %x, %w {eps = 1.0e-06 : f64}
        : tensor<?x64x128xf32>, tensor<128xf32>, tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$weight, F64Attr:$eps);
  let results = (outs Dtc_F32Tensor:$result, Dtc_F32Tensor:$rstd);
  let assemblyFormat = [{
    $x `,` $weight attr-dict `:` type($x) `,` type($weight) `,` type($rstd)
  }];
  let hasVerifier = 1;
}

def Dtc_RmsNormGradOp : Dtc_Op<"rms_norm_grad", [Pure,
    AllTypesMatch<["x", "dy", "dx"]>, AllTypesMatch<["weight", "dweight"]>]> {
  let summary = "Gradient of RMS normalization";
  let description = [{
    From the input `x`, the gradient `dy` of the result, each row's `rstd`
    and the `weight` of a `dtc.rms_norm`: with `xhat = x rstd` and `g = dy
    weight`, `dx = rstd (g - xhat mean(g xhat))` (the mean over the row) and
    `dweight = sum dy xhat` over every row.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$dy,
                       Dtc_F32Tensor:$rstd, Dtc_F32Tensor:$weight);
  let results = (outs Dtc_F32Tensor:$dx, Dtc_F32Tensor:$dweight);
  let assemblyFormat = [{
    $x `,` $dy `,` $rstd `,` $weight attr-dict `:` type($x) `,` type($weight) `,` type($rstd)
  }];
}

def Dtc_UpdateRunningStatsOp : Dtc_Op<"update_running_stats", [
    AllTypesMatch<["mean", "var"]>, MemoryEffects<[MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Dtc_ModeOpInterface>]> {
  let summary = "Folds a batch's statistics into batch normalization's buffers";
  let description = [{
    As torch.nn.BatchNorm in training: `running_mean = (1 - momentum)
    running_mean + momentum mean`, `running_var = (1 - momentum)
    running_var + momentum var n / (n - 1)` (the unbiased variance, `n`
    the elements per channel of `x`, the input the statistics are of) and
    `num_batches_tracked += 1`, on the buffers named. This rank's
    statistics (DDP's default: no synchronization across ranks). Absent
    from @eval_step.
  }];
  let arguments = (ins Dtc_F32Tensor:$x, Dtc_F32Tensor:$mean,
                       Dtc_F32Tensor:$var,
                       FlatSymbolRefAttr:$running_mean,
                       FlatSymbolRefAttr:$running_var,
                       FlatSymbolRefAttr:$num_batches_tracked,
                       F64Attr:$momentum,
                       UnitAttr:$channels_last);
  let assemblyFormat = [{
    $running_mean `,` $running_var `,` $num_batches_tracked `(` $x `,` $mean `,` $var `)`
    attr-dict `:` type($x) `,` type($mean)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses and metrics
//===----------------------------------------------------------------------===//

def Dtc_CrossEntropyOp : Dtc_Op<"cross_entropy", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Mean softmax cross-entropy of logits against class labels";
  let description = [{
    `logits` is `[N, ..., C]`, `labels` `[N, ...]` of class indices (one
    per row of C logits: a language model's `[B, T, V]` against `[B, T]`);
    the result is the 0-d mean over the rows whose label is not
    `ignore_index`, as `torch.nn.functional.cross_entropy` (NaN when every
    row is ignored, as there).
  }];
  let arguments = (ins Dtc_F32Tensor:$logits, Dtc_LabelTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->` type($result)";
}

def Dtc_CrossEntropyGradOp : Dtc_Op<"cross_entropy_grad", [Pure]> {
  let summary = "Gradient of cross_entropy: dloss * (softmax(logits) - onehot) / counted rows";
  let description = [{
    Zero in the rows whose label is `ignore_index`; the others are divided
    by the number of rows that are not.
  }];
  let arguments = (ins Dtc_F32Tensor:$logits, Dtc_LabelTensor:$labels,
                       0DTensorOf<[F32]>:$dloss,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat =
      "$logits `,` $labels `,` $dloss attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Dtc_MseOp : Dtc_Op<"mse", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Dtc_GradientOpInterface>]> {
  let summary = "Mean squared error over all elements";
  let arguments = (ins Dtc_F32Tensor:$prediction, Dtc_F32Tensor:$target);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat =
      "$prediction `,` $target attr-dict `:` type($prediction) `,` type($target) `->` type($result)";
}

def Dtc_MseGradOp : Dtc_Op<"mse_grad", [Pure]> {
  let summary = "Gradient of mse w.r.t. the prediction: dloss * 2 (p - t) / n";
  let arguments = (ins Dtc_F32Tensor:$prediction, Dtc_F32Tensor:$target,
                       0DTensorOf<[F32]>:$dloss);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat =
      "$prediction `,` $target `,` $dloss attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Dtc_AccuracyOp : Dtc_Op<"accuracy", [Pure, InferTypeOpAdaptor]> {
  let summary = "Fraction of rows whose arg-max equals the label (a metric)";
  let description = [{
    Over the rows of `[N, ..., C]` logits whose label (`[N, ...]`) is not
    `ignore_index`.
  }];
  let arguments = (ins Dtc_F32Tensor:$logits, Dtc_LabelTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// The training step
//===----------------------------------------------------------------------===//

def Dtc_ApplyGradientOp : Dtc_Op<"apply_gradient", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Updates a parameter with its gradient by the model's optimizer";
  let description = [{
    The optimizer and its hyper-parameters are the module's `dtc.optimizer`
    attribute; the update reads and writes the parameter and its optimizer
    state (momentum, Adam moments), which live outside the step's arena.
    With `scale` (a 0-d tensor, dtc-clip-grad-norm's factor) the update
    uses `grad * scale`, each element multiplied as it is read, in place of
    a pass that would write the scaled gradient out first.
  }];
  let arguments = (ins Dtc_F32Tensor:$grad, FlatSymbolRefAttr:$param,
                       Optional<Dtc_F32Scalar>:$scale);
  let assemblyFormat = "$param `,` $grad (`*` $scale^)? attr-dict `:` type($grad)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$grad, "::mlir::FlatSymbolRefAttr":$param), [{
      build($_builder, $_state, grad, param, ::mlir::Value());
    }]>
  ];
}

def Dtc_UpdateGroupOp : Dtc_Op<"update_group", [AttrSizedOperandSegments]> {
  let summary = "Updates several parameters with their gradients, in one call";
  let description = [{
    Made by `dtc-group-updates` from consecutive `dtc.apply_gradient` ops:
    parameter `params[i]` is updated with `grads[i]` by the module's
    optimizer. With `momentum_folded` (SGD, dtc-fold-momentum) each
    gradient is the parameter's summed momentum buffer, and the update is
    w -= lr m. With `grad_scale` (the `scale` of the updates it groups,
    which share it) every gradient is multiplied by it as it is read.
  }];
  let arguments = (ins Variadic<Dtc_F32Tensor>:$grads,
                       TypedArrayAttrBase<FlatSymbolRefAttr, "parameters">:$params,
                       UnitAttr:$momentum_folded,
                       Optional<Dtc_F32Scalar>:$grad_scale);
  let assemblyFormat =
      "$params `(` $grads `)` (`*` $grad_scale^)? attr-dict `:` type($grads)";
  let hasVerifier = 1;
}

def Dtc_ExportGradientOp : Dtc_Op<"export_gradient", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Hands a parameter's gradient out of the gradient-only step";
  let description = [{
    In `@grad_step` (dtc-derive-steps) in place of the update: the gradient
    goes to the runtime's packed gradient vector (gradient checks), where it
    starts at element `offset`; the vector holds every parameter's gradient
    in parameter order, without padding.
  }];
  let arguments = (ins Dtc_F32Tensor:$grad, FlatSymbolRefAttr:$param,
                       I64Attr:$offset);
  let assemblyFormat = "$param `,` $grad `at` $offset attr-dict `:` type($grad)";
}

def Dtc_AccumulateGradientOp : Dtc_Op<"accumulate_gradient", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Adds a micro-batch's gradient to the parameter's accumulator";
  let description = [{
    In `@accumulate_step` (dtc-accumulate-gradients, the recipe's
    `accumulate = K`) in place of the update: the micro-batches before an
    optimizer step's last add their gradients to the parameter's
    accumulator, a buffer of the persistent block (its byte offset the
    op's `dtc.placement`, from dtc-plan-memory), with no all-reduce, as
    DDP under `no_sync()`.

    ```mlir
    dtc.accumulate_gradient @"fc1.weight", %g : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$grad, FlatSymbolRefAttr:$param);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($grad)";
}

def Dtc_TakeAccumulatedOp : Dtc_Op<"take_accumulated", [
    SameOperandsAndResultType, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The last micro-batch's gradient plus the accumulated ones";
  let description = [{
    In `@train_step` of a module with accumulation: `grad` plus the
    parameter's accumulator (dtc.accumulate_gradient), which is zeroed, so
    that it is zero at every optimizer step's end (and in every
    checkpoint). The result is what the all-reduce averages and the
    optimizer applies.

    ```mlir
    %t = dtc.take_accumulated @"fc1.weight", %g : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Dtc_F32Tensor:$grad, FlatSymbolRefAttr:$param);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($grad)";
}

def Dtc_ExportPredictionOp : Dtc_Op<"export_prediction"> {
  let summary = "Hands the model's prediction out of the evaluation step";
  let description = [{
    Added to @eval_step by dtc-derive-steps: the logits of the model's
    first `cross_entropy` (from which `train --predict` writes the class
    and the softmax probabilities) or the prediction of its first `mse`
    (the values), `[B, ...]` (`[B, k]`, or a language model's `[B, T, V]`,
    from which `train --sample` draws tokens), copied to the runtime's prediction rows when it
    asks for them (StepArgs::predictions; null while training).
  }];
  let arguments = (ins Dtc_F32Tensor:$prediction);
  let assemblyFormat = "$prediction attr-dict `:` type($prediction)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data parallelism: gradient all-reduce
//===----------------------------------------------------------------------===//

def Dtc_SumSquaresOp : Dtc_Op<"sum_squares", [Pure]> {
  let summary = "The sum of the squares of every element of its operands";
  let description = [{
    Inserted by `dtc-clip-grad-norm` over the all-reduced gradients: the
    square of their global 2-norm (torch.nn.utils.clip_grad_norm_'s total
    norm, norm_type 2), the same on every rank.
  }];
  let arguments = (ins Variadic<Dtc_F32Tensor>:$xs);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$xs attr-dict `:` type($xs) `->` type($result)";
}

def Dtc_ClipCoefOp : Dtc_Op<"clip_coef", [Pure]> {
  let summary = "The factor clip_grad_norm_ scales the gradients by";
  let description = [{
    From the square of the gradients' global norm: `min(1, max_norm /
    (norm + 1e-6))` with `max_norm` the run's (the recipe's
    `clip_grad_norm`, or train --clip-grad-norm; 1 when it is 0).
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$sum_squares);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$sum_squares attr-dict `:` type($sum_squares) `->` type($result)";
}

def Dtc_CopyOp : Dtc_Op<"copy", [Pure, Dtc_Elementwise,
    SameOperandsAndResultType]> {
  let summary = "A copy of a tensor in a buffer of its own";
  let description = [{
    Inserted by `dtc-insert-grad-allreduce` where a gradient that must be
    all-reduced in place is also read elsewhere. Elementwise, so fusion folds
    it into the kernel that produces the value (one more store, no pass).
  }];
  let arguments = (ins Dtc_F32Tensor:$x);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}

def Dtc_AllReduceOp : Dtc_Op<"all_reduce", [SameOperandsAndResultType,
    MemoryEffects<[MemWrite]>, DeclareOpInterfaceMethods<Dtc_TiedOpInterface>]> {
  let summary = "Sums a gradient over all data-parallel ranks";
  let description = [{
    The result is the sum over the ranks of the operand (in place: it
    reuses the operand's buffer, which has no other use). Inserted by
    `dtc-insert-grad-allreduce` before each parameter update; grouped into
    buckets by `dtc-bucket-allreduce`.
  }];
  let arguments = (ins Dtc_F32Tensor:$grad);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dtc_AllReduceBucketOp : Dtc_Op<"all_reduce_bucket", [
    MemoryEffects<[MemWrite]>, DeclareOpInterfaceMethods<Dtc_TiedOpInterface>]> {
  let summary = "Sums a bucket of gradients over the ranks with one all-reduce";
  let description = [{
    The gradients live contiguously in one buffer (the memory plan places
    them there when they are produced, so nothing is copied in or out) that
    one collective sums over the ranks. `bucket` numbers the buckets in
    the order their communication starts. Split into start and wait by
    `dtc-overlap-allreduce`.
  }];
  let arguments = (ins Variadic<Dtc_F32Tensor>:$grads, I64Attr:$bucket);
  let results = (outs Variadic<Dtc_F32Tensor>:$results);
  let assemblyFormat = "`(` $grads `)` attr-dict `:` functional-type($grads, $results)";
  let hasVerifier = 1;
}

def Dtc_AllReduceStartOp : Dtc_Op<"all_reduce_start", [
    MemoryEffects<[MemWrite]>]> {
  let summary = "Starts the all-reduce of a gradient bucket";
  let description = [{
    Placed right after the bucket's last gradient is produced, so that
    communication runs while backward computes the remaining gradients.
  }];
  let arguments = (ins Variadic<Dtc_F32Tensor>:$grads, I64Attr:$bucket);
  let results = (outs Dtc_RequestType:$request);
  let assemblyFormat = "`(` $grads `)` attr-dict `:` type($grads)";
  let hasVerifier = 1;
}

def Dtc_AllReduceWaitOp : Dtc_Op<"all_reduce_wait", [
    MemoryEffects<[MemWrite]>, DeclareOpInterfaceMethods<Dtc_TiedOpInterface>]> {
  let summary = "Waits for a bucket's all-reduce; its results are the sums";
  let description = [{
    Takes the request and the bucket's gradients; result i is the sum over
    the ranks of gradient i, in the same buffer. Placed as late as possible: just
    before the bucket's parameter updates, which follow it directly so that
    the update of bucket k overlaps the communication of bucket k+1.
  }];
  let arguments = (ins Dtc_RequestType:$request, Variadic<Dtc_F32Tensor>:$grads,
                       I64Attr:$bucket);
  let results = (outs Variadic<Dtc_F32Tensor>:$results);
  let assemblyFormat = "$request `,` `(` $grads `)` attr-dict `:` functional-type($grads, $results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Sharded data parallelism (dtc-shard-weight-update)
//===----------------------------------------------------------------------===//

def Dtc_ReduceScatterStartOp : Dtc_Op<"reduce_scatter_start", [
    MemoryEffects<[MemWrite]>, DeclareOpInterfaceMethods<Dtc_TiedOpInterface>]> {
  let summary = "Starts the reduce-scatter of a gradient bucket into this rank's shard";
  let description = [{
    The bucket's gradients live contiguously in one buffer, padded to a
    multiple of the ranks (`#dtc.shard`'s `ranks`): the collective sums it
    over the ranks and leaves in `shard` this rank's part of the sum,
    elements `[rank * n, (rank + 1) * n)` of the bucket, n the shard's
    length. With `in_place` (stage 1, the gradients stay whole) the shard is
    that part of the bucket itself (tied to the bucket's buffer); else
    (stage 2) it is a buffer of its own, and the bucket's buffer is free
    once the wait returns. Placed where the all-reduce started: right after
    the bucket's last gradient.
  }];
  let arguments = (ins Variadic<Dtc_F32Tensor>:$grads, I64Attr:$bucket,
                       UnitAttr:$in_place);
  let results = (outs Dtc_RequestType:$request, 1DTensorOf<[F32]>:$shard);
  let assemblyFormat = "`(` $grads `)` attr-dict `:` type($grads) `->` type($shard)";
  let hasVerifier = 1;
}

def Dtc_ReduceScatterWaitOp : Dtc_Op<"reduce_scatter_wait", [
    MemoryEffects<[MemWrite]>, DeclareOpInterfaceMethods<Dtc_TiedOpInterface>,
    AllTypesMatch<["shard", "result"]>]> {
  let summary = "Waits for a bucket's reduce-scatter; its result is this rank's shard of the sum";
  let description = [{
    Takes the request, the shard its start wrote and the bucket's gradients
    (read by the collective until it completes); the result lives in the
    shard's buffer.
  }];
  let arguments = (ins Dtc_RequestType:$request, 1DTensorOf<[F32]>:$shard,
                       Variadic<Dtc_F32Tensor>:$grads, I64Attr:$bucket);
  let results = (outs 1DTensorOf<[F32]>:$result);
  let assemblyFormat = "$request `,` $shard `,` `(` $grads `)` attr-dict `:` type($grads) `->` type($result)";
  let hasVerifier = 1;
}

def Dtc_ShardUpdateOp : Dtc_Op<"shard_update"> {
  let summary = "Updates this rank's shard of a bucket's parameters";
  let description = [{
    The module's optimizer on the elements `[rank * n, (rank + 1) * n)` of
    the bucket's parameters, laid out like the bucket in the persistent
    block (the bucket plan's `param_offset`), with `shard` (n floats: this
    rank's part of the summed gradients) and this rank's shard of their
    optimizer state (the plan's `state_offset`): one elementwise pass, the
    same arithmetic as each parameter's update. With `grad_scale`
    (dtc-clip-grad-norm's factor) every gradient element is multiplied by
    it as it is read.
  }];
  let arguments = (ins 1DTensorOf<[F32]>:$shard,
                       TypedArrayAttrBase<FlatSymbolRefAttr, "parameters">:$params,
                       I64Attr:$bucket, Optional<Dtc_F32Scalar>:$grad_scale);
  let assemblyFormat =
      "$params `(` $shard `)` (`*` $grad_scale^)? attr-dict `:` type($shard)";
  let hasVerifier = 1;
}

def Dtc_AllGatherStartOp : Dtc_Op<"all_gather_start", [MemoryEffects<[MemWrite]>]> {
  let summary = "Starts gathering a bucket's parameters from their shards";
  let description = [{
    In place in the bucket's parameters (the plan's `param_offset`): rank
    r's part, the one its `dtc.shard_update` wrote, reaches every rank.
    Placed right after the update, so that it overlaps the next bucket's.
    With `carried` the step does not wait for it: the next step's
    `dtc.all_gather_wait` without a request does, before its first read of
    the bucket's parameters, so that the gather overlaps that step's
    forward (the runtime keeps the request between steps, and waits for it
    before anything else reads the parameters).
  }];
  let arguments = (ins TypedArrayAttrBase<FlatSymbolRefAttr, "parameters">:$params,
                       I64Attr:$bucket, UnitAttr:$carried);
  let results = (outs Dtc_RequestType:$request);
  let assemblyFormat = "$params attr-dict";
  let hasVerifier = 1;
}

def Dtc_AllGatherWaitOp : Dtc_Op<"all_gather_wait", [MemoryEffects<[MemWrite]>]> {
  let summary = "Waits for a bucket's all-gather: its parameters are whole again";
  let description = [{
    With a request, for the `dtc.all_gather_start` that made it. Without
    one, for the bucket's `carried` all-gather an earlier step started, if
    one is still in flight (none in the first step, after a resume, or once
    the runtime waited for it).
  }];
  let arguments = (ins Optional<Dtc_RequestType>:$request, I64Attr:$bucket);
  let assemblyFormat = "($request^)? attr-dict";
  let hasVerifier = 1;
}

def Dtc_GatherParamsStartOp : Dtc_Op<"gather_params_start", [
    MemoryEffects<[MemWrite]>]> {
  let summary = "Starts gathering a sharded bucket's parameters whole (stage 3)";
  let description = [{
    Under stage 3 (`#dtc.shard<parameters, ...>`) each rank holds only its
    shard of each bucket's parameters; this collective (an all-gather)
    fills `gathered`, a buffer of the bucket's floats laid out like the
    bucket, with every rank's shard. Placed by dtc-shard-weight-update
    ahead of the bucket's first use (prefetch), once for forward and once
    for backward; the buffer is free after the last use of its views.
  }];
  let arguments = (ins TypedArrayAttrBase<FlatSymbolRefAttr, "parameters">:$params,
                       I64Attr:$bucket);
  let results = (outs Dtc_RequestType:$request, 1DTensorOf<[F32]>:$gathered);
  let assemblyFormat = "$params attr-dict `:` type($gathered)";
  let hasVerifier = 1;
}

def Dtc_GatherParamsWaitOp : Dtc_Op<"gather_params_wait", [
    MemoryEffects<[MemWrite]>, DeclareOpInterfaceMethods<Dtc_TiedOpInterface>,
    AllTypesMatch<["gathered", "result"]>]> {
  let summary = "Waits for a bucket's parameters to be gathered; the result is the bucket";
  let arguments = (ins Dtc_RequestType:$request, 1DTensorOf<[F32]>:$gathered,
                       I64Attr:$bucket);
  let results = (outs 1DTensorOf<[F32]>:$result);
  let assemblyFormat = "$request `,` $gathered attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dtc_ParamViewOp : Dtc_Op<"param_view", [Pure,
    DeclareOpInterfaceMethods<Dtc_TiedOpInterface>]> {
  let summary = "A parameter inside its gathered bucket (stage 3)";
  let description = [{
    The parameter `param` as the steps read it, `offset` floats into the
    bucket that dtc.gather_params_wait returned: what dtc.param_ref is for
    a parameter held whole.
  }];
  let arguments = (ins 1DTensorOf<[F32]>:$gathered, FlatSymbolRefAttr:$param,
                       I64Attr:$offset);
  let results = (outs Dtc_F32Tensor:$result);
  let assemblyFormat = "$param `in` $gathered `[` $offset `]` attr-dict `:` type($gathered) `->` type($result)";
  let hasVerifier = 1;
}

def Dtc_FusedOp : Dtc_Op<"fused", [Pure, IsolatedFromAbove, SingleBlock]> {
  let summary = "A chain of elementwise ops computed in one loop nest";
  let description = [{
    Made by `dtc-fuse-elementwise`. The body holds elementwise dtc ops on
    the block arguments (one per input) and yields the results. Code
    generation emits it as one kernel: a single pass over the result's
    elements, reading each input with broadcasting, keeping intermediates in
    registers. All results have the same shape (the iteration space).
  }];
  let arguments = (ins Variadic<Dtc_F32Tensor>:$inputs);
  let results = (outs Variadic<Dtc_F32Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
}

def Dtc_YieldOp : Dtc_Op<"yield", [Pure, Terminator]> {
  let summary = "Ends a fused body with its results";
  let description = [{
    Ends the body of a `dtc.fused` (and, after dtc-lower-to-runtime, of the
    `dtcrt.elementwise` that body moved to).
  }];
  let arguments = (ins Variadic<Dtc_F32Tensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // DTC_OPS_TD
