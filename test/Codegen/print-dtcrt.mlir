// RUN: dtc %s --emit=cpp | FileCheck %s
// RUN: dtc %s --emit=mlir-runtime | dtc-opt | FileCheck %s --check-prefix=ROUND
// RUN: not dtc %s --target=cuda --emit=cpp 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not dtc %s --emit=mlir 2>&1 | FileCheck %s --check-prefix=LOWERED
// The printers print a dtcrt module and decide nothing: this one is written
// by hand (no dtc op, no pass), and every number of the program's spec below
// is the one written here (the fans, the arena with its alignment, the
// classes), as each step's calls are.

// CHECK: static void evalStep(const dtc::rt::StepArgs &a) {
// CHECK-NEXT:   const int64_t B = a.batch;
// CHECK:   char *const S = a.arena + 96;
// CHECK:   const dtc::rt::HostContext c{};
// CHECK:   float *v0 = reinterpret_cast<float *>(P + 0);
// CHECK:   float *v1 = reinterpret_cast<float *>(S + 0 * B);
// CHECK:   dtc::kern::gemm(c, false, true, B, 3, 2, 1.0f, const_cast<float *>(a.x), v0, 0.0f, v1);
// CHECK:   dtc::kern::crossEntropy(c, v1, a.yClass, B, 3, 7, v2);
// CHECK: static void trainStep(
// CHECK:   const dtc::rt::Request r{{[0-9]+}} = a.comm->allreduceStart(0, v{{[0-9]+}}, 6);
// CHECK: static const dtc::rt::ParamSpec kParams[] = {
// CHECK-NEXT:     {"w", 2, {3, 2, 0, 0, 0, 0}, 6, 0, dtc::rt::InitKind::HeNormal, 0.25, 0.5, 11, 13, 64},
// CHECK-NEXT: };
// CHECK: static const dtc::rt::BufferSpec kBuffers[] = {
// CHECK-NEXT:     {"running", dtc::rt::ElementType::I64, 0, {0, 0, 0, 0, 0, 0}, 1, 32, 0},
// CHECK: static const int32_t kBucket0Params[] = {0};
// CHECK: {0, 6, 1, kBucket0Params},
// CHECK: static const char *const kOutputNames[] = {"loss"};
// CHECK:   s.name = "hand";
// CHECK:   s.inputRank = 1;
// CHECK:   s.inputShape[0] = 2;
// CHECK:   s.inputIdLimit = 0;
// CHECK:   s.ignoreIndex = 7;
// CHECK:   s.numClasses = 3;
// CHECK:   s.persistentBytes = 128;
// CHECK:   s.arenaPerSample = 16;
// CHECK:   s.arenaFixed = 160; // + alignment of the fixed region
// CHECK:   s.predictWidth = 0;
// CHECK:   s.accumulateStep = nullptr;
// CHECK:   s.recipe.data.kind = dtc::rt::DatasetKind::Synthetic;
// CHECK:   s.recipe.seed = 5ULL;
// CHECK:   s.recipe.optimizer = dtc::rt::OptimizerKind::Adam;
// CHECK:   s.recipe.hyper.lr = 0.25f;
// CHECK:   s.recipe.schedule.kind = 1;
// CHECK:   s.recipe.schedule.warmup = 3;
// CHECK:   s.recipe.accumulate = 1;
// CHECK:   s.recipe.hyper.maxGradNorm = 2.0f;
// CHECK:   return dtc::rt::runMain(argc, argv, makeSpec());

// ROUND: dtcrt.spec <cpu>
// ROUND: #dtcrt.param<"w", [3, 2], offset = 0, state_offset = 64, init = HeNormal

// TARGET: error: '{{.*}}print-dtcrt.mlir' is lowered for the CPU target (its dtcrt.spec); --target=cuda cannot change it
// LOWERED: error: '{{.*}}print-dtcrt.mlir' is lowered to runtime calls already

module {
  dtcrt.spec <cpu> {
    name = "hand", source = "hand.dsl",
    input = #dtcrt.input<[2], numel = 2, type = F32, id_limit = 0>,
    labels = #dtcrt.labels<Class, numel = 1, classes = 3, ignore_index = 7>,
    params = [#dtcrt.param<"w", [3, 2], offset = 0, state_offset = 64, init = HeNormal, a = 0.25 : f64, b = 0.5 : f64, fan_in = 11, fan_out = 13>],
    buffers = [#dtcrt.buffer<"running", I64, [], offset = 32, value = 0.0 : f64>],
    buckets = [#dtcrt.bucket<0, 6, [0]>],
    memory = #dtcrt.memory<persistent = 128, params = 32, buffers = 8, states = 2, per_sample = 16, fixed = 160>,
    outputs = ["loss"], predict_width = 0,
    recipe = #dtcrt.recipe<Synthetic, dir = "", train = "", test = "", train_size = 64, test_size = 16, batch = 8, epochs = 1, seed = 5, validation = 0.0 : f64, accumulate = 1>,
    hyper = #dtcrt.hyper<Adam, lr = 0.25 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, nesterov = false, max_grad_norm = 2.0 : f64>,
    schedule = #dtcrt.schedule<Cosine, warmup = 3, decay_steps = 0, min_lr = 0.0 : f64, step_size = 1, gamma = 0.1 : f64>}
  func.func @eval_step() attributes {dtcrt.fixed_bytes = 96 : i64} {
    %x = dtcrt.step_arg input : !dtcrt.ptr<f32>
    %y = dtcrt.step_arg class_labels : !dtcrt.ptr<i32>
    %w = dtcrt.buffer persistent[0] : !dtcrt.ptr<f32>
    %h = dtcrt.buffer per_sample[0] : !dtcrt.ptr<f32>
    %loss = dtcrt.buffer fixed[0] : !dtcrt.ptr<f32>
    %f = dtcrt.constant false
    %t = dtcrt.constant true
    %b = dtcrt.size 1 batched
    %n = dtcrt.size 3
    %k = dtcrt.size 2
    %one = dtcrt.constant 1.0 : f32
    %zero = dtcrt.constant 0.0 : f32
    dtcrt.gemm(%f, %t, %b, %n, %k, %one, %x, %w, %zero, %h) : i1, i1, i64, i64, i64, f32, !dtcrt.ptr<f32>, !dtcrt.ptr<f32>, f32, !dtcrt.ptr<f32>
    %ignore = dtcrt.constant 7 : i64
    dtcrt.cross_entropy(%h, %y, %b, %n, %ignore, %loss) : !dtcrt.ptr<f32>, !dtcrt.ptr<i32>, i64, i64, i64, !dtcrt.ptr<f32>
    return
  }
  func.func @train_step() attributes {dtcrt.fixed_bytes = 96 : i64} {
    %g = dtcrt.buffer fixed[32] : !dtcrt.ptr<f32>
    %c = dtcrt.size 6
    %r = dtcrt.allreduce_start %g, %c bucket 0 : !dtcrt.ptr<f32>
    dtcrt.wait %r
    return
  }
  func.func @grad_step() attributes {dtcrt.fixed_bytes = 96 : i64} {
    return
  }
}
