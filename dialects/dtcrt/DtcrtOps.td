//===- DtcrtOps.td - Ops of the runtime-call dialect ---------*- tablegen -*-===//
//
// The runtime ABI, once: every op with the KernelCall trait is one entry
// point of runtime/include/dtc/kernels.h (dtc::kern) and dtc/cuda.h
// (dtc::cuda), named by the op's name in camelCase (dtcrt.reduce_sum is
// reduceSum), its operands the parameters after the context, in order.
// The other ops make the values those calls take: buffers at their planned
// places, sizes, constants, host arrays.
//
//===----------------------------------------------------------------------===//
#ifndef DTCRT_OPS_TD
#define DTCRT_OPS_TD

include "DtcrtDialect.td"
include "DtcrtSpec.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Dtcrt_KernelCall : NativeOpTrait<"KernelCall"> {
  let cppNamespace = "::dtcrt::OpTrait";
}

// A call of the runtime: its operands are the entry point's parameters
// after the context, in order. dtc-tblgen -gen-runtime-abi prints the C++
// declarations of dtc/kernels.h and dtc/cuda.h from these defs
// (runtime/include/dtc/kernels_abi.inc): the function's name is the op's in
// camelCase, each parameter's name the operand's, its type the operand's
// (below), a buffer `const` unless the kernel writes it; `summary` and
// `description` are its comment. `cpuOnly`: the CUDA kernels have no twin.
class Dtcrt_Call<string mnemonic, dag args, string what>
    : Dtcrt_Op<mnemonic, [Dtcrt_KernelCall]> {
  let summary = "Calls " # what;
  let arguments = args;
  let assemblyFormat = "`(` operands `)` attr-dict `:` type(operands)";
  bit cpuOnly = 0;
}

// The buffers a kernel reads (MemRead; a `const` pointer in C++) and those
// it writes (MemWrite, and MemRead: an accumulation, GEMM's C with beta).
def Dtcrt_In : Arg<Dtcrt_F32Ptr, "read", [MemRead]>;
def Dtcrt_Out : Arg<Dtcrt_F32Ptr, "written", [MemRead, MemWrite]>;
def Dtcrt_InI32 : Arg<Dtcrt_I32Ptr, "read", [MemRead]>;
def Dtcrt_OutI32 : Arg<Dtcrt_I32Ptr, "written", [MemRead, MemWrite]>;
def Dtcrt_OutI64 : Arg<Dtcrt_I64Ptr, "written", [MemRead, MemWrite]>;
// A seed: an i64 in the IR, uint64_t in C++.
def Dtcrt_Seed : TypeAlias<I64, "a 64-bit seed (uint64_t)">;

//===----------------------------------------------------------------------===//
// Values: buffers, sizes, constants, step arguments
//===----------------------------------------------------------------------===//

def Dtcrt_Space : I32EnumAttr<"Space", "where a buffer lives", [
    I32EnumAttrCase<"Persistent", 0, "persistent">,
    I32EnumAttrCase<"Fixed", 1, "fixed">,
    I32EnumAttrCase<"PerSample", 2, "per_sample">]> {
  let cppNamespace = "::dtcrt";
}

def Dtcrt_BufferOp : Dtcrt_Op<"buffer", [Pure]> {
  let summary = "A planned buffer: a byte offset in the persistent block or the arena";
  let description = [{
    `persistent` (parameters and optimizer state), `fixed` (the arena's
    fixed region) or `per_sample` (the arena's batched region, where the
    offset is in bytes per sample: the buffer starts at offset * B).
  }];
  let arguments = (ins Dtcrt_Space:$space, I64Attr:$offset);
  let results = (outs AnyTypeOf<[Dtcrt_F32Ptr, Dtcrt_I32Ptr, Dtcrt_I64Ptr]>:$ptr);
  let assemblyFormat = "$space `[` $offset `]` attr-dict `:` type($ptr)";
}

def Dtcrt_StepArg : I32EnumAttr<"StepArg", "a pointer the runtime hands the step", [
    I32EnumAttrCase<"Input", 0, "input">,
    I32EnumAttrCase<"ClassLabels", 1, "class_labels">,
    I32EnumAttrCase<"ValueLabels", 2, "value_labels">,
    I32EnumAttrCase<"Outputs", 3, "outputs">,
    I32EnumAttrCase<"ParamGrads", 4, "param_grads">,
    I32EnumAttrCase<"Predictions", 5, "predictions">,
    I32EnumAttrCase<"InputIds", 6, "input_ids">]> {
  let cppNamespace = "::dtcrt";
}

def Dtcrt_StepArgOp : Dtcrt_Op<"step_arg", [Pure]> {
  let summary = "A pointer of the step's arguments (dtc::rt::StepArgs)";
  let arguments = (ins Dtcrt_StepArg:$arg);
  let results = (outs AnyTypeOf<[Dtcrt_F32Ptr, Dtcrt_I32Ptr]>:$ptr);
  let assemblyFormat = "$arg attr-dict `:` type($ptr)";
  let hasVerifier = 1;
}

def Dtcrt_OffsetOp : Dtcrt_Op<"offset", [Pure]> {
  let summary = "A pointer `count` elements past another";
  let arguments = (ins Dtcrt_F32Ptr:$base, I64Attr:$count);
  let results = (outs Dtcrt_F32Ptr:$ptr);
  let assemblyFormat = "$base `[` $count `]` attr-dict `:` type($base) `->` type($ptr)";
}

def Dtcrt_NullOp : Dtcrt_Op<"null", [Pure]> {
  let summary = "A null pointer: an optional buffer that is absent (a convolution without bias)";
  let results = (outs Dtcrt_F32Ptr:$ptr);
  let assemblyFormat = "attr-dict `:` type($ptr)";
}

def Dtcrt_SizeOp : Dtcrt_Op<"size", [Pure]> {
  let summary = "A number of elements: `elements`, times the batch when batched";
  let arguments = (ins I64Attr:$elements, UnitAttr:$batched);
  let results = (outs I64:$size);
  let assemblyFormat = "$elements (`batched` $batched^)? attr-dict";
}

def Dtcrt_ConstantOp : Dtcrt_Op<"constant", [Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A literal argument (i1, i32, i64 or f32)";
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs AnyTypeOf<[I1, I32, I64, F32]>:$result);
  let assemblyFormat = "$value attr-dict";
  let hasVerifier = 1;
}

def Dtcrt_StepScalar : I32EnumAttr<"StepScalar", "a number of this step", [
    I32EnumAttrCase<"Batch", 0, "batch">,
    I32EnumAttrCase<"GradSeed", 1, "grad_seed">,
    I32EnumAttrCase<"MomentumShare", 2, "momentum_share">]> {
  let cppNamespace = "::dtcrt";
}

def Dtcrt_StepScalarOp : Dtcrt_Op<"step_scalar", [Pure]> {
  let summary = "A number known when the step runs";
  let description = [{
    `batch`: the rows of this batch, as a float (f32); `grad_seed`: the loss
    gradient backward starts from; `momentum_share`: dtc::rt::momentumShare
    of the optimizer step and the number of ranks (folded momentum).
  }];
  let arguments = (ins Dtcrt_StepScalar:$scalar);
  let results = (outs F32:$value);
  let assemblyFormat = "$scalar attr-dict";
}

def Dtcrt_StepSeedOp : Dtcrt_Op<"step_seed", [Pure]> {
  let summary = "The seed of this step's random numbers (dtc::rt::StepArgs::rngSeed)";
  let description = [{
    Mixes the run's seed, the optimizer step and the rank: the same in a
    step's forward and backward, different on every rank and step.
  }];
  let results = (outs I64:$seed);
  let assemblyFormat = "attr-dict";
}

def Dtcrt_HyperOp : Dtcrt_Op<"hyper", [Pure]> {
  let summary = "The optimizer's hyper-parameters of this step";
  let results = (outs Dtcrt_HyperType:$hyper);
  let assemblyFormat = "attr-dict";
}

def Dtcrt_ArrayOp : Dtcrt_Op<"array", [Pure]> {
  let summary = "A host array of integers: a shape (-1 for the batch) or a permutation";
  let arguments = (ins DenseI64ArrayAttr:$values);
  let results = (outs AnyTypeOf<[Dtcrt_I64Array, Dtcrt_I32Array]>:$array);
  let assemblyFormat = "$values attr-dict `:` type($array)";
}

def Dtcrt_UpdateItemsOp : Dtcrt_Op<"update_items", [Pure, AttrSizedOperandSegments]> {
  let summary = "The parameters of one optimizer update (dtc::rt::UpdateItem[])";
  let description = [{
    Item i: the parameter `weights[i]`, its gradient `grads[i]`, its state
    buffers (`states`, `states_per_item` each: SGD with momentum 1, Adam 2)
    and its size `sizes[i]`.
  }];
  let arguments = (ins Variadic<Dtcrt_F32Ptr>:$weights, Variadic<Dtcrt_F32Ptr>:$grads,
                       Variadic<Dtcrt_F32Ptr>:$states, Variadic<I64>:$sizes,
                       I64Attr:$states_per_item);
  let results = (outs Dtcrt_ItemsType:$items);
  let assemblyFormat = [{
    `weights` `(` $weights `:` type($weights) `)` `grads` `(` $grads `:` type($grads) `)`
    `states` `(` ($states^ `:` type($states))? `)` `sizes` `(` $sizes `)` attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Calls: the runtime's kernels (kernels.h / cuda.h)
//===----------------------------------------------------------------------===//

def Dtcrt_GemmOp : Dtcrt_Call<"gemm", (ins I1:$trans_a, I1:$trans_b, I64:$m, I64:$n,
    I64:$k, F32:$alpha, Dtcrt_In:$a, Dtcrt_In:$b, F32:$beta, Dtcrt_Out:$c),
    "C[M,N] = alpha op(A) op(B) + beta C (row-major)"> {
  let description = [{
    C[M,N] = alpha * op(A) * op(B) + beta * C, row-major. op(A) is [M,K]: A is
    stored [M,K] (transA=false) or [K,M] (transA=true); likewise B.
  }];
}
def Dtcrt_GemmBatchedOp : Dtcrt_Call<"gemm_batched", (ins I1:$trans_a, I1:$trans_b,
    I64:$count, I64:$m, I64:$n, I64:$k, F32:$alpha, Dtcrt_In:$a, Dtcrt_In:$b,
    F32:$beta, Dtcrt_Out:$c),
    "gemm on count products stored one after another (A_i at a + i M K, B_i at "
    "b + i K N, C_i at c + i M N)"> {
  let description = [{
    count such products, each operand's matrices one after another: A_i at A + i
    M K, B_i at B + i K N, C_i at C + i M N (torch.bmm; a batched dtc.matmul).
  }];
}
def Dtcrt_PermuteOp : Dtcrt_Call<"permute", (ins Dtcrt_In:$x, Dtcrt_Out:$y,
    I32:$rank, Dtcrt_I64Array:$x_shape, Dtcrt_I32Array:$perm),
    "y = x with its dimensions permuted"> {
  let description = [{
    y = x with dimensions permuted: y.shape[i] = x.shape[perm[i]]; rank <= 6.
  }];
}
class Dtcrt_AxisCall<string mnemonic, string what>
    : Dtcrt_Call<mnemonic, (ins Dtcrt_In:$x, Dtcrt_Out:$y, I64:$outer, I64:$n,
                               I64:$inner), what # " over the middle axis of [outer, n, inner]">;
def Dtcrt_ReduceSumOp : Dtcrt_AxisCall<"reduce_sum", "the sum"> {
  let description = [{
    Reductions over the middle axis of [outer, n, inner] -> [outer, inner]: the
    sum, the maximum, and the mean (the sum divided by n).
  }];
}
def Dtcrt_ReduceMeanOp : Dtcrt_AxisCall<"reduce_mean", "the mean">;
def Dtcrt_ReduceMaxOp : Dtcrt_AxisCall<"reduce_max", "the maximum">;
def Dtcrt_SoftmaxOp : Dtcrt_AxisCall<"softmax", "softmax"> {
  let description = [{
    Softmax family over the middle axis of [outer, n, inner].
  }];
}
def Dtcrt_LogSoftmaxOp : Dtcrt_AxisCall<"log_softmax", "log-softmax">;
def Dtcrt_ReduceMaxGradOp : Dtcrt_Call<"reduce_max_grad", (ins Dtcrt_In:$x,
    Dtcrt_In:$y, Dtcrt_In:$dy, Dtcrt_Out:$dx, I64:$outer, I64:$n, I64:$inner),
    "the gradient of reduce_max (dy to the first maximum)"> {
  let description = [{
    dx[o,i,k] = dy[o,k] where x[o,i,k] is the first maximum along i, else 0.
  }];
}
class Dtcrt_SoftmaxGradCall<string mnemonic, string what>
    : Dtcrt_Call<mnemonic, (ins Dtcrt_In:$y, Dtcrt_In:$dy, Dtcrt_Out:$dx,
                               I64:$outer, I64:$n, I64:$inner), what>;
def Dtcrt_SoftmaxGradOp : Dtcrt_SoftmaxGradCall<"softmax_grad", "the gradient of softmax"> {
  let description = [{
    dx = y * (dy - sum(dy * y)), y = softmax(x)
  }];
}
def Dtcrt_LogSoftmaxGradOp : Dtcrt_SoftmaxGradCall<"log_softmax_grad",
                                                   "the gradient of log-softmax"> {
  let description = [{
    dx = dy - exp(y) * sum(dy), y = log_softmax(x)
  }];
}
def Dtcrt_SumToOp : Dtcrt_Call<"sum_to", (ins Dtcrt_In:$x, I32:$x_rank,
    Dtcrt_I64Array:$x_shape, Dtcrt_Out:$y, I32:$y_rank, Dtcrt_I64Array:$y_shape),
    "the sum of x down to the shape it broadcasts from"> {
  let description = [{
    Sum x (shape xShape, rank xRank) down to yShape (rank yRank <= xRank), the
    inverse of numpy broadcasting (yShape right-aligned; size-1 or missing dims
    are summed over).
  }];
}
class Dtcrt_ClassLossCall<string mnemonic, string what>
    : Dtcrt_Call<mnemonic, (ins Dtcrt_In:$logits, Dtcrt_InI32:$labels, I64:$batch,
                               I64:$classes, I64:$ignore_index, Dtcrt_Out:$out),
                 what # " over the rows of logits [batch, classes] whose label is not ignore_index (a scalar to out)">;
def Dtcrt_CrossEntropyOp : Dtcrt_ClassLossCall<"cross_entropy", "the mean cross-entropy"> {
  let description = [{
    Losses and metrics write their scalar result to out[0]; the gradients read
    dloss[0]. The losses accumulate in double. The class losses and metrics go
    over rows of C logits; a row whose label is `ignore` (cross_entropy's
    ignore_index) does not count (every row ignored: NaN, as torch); a class
    label outside [0, C) that is not `ignore` is a fatal runtime error. Mean
    softmax cross-entropy of logits [B, C] against class labels [B].
  }];
}
def Dtcrt_AccuracyOp : Dtcrt_ClassLossCall<"accuracy", "the accuracy"> {
  let description = [{
    Fraction of counted rows whose arg-max (first maximum) equals the label.
  }];
}
def Dtcrt_CrossEntropyGradOp : Dtcrt_Call<"cross_entropy_grad", (ins Dtcrt_In:$logits,
    Dtcrt_InI32:$labels, I64:$batch, I64:$classes, I64:$ignore_index, Dtcrt_In:$dloss,
    Dtcrt_Out:$dlogits), "the gradient of cross-entropy"> {
  let description = [{
    dlogits = dloss * (softmax(logits) - onehot(labels)) / counted rows; 0 in
    ignored rows
  }];
}
def Dtcrt_AttentionOp : Dtcrt_Call<"attention", (ins Dtcrt_In:$q, Dtcrt_In:$k,
    Dtcrt_In:$v, Dtcrt_Out:$out, Dtcrt_Out:$lse, I64:$heads, I64:$group,
    I64:$qk_rows, I64:$v_rows, I64:$tq, I64:$tk, I64:$d, I64:$dv, I1:$causal, F32:$scale),
    "fused scaled dot-product attention of `heads` heads q [tq, d], k [tk, d], v [tk, dv] (out [tq, dv], lse [tq] each); `group` heads interleaved row by row ([heads / group, t, group, d]; 1: contiguous heads); the rows of q and k qk_rows floats apart, those of v v_rows (group d and group dv, or 3 group d for the slices of a packed [B, T, 3, H, D] tensor)"> {
  let description = [{
    Scaled dot-product attention (F.scaled_dot_product_attention) of `heads`
    independent heads (batch x heads, contiguous): q [heads, tq, d], k [heads,
    tk, d], v [heads, tk, dv] -> out [heads, tq, dv] = softmax(q k^T scale, keys
    after the query masked out when causal) v, and each row's log-sum-exp lse
    [heads, tq], all the gradient keeps (attention.cpp: one fused kernel, the
    scores of one row at a time). The gradient recomputes the probabilities from
    lse and writes dq, dk, dv; the same bits at any --threads. With group > 1
    the heads of q, k, v, out and their gradients are interleaved row by row,
    [heads / group, t, group, d] (torch's [B, T, H, D] before transpose(1, 2));
    lse stays [heads, tq]. The rows of q and k (and dq, dk) are qkRows floats
    apart, those of v (and dv) vRows: group d and group dv, or 3 group d where
    q, k and v are the slices of one packed [B, T, 3, H, D] tensor
    (flash_attn_qkvpacked_func's layout), their gradients written into the
    slices of dqkv likewise. out and dout rows are group dv apart.
  }];
}
def Dtcrt_AttentionGradOp : Dtcrt_Call<"attention_grad", (ins Dtcrt_In:$q,
    Dtcrt_In:$k, Dtcrt_In:$v, Dtcrt_In:$out, Dtcrt_In:$lse,
    Dtcrt_In:$dout, Dtcrt_Out:$dq, Dtcrt_Out:$dk, Dtcrt_Out:$dv_out,
    I64:$heads, I64:$group, I64:$qk_rows, I64:$v_rows, I64:$tq, I64:$tk, I64:$d, I64:$dv,
    I1:$causal, F32:$scale),
    "the gradient of attention (recomputed from lse); dq and dk written at q's row stride, dv at v's">;
def Dtcrt_EmbeddingOp : Dtcrt_Call<"embedding", (ins Dtcrt_In:$weight,
    Dtcrt_InI32:$ids, I64:$rows, I64:$num, I64:$dim, Dtcrt_Out:$out),
    "out [rows, dim] = the rows of weight [num, dim] at ids [rows]"> {
  let description = [{
    Embeddings: out [rows, dim] = the rows of weight [num, dim] at ids [rows];
    the gradient dweight [num, dim] = the rows of dy [rows, dim] summed by their
    ids, in row order (the same at any --threads). An id outside [0, num) is a
    fatal runtime error (the data is checked when loaded).
  }];
}
def Dtcrt_EmbeddingGradOp : Dtcrt_Call<"embedding_grad", (ins Dtcrt_InI32:$ids,
    Dtcrt_In:$dy, I64:$rows, I64:$num, I64:$dim, Dtcrt_Out:$dweight),
    "dweight [num, dim] = the rows of dy [rows, dim] summed by their ids (in their order)">;
def Dtcrt_MseOp : Dtcrt_Call<"mse", (ins Dtcrt_In:$prediction, Dtcrt_In:$target,
    I64:$n, Dtcrt_Out:$out), "the mean squared error (a scalar to out)"> {
  let description = [{
    Mean squared error over all n elements; grad: dp = dloss * 2 (p - t) / n
  }];
}
def Dtcrt_MseGradOp : Dtcrt_Call<"mse_grad", (ins Dtcrt_In:$prediction,
    Dtcrt_In:$target, I64:$n, Dtcrt_In:$dloss, Dtcrt_Out:$dp),
    "the gradient of the mean squared error">;
def Dtcrt_Conv2dOp : Dtcrt_Call<"conv2d", (ins Dtcrt_In:$x, Dtcrt_In:$weight,
    Dtcrt_In:$bias, Dtcrt_Out:$y, Dtcrt_Out:$cols, I64:$n, Dtcrt_I64Array:$window),
    "the 2-D convolution of n samples, plus bias unless null (window: a dtc::rt::Window2d; cols: scratch)"> {
  let description = [{
    Convolution and pooling of NCHW tensors, as torch.nn's Conv2d, MaxPool2d and
    AvgPool2d; N samples, `window` a rt::Window2d's 15 values. cols is scratch
    of C kH kW Ho Wo floats (one sample's im2col columns; its contents on entry
    do not matter). The gradients write (not accumulate) dx and dw;
    conv2dGradWeight sums over the N samples. bias ([O], added to each output
    channel) and dbias (its gradient: dy summed per channel) may be null.
  }];
}
def Dtcrt_Conv2dGradInputOp : Dtcrt_Call<"conv2d_grad_input", (ins Dtcrt_In:$dy,
    Dtcrt_In:$weight, Dtcrt_Out:$dx, Dtcrt_Out:$cols, I64:$n,
    Dtcrt_I64Array:$window), "the gradient of conv2d with respect to its input">;
def Dtcrt_Conv2dGradWeightOp : Dtcrt_Call<"conv2d_grad_weight", (ins Dtcrt_In:$x,
    Dtcrt_In:$dy, Dtcrt_Out:$dw, Dtcrt_Out:$dbias, Dtcrt_Out:$cols, I64:$n,
    Dtcrt_I64Array:$window),
    "the gradient of conv2d with respect to its weight, and its bias unless dbias is null">;
def Dtcrt_MaxPool2dOp : Dtcrt_Call<"max_pool2d", (ins Dtcrt_In:$x, Dtcrt_Out:$y,
    I64:$n, Dtcrt_I64Array:$window), "2-D max pooling of n samples"> {
  let description = [{
    Max pooling (padding never wins); the gradient routes each window's dy to
    its first maximum in row-major order, as PyTorch's CPU kernel (by >, as
    reduceMax: a NaN is kept only where it comes first).
  }];
}
def Dtcrt_MaxPool2dGradOp : Dtcrt_Call<"max_pool2d_grad", (ins Dtcrt_In:$x,
    Dtcrt_In:$dy, Dtcrt_Out:$dx, I64:$n, Dtcrt_I64Array:$window),
    "the gradient of max pooling">;
def Dtcrt_AvgPool2dOp : Dtcrt_Call<"avg_pool2d", (ins Dtcrt_In:$x, Dtcrt_Out:$y,
    I64:$n, Dtcrt_I64Array:$window, I1:$count_include_pad), "2-D average pooling of n samples"> {
  let description = [{
    Average pooling over the zero-padded input: divided by the window clipped to
    the padded input (countIncludePad, PyTorch's default) or to the input.
  }];
}
def Dtcrt_AvgPool2dGradOp : Dtcrt_Call<"avg_pool2d_grad", (ins Dtcrt_In:$dy,
    Dtcrt_Out:$dx, I64:$n, Dtcrt_I64Array:$window, I1:$count_include_pad),
    "the gradient of average pooling">;
def Dtcrt_DropoutOp : Dtcrt_Call<"dropout", (ins Dtcrt_In:$x, Dtcrt_Out:$y, I64:$n,
    F32:$p, Dtcrt_Seed:$seed, I64:$salt),
    "inverted dropout of n elements (dtc::rt::dropoutKeeps decides each)"> {
  let description = [{
    Inverted dropout of n elements: y = x / (1 - p) where rt::dropoutKeeps(seed,
    salt, i, p), else 0 (all 0 when p == 1); the gradient sends dy through the
    same mask and scale.
  }];
}
def Dtcrt_DropoutGradOp : Dtcrt_Call<"dropout_grad", (ins Dtcrt_In:$dy, Dtcrt_Out:$dx,
    I64:$n, F32:$p, Dtcrt_Seed:$seed, I64:$salt), "the gradient of dropout (the same mask)">;
def Dtcrt_LayerNormOp : Dtcrt_Call<"layer_norm", (ins Dtcrt_In:$x, Dtcrt_In:$weight,
    Dtcrt_In:$bias, Dtcrt_Out:$y, Dtcrt_Out:$mean, Dtcrt_Out:$rstd, I64:$rows,
    I64:$d, F32:$eps),
    "layer normalization of each row of x [rows, d]"> {
  let description = [{
    Layer normalization (torch.nn.LayerNorm over the last dimension) of each row
    of x [rows, d]: y = (x - mean) rstd weight + bias, rstd = 1 / sqrt(var +
    eps) (biased variance), mean and rstd [rows] kept for the gradient, which
    writes dx, dweight and dbias (summed over the rows).
  }];
}
def Dtcrt_LayerNormGradOp : Dtcrt_Call<"layer_norm_grad", (ins Dtcrt_In:$x,
    Dtcrt_In:$dy, Dtcrt_In:$mean, Dtcrt_In:$rstd, Dtcrt_In:$weight,
    Dtcrt_Out:$dx, Dtcrt_Out:$dweight, Dtcrt_Out:$dbias, I64:$rows, I64:$d),
    "the gradient of layer normalization">;
def Dtcrt_RmsNormOp : Dtcrt_Call<"rms_norm", (ins Dtcrt_In:$x, Dtcrt_In:$weight,
    Dtcrt_Out:$y, Dtcrt_Out:$rstd, I64:$rows, I64:$d, F32:$eps),
    "RMS normalization of each row of x [rows, d]"> {
  let description = [{
    torch.nn.RMSNorm over the last dimension of each row of x [rows, d]: y
    = x rstd weight, rstd = 1 / sqrt(mean(x^2) + eps), rstd [rows] kept for
    the gradient. A row's sum of squares is taken as layerNorm's sums are
    (the same floats at any --threads).
  }];
}
def Dtcrt_RmsNormGradOp : Dtcrt_Call<"rms_norm_grad", (ins Dtcrt_In:$x,
    Dtcrt_In:$dy, Dtcrt_In:$rstd, Dtcrt_In:$weight, Dtcrt_Out:$dx,
    Dtcrt_Out:$dweight, I64:$rows, I64:$d),
    "the gradient of RMS normalization"> {
  let description = [{
    dx = rstd (g - xhat mean(g xhat)) for g = dy weight, xhat = x rstd;
    dweight = the sum over the rows of dy xhat (in row blocks, added in
    block order: the same at any --threads).
  }];
}
def Dtcrt_BatchNormOp : Dtcrt_Call<"batch_norm", (ins Dtcrt_In:$x, Dtcrt_In:$weight,
    Dtcrt_In:$bias, Dtcrt_Out:$y, Dtcrt_Out:$mean, Dtcrt_Out:$var, I64:$n,
    I64:$channels, I64:$inner, F32:$eps, I1:$relu, I64:$lanes),
    "batch normalization of x [n, channels, inner] (lanes 16: [n, channels / 16, inner, 16], nChw16c) with the batch's statistics"> {
  let description = [{
    Batch normalization of x [n, channels, inner] per channel, as
    torch.nn.BatchNorm1d / 2d (lanes 1; lanes 16: x is blocked, [n, channels /
    16, inner, 16], the nChw16c tensors dtc-blocked-layout plans). In training
    (batchNorm) with the batch's statistics, which it writes to mean and var
    (the biased variance); batchNormGrad gives dx (through the statistics too),
    dweight and dbias; batchNormInference normalizes with the given statistics.
    With relu the result is max(y, 0); reluResult (that result, or null) makes
    the gradient count dy only where it is positive. updateRunningStats folds a
    batch's statistics (count elements per channel) into the running ones with
    `momentum` (the variance made unbiased) and counts the batch in
    *numBatchesTracked.
  }];
}
def Dtcrt_BatchNormGradOp : Dtcrt_Call<"batch_norm_grad", (ins Dtcrt_In:$x,
    Dtcrt_In:$dy, Dtcrt_In:$mean, Dtcrt_In:$var, Dtcrt_In:$weight,
    Dtcrt_In:$relu_result, Dtcrt_Out:$dx, Dtcrt_Out:$dweight, Dtcrt_Out:$dbias,
    I64:$n, I64:$channels, I64:$inner, F32:$eps, I64:$lanes),
    "the gradient of batch normalization in training (through its ReLU unless relu_result is null)">;
def Dtcrt_BatchNormGradMaxPoolOp : Dtcrt_Call<"batch_norm_grad_max_pool", (ins Dtcrt_In:$x,
    Dtcrt_In:$pooled_dy, Dtcrt_In:$mean, Dtcrt_In:$var, Dtcrt_In:$weight,
    Dtcrt_In:$relu_result, Dtcrt_Out:$dx, Dtcrt_Out:$dweight, Dtcrt_Out:$dbias,
    I64:$n, I64:$channels, I64:$inner, F32:$eps, I64:$lanes, Dtcrt_I64Array:$window),
    "batch_norm_grad through its ReLU when dy is the gradient of a max pooling (window) of relu_result: pooled_dy routed plane by plane (CPU)"> {
  let description = [{
    batchNormGradMaxPool is batchNormGrad when dy is the gradient of a max
    pooling (`window`, NCHW, lanes 1) of reluResult: it takes pooledDy, the
    gradient of the pooling's result, and gives what maxPool2dGrad then
    batchNormGrad give.
  }];
  let cpuOnly = 1;
}
def Dtcrt_BatchNormInferenceOp : Dtcrt_Call<"batch_norm_inference", (ins Dtcrt_In:$x,
    Dtcrt_In:$weight, Dtcrt_In:$bias, Dtcrt_In:$mean, Dtcrt_In:$var,
    Dtcrt_Out:$y, I64:$n, I64:$channels, I64:$inner, F32:$eps, I1:$relu, I64:$lanes),
    "batch normalization with given statistics">;
def Dtcrt_UpdateRunningStatsOp : Dtcrt_Call<"update_running_stats", (ins Dtcrt_In:$mean,
    Dtcrt_In:$var, Dtcrt_Out:$running_mean, Dtcrt_Out:$running_var,
    Dtcrt_OutI64:$num_batches_tracked, I64:$channels, I64:$count, F32:$momentum),
    "the running statistics' update from a batch of count elements per channel">;
def Dtcrt_ExportPredictionOp : Dtcrt_Call<"export_prediction", (ins Dtcrt_Out:$dst,
    Dtcrt_In:$src, I64:$n), "dst[0..n) = src[0..n) unless dst is null"> {
  let description = [{
    Copies n floats from src to dst unless dst is null (the prediction rows of
    the evaluation step, asked for by train --predict only).
  }];
}
def Dtcrt_AccumulateOp : Dtcrt_Call<"accumulate", (ins Dtcrt_Out:$acc,
    Dtcrt_In:$grad, I64:$n), "acc[0..n) += grad[0..n) (a micro-batch's gradient)"> {
  let description = [{
    Gradient accumulation (accumulate = K): acc[0..n) += g (the micro-batches
    before the last); out = g + acc and acc = 0 (the last, before the
    all-reduce), so that acc is zero at every optimizer step's end.
  }];
}
def Dtcrt_TakeAccumulatedOp : Dtcrt_Call<"take_accumulated", (ins Dtcrt_Out:$acc,
    Dtcrt_In:$grad, Dtcrt_Out:$out, I64:$n),
    "out = grad + acc, then acc = 0 (the last micro-batch's gradient and the others')">;
def Dtcrt_FillOp : Dtcrt_Call<"fill", (ins Dtcrt_Out:$x, I64:$n, F32:$value),
    "x[0..n) = value"> {
  let description = [{
    Fills n floats with v; copies n floats (dst and src do not overlap, or are
    equal).
  }];
}
def Dtcrt_SumSquaresOp : Dtcrt_Call<"sum_squares", (ins Dtcrt_In:$x, I64:$n,
    Dtcrt_Out:$acc), "acc[0] += the sum of the squares of x[0..n) (in double)"> {
  let description = [{
    Gradient clipping (dtc-clip-grad-norm): acc[0] += sum of x[i]^2 (in double
    per call); coef[0] = min(1, h.maxGradNorm / (sqrt(sumSquares[0]) + 1e-6)),
    or 1 when maxGradNorm <= 0 (torch.nn.utils.clip_grad_norm_).
  }];
}
def Dtcrt_ClipCoefOp : Dtcrt_Call<"clip_coef", (ins Dtcrt_In:$sum_squares,
    Dtcrt_HyperType:$hyper, Dtcrt_Out:$coef),
    "coef[0] = min(1, hyper.maxGradNorm / (sqrt(sum_squares[0]) + 1e-6)), 1 when maxGradNorm is 0">;
def Dtcrt_ArangeOp : Dtcrt_Call<"arange", (ins Dtcrt_OutI32:$x, I64:$n),
    "x[i] = i for i in [0, n) (int32)"> {
  let description = [{
    x[i] = i for i in [0, n): the positions of a sequence (torch.arange).
  }];
}
def Dtcrt_CopyRowsOp : Dtcrt_Call<"copy_rows", (ins Dtcrt_In:$src, I64:$src_stride,
    Dtcrt_Out:$dst, I64:$dst_stride, I64:$rows, I64:$len),
    "dst[r * dst_stride + i] = src[r * src_stride + i] for rows r, i < len (a split or concat piece)"> {
  let description = [{
    dst[r * dstStride + i] = src[r * srcStride + i] for r < rows, i < len: a
    piece of a split (src the whole tensor, dst the piece) or of a concat.
  }];
}
def Dtcrt_CopyOp : Dtcrt_Call<"copy", (ins Dtcrt_Out:$dst, Dtcrt_In:$src, I64:$n),
    "dst[0..n) = src[0..n)">;
def Dtcrt_SgdUpdateOp : Dtcrt_Call<"sgd_update", (ins Dtcrt_ItemsType:$items,
    I32:$count, Dtcrt_HyperType:$hyper, Dtcrt_In:$grad_scale),
    "SGD (torch.optim.SGD) on each item, its gradient times *grad_scale unless null"> {
  let description = [{
    Optimizer updates of `count` parameters (rt::UpdateItem, runtime.h), one
    after the other, PyTorch semantics (torch.optim.SGD / Adam / AdamW). SGD: g
    += wd*w; buf = momentum*buf + (1-dampening)*g (buf = g on step 1); g =
    nesterov ? g + momentum*buf : buf; w -= lr*g. s0 is buf; SGD without
    momentum may pass s0 = null. With gradScale (not null: dtc-clip-grad-norm's
    factor, in the arena), each gradient element is read times *gradScale (SGD
    and Adam).
  }];
}
def Dtcrt_AdamUpdateOp : Dtcrt_Call<"adam_update", (ins Dtcrt_ItemsType:$items,
    I32:$count, Dtcrt_HyperType:$hyper, Dtcrt_In:$grad_scale, I1:$decoupled),
    "Adam, or AdamW when decoupled (torch.optim), on each item, its gradient times *grad_scale unless null"> {
  let description = [{
    Adam (decoupled=false: g += wd*w) / AdamW (decoupled=true: w *= 1-lr*wd); s0
    = m (exp_avg), s1 = v (exp_avg_sq).
  }];
}
def Dtcrt_SgdApplyMomentumOp : Dtcrt_Call<"sgd_apply_momentum", (ins
    Dtcrt_ItemsType:$items, I32:$count, Dtcrt_HyperType:$hyper),
    "w -= lr g on each item, g its summed momentum (folded momentum)"> {
  let description = [{
    Each item's g is its summed momentum buffer: w -= lr * g (plain SGD with
    momentum and weight decay taken as 0; s0, s1 unused).
  }];
}
def Dtcrt_MomentumAccumulateOp : Dtcrt_Call<"momentum_accumulate", (ins
    Dtcrt_Out:$buf, Dtcrt_In:$g, I64:$n, F32:$share),
    "buf = g + share buf (share 0: buf = g), a rank's part of the folded momentum"> {
  let description = [{
    SGD momentum folded into the gradient buckets (dtc.fold_momentum: no
    dampening, Nesterov or weight decay). Each of W ranks accumulates its
    gradient into the momentum buffer, buf = g_r + share * buf, with share =
    rt::momentumShare(h, W) (0 on step 1, momentum / W after), and the bucket's
    all-reduce sums the buffers to momentum * buf + sum_r g_r, the new buf.
    GEMMs producing a gradient accumulate with beta = share themselves.
    momentumAccumulate: share == 0 copies g into buf (whatever buf held), else
    buf = g + share * buf.
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise kernels, collectives, tracing
//===----------------------------------------------------------------------===//

def Dtcrt_ElementwiseOp : Dtcrt_Op<"elementwise", [AttrSizedOperandSegments]> {
  let summary = "One pass over `shape`'s elements: a generated kernel";
  let description = [{
    The body of a `dtc.fused` kernel, moved here as it is (elementwise dtc
    ops on its block arguments, ended by dtc.yield), computed at every element of `shape`
    (-1 is the batch): input i is read at the element's linear index when
    `strides[i]` is empty, else at the sum of the element's multi-index
    times `strides[i]` (one stride per dimension of `shape`, 0 where input
    i is broadcast); every output is written at the linear index. With
    `in_place` (dtc-plan-memory's dtc.in_place), output j is written over
    input `in_place[j]` (-1: none), which it then also reads, at the linear
    index: the kernel takes that buffer once. The CPU prints it as a loop
    nest, CUDA as a `__global__` kernel and its launch.
  }];
  let arguments = (ins Variadic<Dtcrt_F32Ptr>:$inputs, Variadic<Dtcrt_F32Ptr>:$outputs,
                       I64:$count, DenseI64ArrayAttr:$shape, ArrayAttr:$strides,
                       StrAttr:$label, OptionalAttr<DenseI64ArrayAttr>:$in_place);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $outputs `:` type($outputs) `)`
    `count` $count attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
}

def Dtcrt_AllreduceStartOp : Dtcrt_Op<"allreduce_start"> {
  let summary = "Starts the sum over the ranks of `count` floats at `buf` (in place)";
  let arguments = (ins Dtcrt_F32Ptr:$buf, I64:$count, I64Attr:$bucket);
  let results = (outs Dtcrt_RequestType:$request);
  let assemblyFormat = "$buf `,` $count `bucket` $bucket attr-dict `:` type($buf)";
}

def Dtcrt_ReduceScatterStartOp : Dtcrt_Op<"reduce_scatter_start", [
    AllTypesMatch<["buf", "shard"]>]> {
  let summary = "Starts the sum over the ranks of the `count` floats at `buf`, this rank's part into `shard`";
  let description = [{
    `count` is `shard_count` times the ranks; `shard` receives elements
    `[rank * shard_count, (rank + 1) * shard_count)` of the sum: a buffer of
    its own, or that part of `buf` itself (in place).
  }];
  let arguments = (ins Dtcrt_F32Ptr:$buf, Dtcrt_F32Ptr:$shard,
                       I64:$shard_count, I64Attr:$bucket);
  let results = (outs Dtcrt_RequestType:$request);
  let assemblyFormat = "$buf `,` $shard `,` $shard_count `bucket` $bucket attr-dict `:` type($buf)";
}

def Dtcrt_AllgatherStartOp : Dtcrt_Op<"allgather_start"> {
  let summary = "Starts gathering each rank's `shard_count` floats of `buf` to every rank (in place)";
  let arguments = (ins Dtcrt_F32Ptr:$buf, I64:$shard_count, I64Attr:$bucket);
  let results = (outs Dtcrt_RequestType:$request);
  let assemblyFormat = "$buf `,` $shard_count `bucket` $bucket attr-dict `:` type($buf)";
}

def Dtcrt_RankOffsetOp : Dtcrt_Op<"rank_offset", [Pure]> {
  let summary = "This rank's shard of a buffer: `shard` floats times the rank past `base`";
  let arguments = (ins Dtcrt_F32Ptr:$base, I64Attr:$shard);
  let results = (outs Dtcrt_F32Ptr:$ptr);
  let assemblyFormat = "$base `[` `rank` `*` $shard `]` attr-dict `:` type($base) `->` type($ptr)";
}

def Dtcrt_WaitOp : Dtcrt_Op<"wait"> {
  let summary = "Waits for a collective: an all-reduce, reduce-scatter or all-gather";
  let arguments = (ins Dtcrt_RequestType:$request);
  let assemblyFormat = "$request attr-dict";
}

def Dtcrt_CarryOp : Dtcrt_Op<"carry"> {
  let summary = "Leaves a collective in flight for a later step: its request in slot `slot` of StepArgs::carried";
  let arguments = (ins Dtcrt_RequestType:$request, I64Attr:$slot);
  let assemblyFormat = "$request `slot` $slot attr-dict";
}

def Dtcrt_WaitCarriedOp : Dtcrt_Op<"wait_carried"> {
  let summary = "Waits for the collective an earlier step carried in slot `slot`, if one is in flight, and empties the slot";
  let arguments = (ins I64Attr:$slot);
  let assemblyFormat = "`slot` $slot attr-dict";
}

def Dtcrt_TraceBeginOp : Dtcrt_Op<"trace_begin"> {
  let summary = "Starts a span of the --trace timeline (when the step is recorded)";
  let arguments = (ins StrAttr:$name);
  let assemblyFormat = "$name attr-dict";
}

def Dtcrt_TraceEndOp : Dtcrt_Op<"trace_end"> {
  let summary = "Ends the span begun last";
  let assemblyFormat = "attr-dict";
}

#endif // DTCRT_OPS_TD
