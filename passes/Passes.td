//===- Passes.td - dtc passes -------------------------------*- tablegen -*-===//
#ifndef DTC_PASSES_TD
#define DTC_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"dtc-autodiff", "mlir::ModuleOp"> {
  let summary = "Derives the training step (forward, backward, update) from the forward graph";
  let description = [{
    Takes `func.func @forward`, whose first result is the loss and whose other
    results are metrics, and builds `func.func @train_step` with the same
    signature: the forward ops, then the reverse-mode gradient of the loss
    (each op's vector-Jacobian product comes from its GradientOpInterface),
    then one `dtc.apply_gradient` per parameter that the loss depends on.
    Backward starts from `dtc.grad_seed` (1 on one rank, the rank's weight in
    the average under data parallelism). Gradients of values used several
    times are summed. `@forward` stays (dtc-derive-steps makes it `@eval_step`) as the
    evaluation step.
  }];
  let dependentDialects = ["dtc::DtcDialect", "mlir::func::FuncDialect"];
}

def ChannelsLast : Pass<"dtc-channels-last", "mlir::func::FuncOp"> {
  let summary = "Plans channels-last (NHWC) activations for convolution chains";
  let description = [{
    Rewrites each NCHW `dtc.conv2d`, `dtc.max_pool2d`, `dtc.avg_pool2d` and
    4-D `dtc.batch_norm` (with its `dtc.update_running_stats`) into its
    `channels_last` form between two `dtc.transpose`s, NCHW to NHWC before
    and back after; the transposes between two such ops cancel (the
    transpose folder), so a chain conv, batch norm, pool, conv, ... runs
    NHWC from its first op to its last with one transpose at each end. The
    weights keep torch's [O, C / groups, kH, kW]. Runs on the forward graph,
    before dtc-autodiff, whose gradients inherit the layout.

    Why: oneDNN's convolutions run as fast on NHWC tensors as on its own
    blocked layouts, while NCHW tensors are reordered in and out of every
    convolution (a fifth of the CNN example's convolution time), and the
    CPU's batch-norm and pooling kernels vectorize over the contiguous
    channels. dtc runs the pass for the CPU target with the oneDNN engine;
    the CUDA kernels and the OpenBLAS engine's im2col are NCHW.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def BlockedLayout : Pass<"dtc-blocked-layout", "mlir::func::FuncOp"> {
  let summary = "Plans blocked (nChw16c) activations for convolution chains";
  let description = [{
    Rewrites each NCHW `dtc.conv2d` (groups 1), `dtc.max_pool2d`,
    `dtc.avg_pool2d` and 4-D `dtc.batch_norm` (with its
    `dtc.update_running_stats`) to hold its activations blocked,
    `[N, C / 16, H, W, 16]` (oneDNN's nChw16c), wherever their channels are
    a multiple of 16; a convolution of fewer channels reads NCHW and writes
    blocked. The conversions (a reshape and a transpose each way) cancel
    between two such ops in the canonicalizer that follows, so a chain
    converts once at each end. The weights keep torch's layout. Runs on the
    forward graph, before dtc-autodiff.

    Why: oneDNN's AVX-512 convolutions run on nChw16c; NCHW tensors are
    reordered into and out of it around every convolution (1.3-1.5 ms of
    the CNN example's 10 ms step), while the batch-norm and pooling kernels
    run on blocked tensors as fast as on NCHW ones. dtc runs it for the
    CPU target with `--layout=blocked`; the CUDA kernels are NCHW.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def DeriveSteps : Pass<"dtc-derive-steps", "mlir::ModuleOp"> {
  let summary = "Derives the evaluation and gradient-only steps as functions";
  let description = [{
    From `@forward` and `@train_step` (dtc-autodiff), the steps the runtime
    runs besides training, each a function of its own that later passes plan
    and the back end prints like any other:
    - `@eval_step`: `@forward` under its new name, the evaluation step (where
      evaluation differs from training, as dropout and batch norm do, those
      ops are rewritten here);
    - `@grad_step`: `@train_step` with each update replaced by a
      `dtc.export_gradient` at the parameter's place in the packed gradient
      vector (parameter order, no padding) and without communication (any
      collective is dropped for its operand): the local gradients, for
      gradient checks.
    `@train_step` gets `dtc.traced`: the step `train --trace` records.
    A module that already has `@eval_step` and `@grad_step` is left as it is.
  }];
  let dependentDialects = ["dtc::DtcDialect", "mlir::func::FuncDialect"];
}

def AttentionTokensFirst : Pass<"dtc-attention-tokens-first", "mlir::func::FuncOp"> {
  let summary = "Runs attention on [..., T, H, D] operands, without torch's transposes";
  let description = [{
    Where q, k and v of a `dtc.attention` (or of its `dtc.attention_grad`)
    are each a `dtc.transpose` of their last but two and last but one
    dimensions (torch's `reshape(x, [B, T, H, D]).transpose(1, 2)`), the op
    takes the transposes' inputs and gets `tokens_first`; its results are
    transposed back for their users (a gradient's `out` and `dy` are taken
    tokens-first: a transpose's input where they are one, else a new
    transpose). The canonicalizer that follows cancels the transposes in
    pairs, so the kernels read and write every head in place, at a stride of
    H rows: the GPT example's 32 copies a step go. Only where nothing is
    left to swap back: a gradient whose dq, dk and dv each go to head swaps
    only, a forward whose result goes to head swaps and to such gradients
    (elsewhere, as where two attentions' gradients are summed first, the
    graph stays as it is). The same floats. After dtc-autodiff, on every
    target.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def AttentionQkvPacked : Pass<"dtc-attention-qkv-packed", "mlir::func::FuncOp"> {
  let summary = "Runs attention on the packed projection, without the split and the concatenation";
  let description = [{
    A tokens-first `dtc.attention` whose q, k and v are the results 0, 1, 2
    of one `dtc.split` of a `[..., T, 3C]` tensor along its last dimension,
    each reshaped to `[..., T, H, D]` (torch's `q, k, v = split(c_attn,
    3)`), becomes a `dtc.attention_qkvpacked` of that tensor reshaped to
    `[..., T, 3, H, D]`: the kernels read the three slices in place. Its
    `dtc.attention_grad`, where dq, dk and dv (reshaped back) make exactly
    a `dtc.concat` of the last dimension in that order, becomes a
    `dtc.attention_qkvpacked_grad` whose `dqkv`, reshaped to `[..., T, 3C]`,
    replaces the concatenation. The split goes where nothing else reads
    it. The same floats. After dtc-attention-tokens-first and the
    canonicalizer, on every target.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def DerivativesInForward : Pass<"dtc-derivatives-in-forward", "mlir::func::FuncOp"> {
  let summary = "Computes a GELU's derivative in the forward, where its input is at hand";
  let description = [{
    Where the input `x` of a `dtc.gelu_tanh` (or `dtc.gelu`) is kept only for
    its gradient (every user of `x` is that activation or its
    `dtc.gelu_tanh_grad(x, dy)` / `dtc.gelu_grad`), the forward computes the
    derivative `d = dtc.gelu_tanh_deriv(x)` right after the activation, and
    each gradient becomes `dtc.mul(dy, d)`. dtc-fuse-elementwise then puts
    `d` in the activation's kernel, which shares its exponential (the
    backward's kernel evaluated the exponential and a division again), and
    the step keeps `d` instead of `x`: the same memory, a cheap backward.
    The same floats (`dy * d` is the expression the gradient computed).
    Where dtc-rematerialize cloned the activation into backward, the clone
    (the activation last before the first gradient) gets `d`, and the
    product beside it where `dy` already exists: one kernel then reads `x`
    once for the activation, `d` and the product, and the step keeps `x`
    only. After dtc-autodiff, before dtc-fuse-elementwise (dtc runs it when it
    fuses).
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def FuseMaxPoolGrad : Pass<"dtc-fuse-max-pool-grad", "mlir::func::FuncOp"> {
  let summary = "Folds a max_pool2d_grad into the batch_norm_grad that reads it";
  let description = [{
    Where `dtc.max_pool2d_grad(r, dp)` feeds only the `dy` of a
    `dtc.batch_norm_grad` whose `relu_result` is `r` (the gradient of conv
    -> batch_norm(relu) -> max_pool2d, NCHW), the batch_norm_grad takes
    `dp` with the pooling's window (`pool_kernel`, `pool_stride`,
    `pool_padding`) and the max_pool2d_grad goes: its kernel routes each
    plane's pooled gradient in cache as it reads it, where the unfused pair
    writes a full-size `dy` once and reads it twice. The same values, bit
    for bit. For the CPU target only: in a module whose `dtc.target` is
    CUDA it changes nothing (the CUDA kernels take the unfused pair); after
    dtc-autodiff.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def FuseElementwise : Pass<"dtc-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuses chains of elementwise ops into single dtc.fused kernels";
  let description = [{
    Groups elementwise ops that share an iteration space (the same result
    shape) and are connected by def-use edges into one `dtc.fused` op, whose
    body keeps the chain's intermediates in registers: a fused kernel reads
    each input once and writes only the values used outside it. Splat
    constants and `dtc.batch_size` used by the chain are cloned into the body.
    An op with no producer's group to join joins the open group of a sibling
    that reads the same full-size value (a GELU recomputed in backward and
    its derivative): one kernel reads that value once.
    Every remaining elementwise op becomes a one-op kernel, so code generators
    emit elementwise work only through `dtc.fused`. A kernel holds at most
    `max-ops` ops (64): a longer chain is split into kernels of that size,
    one store and load per split, because host compilers take more than
    linear time on very long loop bodies. With `chains=false`
    (`dtc --no-fuse`) every elementwise op becomes a one-op kernel: the
    unfused program, for comparisons and debugging.
  }];
  let options = [
    Option<"chains", "chains", "bool", /*default=*/"true",
           "Fuse def-use chains (false: one kernel per elementwise op)">,
    Option<"maxOps", "max-ops", "int64_t", /*default=*/"64",
           "Ops of one kernel at most (0: no limit): longer chains are split, "
           "so that the host compiler's time stays linear in the model">,
  ];
  let dependentDialects = ["dtc::DtcDialect"];
}

def PlanMemory : Pass<"dtc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places every buffer of each step in one arena, reusing memory by liveness";
  let description = [{
    For each function, every tensor an op produces gets a byte offset
    (`dtc.offsets`, one per result, -1 for a result without a buffer of its
    own) in the step's arena. Buffers whose size scales with the batch live
    in the per-sample region (offsets in bytes per sample; the real offset is
    offset * batch), the others in the fixed region placed before it. A
    buffer is live from its definition to its last use (results tied to an
    operand, as reshapes and in-place collectives, share its buffer);
    best-fit placement reuses freed ranges, and the per-sample region is
    then placed again knowing every live range (the largest buffer first,
    each at the lowest offset clear of those it is live with), which is
    kept where it needs less. Each gradient collective gets its
    bucket's place (`dtc.bucket_plan = #dtc.bucket_plan<offset, count>`), each
    function its arena (`dtc.arena = #dtc.arena<per_sample, fixed,
    naive_per_sample, naive_fixed>`, the naive sizes without reuse), each
    parameter its place and its optimizer state's in the persistent block
    (`dtc.placement = #dtc.placement<offset, state_offset>`), and the module
    the block's size (`dtc.persistent = #dtc.persistent<param_bytes, bytes>`).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t",
           /*default=*/"::dtc::kDefaultAlignment",
           "Byte alignment of every buffer (per-sample offsets use alignment/4)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark with the planned and naive sizes of each function">
  ];
}


def InsertGradAllReduce : Pass<"dtc-insert-grad-allreduce", "mlir::ModuleOp"> {
  let summary = "Averages every parameter gradient over the data-parallel ranks";
  let description = [{
    In `@train_step`, puts a `dtc.all_reduce` (sum over ranks) on the
    gradient of every `dtc.apply_gradient`, so the optimizer reads the
    averaged gradient: each rank's gradient is already weighted by its
    `dtc.grad_seed`. All-reduces work in place; a gradient that is also
    read elsewhere (or shared by two parameters) is first copied with
    `dtc.copy`, which fusion folds into the kernel that produces it.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def BucketAllReduce : Pass<"dtc-bucket-allreduce", "mlir::ModuleOp"> {
  let summary = "Fuses gradient all-reduces into buckets, in backward order";
  let description = [{
    Groups the `dtc.all_reduce` ops of `@train_step` into
    `dtc.all_reduce_bucket` ops in the order backward produces their
    gradients (the order of the gradients' definitions). A bucket is closed
    once it holds at least its byte cap: `first-bucket-bytes` for the first
    bucket (so communication starts early), `bucket-bytes` for the others
    (PyTorch DDP: 1 MiB and 25 MiB, the defaults). A cap of 0 gives one
    bucket per parameter. The layout is fixed at compile time and identical
    on every rank.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"::dtc::kDefaultBucketBytes",
           "Byte cap of a bucket (after the first)">,
    Option<"firstBucketBytes", "first-bucket-bytes", "int64_t",
           /*default=*/"::dtc::kDefaultFirstBucketBytes",
           "Byte cap of the first bucket">,
    Option<"byBlock", "by-block", "bool", /*default=*/"false",
           "Also close a bucket where the parameters' block instance changes (the first part of their names: h3 of h3.attn.c_attn.weight), so that each block's parameters are buckets of their own (stage 3 then gathers per block, as FSDP wraps per layer)">
  ];
  let dependentDialects = ["dtc::DtcDialect"];
}

def OverlapAllReduce : Pass<"dtc-overlap-allreduce", "mlir::ModuleOp"> {
  let summary = "Splits bucket all-reduces into start/wait to overlap backward";
  let description = [{
    Each `dtc.all_reduce_bucket` becomes a `dtc.all_reduce_start` placed right
    after the bucket's last gradient is produced, and a `dtc.all_reduce_wait`
    placed as late as possible: after all computation, in bucket order, each
    directly followed by its bucket's parameter updates, so that the update of
    bucket k overlaps the communication of bucket k+1.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def ShardWeightUpdate : Pass<"dtc-shard-weight-update", "mlir::ModuleOp"> {
  let summary = "Sharded data parallelism: reduce-scatter, the update on the shard, all-gather";
  let description = [{
    Where the module has `dtc.shard` (dtc --shard, ZeRO's stages; XLA's
    weight-update sharding), each gradient bucket's all-reduce in
    `@train_step` becomes a `dtc.reduce_scatter_start`/`_wait` that leaves
    this rank's part of the summed bucket (the bucket padded to a multiple
    of the ranks, dtc-plan-memory's layout), its parameters' updates one
    `dtc.shard_update` of that part (the optimizer state exists for the
    shard only), and a `dtc.all_gather_start`/`_wait` returns the updated
    parameters to every rank. Stage 1 (optimizer) reduce-scatters in place:
    the gradients stay whole. Stage 2 (gradients) reduce-scatters into a
    shard buffer and waits for bucket k before bucket k + `inflight`'s first
    gradient is made, so that the bucket's memory returns to the arena
    during backward. The updates and the gathers' starts follow the last
    wait, in the order of the buckets' first reads in forward (each gather
    overlaps the next bucket's update). With `carry` (the default) the step
    leaves its gathers in flight (`carried`): every function waits for a
    bucket's (`dtc.all_gather_wait` without a request) before its first
    read of the bucket's parameters, so that the gathers overlap the next
    step's forward; without, the gathers' waits end the step. Stage 3 (parameters) reduce-scatters
    as stage 2 and updates the shard, which is all a rank holds of the
    parameters: every step reads a bucket's parameters as views
    (`dtc.param_view`) into the bucket gathered whole
    (`dtc.gather_params_start`/`_wait`) before its first read in forward,
    and again in backward, `prefetch` gathers ahead.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
  let options = [
    Option<"inflight", "inflight", "int64_t", /*default=*/"2",
           "Stages 2 and 3: the reduce-scatters in flight at once (bucket k is waited for before bucket k + inflight's first gradient)">,
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"1",
           "Stage 3: the parameter gathers started ahead of the one being read">,
    Option<"carry", "carry", "bool", /*default=*/"true",
           "Stages 1 and 2: leave the all-gathers in flight into the next step, each waited for before its bucket's first read">,
  ];
}

def AccumulateGradients : Pass<"dtc-accumulate-gradients", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: @accumulate_step, and @train_step adding its sums";
  let description = [{
    Where the module has `dtc.accumulate` (the recipe's `accumulate = K`:
    K micro-batches per optimizer step), as a PyTorch loop that calls
    backward K times, under DDP's `no_sync()` but the last: a copy of
    `@train_step` becomes `@accumulate_step`, its updates
    `dtc.accumulate_gradient` (the gradient added to the parameter's
    accumulator, no all-reduce, no update), and in `@train_step` each
    gradient becomes `dtc.take_accumulated` of it (plus the accumulator,
    which it zeroes), right where the gradient is made, so that the
    all-reduces, inserted after this pass, average the sums and still
    start as soon as each is complete. The runtime runs `@accumulate_step`
    on the first K-1 micro-batches of an optimizer step and `@train_step` on
    the last, each with the loss scaled by its share of the step's samples.
    Runs after dtc-derive-steps (`@grad_step` stays one batch's gradient)
    and before dtc-insert-grad-allreduce; otherwise nothing changes.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def Rematerialize : Pass<"dtc-rematerialize", "mlir::ModuleOp"> {
  let summary = "Activation recomputation: forward values backward reads, computed again in backward";
  let description = [{
    In each step with a backward (`dtc.grad_seed`), the forward values that
    backward reads and the policy gives up are no longer kept from forward
    to backward: a clone of the ops that made each (the same ops on the same
    operands, in forward order, so the same bits) computes it again right
    before backward's first read of it, and the memory plan reuses the
    memory the forward values held. `blocks` (torch.utils.checkpoint on
    every block instance) gives up every value made inside a top-level
    block instance (`dtc.block`, from the front end) but those read outside
    it in forward: each instance keeps its input and recomputes its forward
    before its backward. `selective` (AOTAutograd's min-cut partitioner,
    Megatron's selective recomputation) never recomputes GEMMs,
    convolutions, attention or embeddings, and of the rest recomputes what
    makes the bytes kept for backward fewest: a minimum cut of the forward
    graph, each op an edge of its results' bytes, between those ops and
    backward's reads. It recomputes a normalization or an activation whose
    input backward holds anyway, and keeps a residual sum rather than the
    GEMM result it would need to recompute it. Whatever the policy,
    the instances the model wraps in `checkpoint(...)` (the module's
    `dtc.checkpoint`) are recomputed as `blocks` recomputes every top-level
    one. Never cloned: ops with
    side effects (`dtc.update_running_stats`: batch norm's statistics fold
    once), constants and parameter reads, values the step returns. Runs
    after the last CSE (which would merge the clones back) and before the
    collectives are placed.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"",
           "What to recompute: none, blocks or selective">,
  ];
}

def ClipGradNorm : Pass<"dtc-clip-grad-norm", "mlir::ModuleOp"> {
  let summary = "Clips the gradients by their global norm before the updates";
  let description = [{
    Where the module has `dtc.clip_grad_norm` (the recipe's
    `clip_grad_norm = ...`), as torch.nn.utils.clip_grad_norm_ between
    backward and the optimizer step: `@train_step`'s gradients, as the
    updates receive them (all-reduced: every rank computes the same norm),
    go into one `dtc.sum_squares`, `dtc.clip_coef` makes the factor
    min(1, max_norm / (norm + 1e-6)) from the run's max_norm, and each
    gradient is multiplied by it. The updates move after the last gradient
    (clipping needs them all), in their order. Otherwise nothing changes.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def FoldMomentum : Pass<"dtc-fold-momentum", "mlir::ModuleOp"> {
  let summary = "Folds SGD momentum into the gradient buckets";
  let description = [{
    With SGD momentum and no dampening, Nesterov or weight decay
    (m = mu m + g; w -= lr m), and every collective of `@train_step` a
    planned bucket (dtc-plan-memory) whose sums each feed one update, each
    bucket's momentum buffers are laid out like the bucket, in a region of
    the persistent block of their own (`momentum_offset` in the bucket's
    `dtc.bucket_plan`; each parameter's `state_offset` at its gradient's
    place within it). Each rank then writes g_r + (mu / W) m into the
    momentum buffer where it would have written its gradient (a GEMM that
    produces the gradient accumulates with beta = mu / W, after any other
    producer the gradient is added to it), the bucket's all-reduce sums the
    momentum buffers to the new m, and the update is w -= lr m: no pass
    over the momentum of its own, on either target. Otherwise nothing
    changes. Runs after dtc-plan-memory.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t",
           /*default=*/"::dtc::kDefaultAlignment",
           "Byte alignment of the persistent block's buffers (dtc-plan-memory's)">
  ];
}

def GroupUpdates : Pass<"dtc-group-updates", "mlir::ModuleOp"> {
  let summary = "Groups consecutive parameter updates into one update op each";
  let description = [{
    Each run of consecutive `dtc.apply_gradient` ops of a step (the updates
    of a bucket, after its wait) becomes one `dtc.update_group`: one call of
    the optimizer's kernel for all its parameters on either target (one
    launch on CUDA). A run is split where the momentum of its parameters
    stops or starts being folded (dtc-fold-momentum), so that a group is
    `momentum_folded` as a whole.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
}

def VerifyBackendContract : Pass<"dtc-verify-backend-contract", "mlir::ModuleOp"> {
  let summary = "Checks that the IR is fully planned for the back end";
  let description = [{
    The contract between planning and emission (as torch-mlir's backend
    contract), checked with one diagnostic per violation:
    - the module has its `dtc.recipe`, `dtc.optimizer` and `dtc.persistent`;
      every `dtc.param` a `dtc.placement` whose value and optimizer state lie
      inside the persistent block;
    - `@train_step`, `@grad_step` and `@eval_step` exist (dtc-derive-steps),
      each with one block, the input and the labels as arguments, and a
      `dtc.arena`;
    - elementwise ops appear only inside `dtc.fused` (dtc-fuse-elementwise),
      parameter updates only as `dtc.update_group` (dtc-group-updates);
    - every tensor result that is not tied to an operand, a parameter or a
      block argument has a `dtc.offsets` entry, and its buffer lies inside
      its region of the arena (per sample when batched, else fixed);
    - every gradient collective has a `dtc.bucket_plan` inside the fixed
      region, and its gradients lie inside the bucket;
    - the target's rules (the module's `dtc.target`): for CUDA, no fused
      max-pool and batch-norm gradient (the CPU's kernel) and no
      channels-last or blocked activations (the CUDA kernels are NCHW).
      Every rule of a target is here, in one place.
    The pipeline ends with it, and the emitters check it before printing, so
    hand-written or edited IR that is not fully planned is rejected with a
    diagnostic at the op, never printed.
  }];
}

def Predict : Pass<"dtc-predict", "mlir::ModuleOp"> {
  let summary = "Predicts a training step's time and a rank's peak memory (the cost model)";
  let description = [{
    Records on the module (`dtc.prediction`) what the cost model
    (passes/CostModel.h) predicts of the planned training step on a machine:
    `machine`, a file `train --calibrate` wrote (docs/runtime.md), or the
    built-in defaults. Each kernel of @train_step (and, with gradient
    accumulation, of @accumulate_step once a micro-batch but the last) is
    costed by its shape: GEMMs at the measured rate of the nearest shapes,
    convolutions by their FLOPs, attention as its products, everything else
    by the bytes it reads and writes; each collective runs on a channel of
    its own from its start and a wait blocks until it completes (with the
    machine's `deferred_starts`, at its wait). A rank's peak memory is what
    it allocates for the model, its batch buffer, a bucket of the
    collectives' temporaries and the process's base. The program prints its
    measurement next to the prediction. Runs after dtc-plan-memory; changes
    nothing else.
  }];
  let dependentDialects = ["dtc::DtcDialect"];
  let options = [
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "A machine description (train --calibrate); empty: the defaults">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"0",
           "The world size (0: the module's dtc.shard ranks, else the machine's)">,
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "The memory per rank the plan was chosen under, recorded (0: none)">,
  ];
}

def Report : Pass<"dtc-report", "mlir::ModuleOp"> {
  let summary = "Prints the compile-time plan of a planned module";
  let description = [{
    Prints, from the planned IR (the PlanReport analysis, passes/PlanReport.h),
    each parameter with its size and place, the persistent block, each
    step's arena at the recipe's batch against its size without reuse, the
    gradient buckets in all-reduce order with the parameters they carry and
    the bytes all-reduced per step, the GEMM FLOPs of a training step, and
    the peak memory of a step. `dtc --report` runs it after the pipeline.
    Changes nothing.
  }];
}

def LowerToRuntime : Pass<"dtc-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lowers the planned steps to runtime calls (the dtcrt dialect)";
  let description = [{
    The back end's one lowering, the same for both targets: each step
    (`@train_step`, `@grad_step`, `@eval_step`), checked against the backend
    contract first, becomes a function without arguments whose body is
    dtcrt ops: the planned buffers (`dtcrt.buffer`), the sizes, and one call
    per kernel of the runtime, in order (passes/lowering: one file per op
    family). The step writes its outputs (loss, metrics) before its first
    update; with folded momentum (dtc-fold-momentum) each folded gradient is
    accumulated into its momentum buffer where it is made (a GEMM with
    beta, else dtcrt.momentum_accumulate after its producer), the bucket's
    all-reduce runs on the momentum buffers, and the update applies them;
    the traced step's computing ops are wrapped in trace spans. Each
    lowered step carries its arena's fixed region (`dtcrt.fixed_bytes`).
    What the runtime reads besides the steps is decided here too and
    recorded in one `dtcrt.spec` (passes/lowering/Spec.cpp): the target
    (from the module's `dtc.target`), the parameters with their
    initializers' fans, the buffers, the bucket plan, the memory sizes, the
    classes, ignore index and id limit, the outputs, the recipe and the
    optimizer in the runtime's enums; the dtc parameters, buffers and
    module attributes it replaces are removed. The C++ and CUDA printers
    print the result and decide nothing.
  }];
  let dependentDialects = ["dtcrt::DtcrtDialect", "mlir::func::FuncDialect"];
}

#endif // DTC_PASSES_TD
