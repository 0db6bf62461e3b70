//===- dtc.cpp - The dtc compiler driver: model.dsl -> train --------------===//
//
// parse (frontends/dsl) -> dtc dialect -> dtc pipeline (passes/) -> C++
// (passes/codegen) -> the host C++ compiler, linked with runtime/.
//
//===----------------------------------------------------------------------===//
#include "frontends/dsl/Builtins.h"
#include "frontends/dsl/MLIRGen.h"
#include "frontends/dsl/Parser.h"
#include "passes/CostModel.h"
#include "passes/Passes.h"
#include "passes/PlanReport.h"
#include "passes/Planner.h"
#include "passes/Steps.h"
#include "passes/codegen/Emit.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include "tools/dtc/Config.h"
#include "tools/sanitizer_defaults.h"

using namespace llvm;

namespace {
enum class Emit { MLIR, MLIROpt, MLIRRuntime, Cpp, Exe };

cl::OptionCategory category("dtc options");
cl::opt<std::string> inputFile(cl::Positional,
                               cl::desc("<model.dsl or .mlir at any stage>"),
                               cl::Required, cl::cat(category));
cl::opt<std::string> outputFile("o",
                                cl::desc("Output file (default: train, "
                                         "or stdout for --emit other "
                                         "than exe)"),
                                cl::value_desc("file"), cl::cat(category));
cl::opt<Emit> emitKind(
    "emit", cl::desc("What to produce"), cl::init(Emit::Exe),
    cl::values(clEnumValN(Emit::MLIR, "mlir", "the dtc dialect from the DSL"),
               clEnumValN(Emit::MLIROpt, "mlir-opt",
                          "the IR after all passes (planned)"),
               clEnumValN(Emit::MLIRRuntime, "mlir-runtime",
                          "the planned IR lowered to runtime calls (dtcrt), "
                          "which the C++ and CUDA printers print"),
               clEnumValN(Emit::Cpp, "cpp",
                          "the generated source (C++, or CUDA C++ for "
                          "--target=cuda)"),
               clEnumValN(Emit::Exe, "exe", "the train executable (default)")),
    cl::cat(category));
cl::opt<std::string> target(
    "target",
    cl::desc(
        "Code generation target: cpu (C++, oneDNN or OpenBLAS), cuda (CUDA C++ "
        "for nvcc, holding the CPU steps too: train picks the device at "
        "run time), or auto (cuda when this machine has a GPU and dtc "
        "was built with the CUDA runtime, else cpu)"),
    cl::init("auto"), cl::cat(category));
cl::opt<std::string> layout(
    "layout",
    cl::desc("Activation layout of convolutions, pooling and 4-D batch norm: "
             "auto (the default: blocked for the CPU target with oneDNN on a "
             "host with AVX-512, whose convolution kernels run nChw16c; else "
             "nchw), nchw (torch's), channels-last (NHWC between the "
             "convolutions, dtc-channels-last) or blocked (oneDNN's nChw16c "
             "between them, dtc-blocked-layout); the last two for the CPU "
             "target only (docs/passes.md)"),
    cl::init("auto"), cl::cat(category));
cl::opt<std::string> cudaArch("cuda-arch",
                              cl::desc("GPU architecture for nvcc (-arch)"),
                              cl::init("sm_90"), cl::cat(category));
cl::opt<bool> verbose("v", cl::desc("Show the commands dtc runs"),
                      cl::cat(category));
cl::opt<bool> report("report",
                     cl::desc("Print the compile-time plan "
                              "(parameters, arena, peak memory)"),
                     cl::cat(category));
cl::opt<bool>
    noFuse("no-fuse",
           cl::desc("Do not fuse: elementwise ops one kernel each, and "
                    "max-pool gradients not folded into batch norm's"),
           cl::cat(category));
cl::opt<double> bucketMB("bucket-mb",
                         cl::desc("Gradient bucket cap in MiB (PyTorch DDP's "
                                  "bucket_cap_mb; 0: one bucket per "
                                  "parameter)"),
                         cl::init(dtc::kDefaultBucketBytes / 1048576.0),
                         cl::cat(category));
cl::opt<double> firstBucketMB("first-bucket-mb",
                              cl::desc("Cap of the first gradient bucket in "
                                       "MiB (communication starts once it is "
                                       "full)"),
                              cl::init(dtc::kDefaultFirstBucketBytes /
                                       1048576.0),
                              cl::cat(category));
cl::opt<bool> noOverlap("no-overlap",
                        cl::desc("Do not overlap all-reduces with backward "
                                 "(each bucket waits where it starts), nor, "
                                 "sharded, all-gathers with the next step"),
                        cl::cat(category));
cl::opt<bool> noFoldMomentum(
    "no-fold-momentum",
    cl::desc("Do not fold SGD momentum into the gradient buckets (each "
             "rank's share of it added before the all-reduce, "
             "dtc-fold-momentum): the update as torch.optim.SGD computes it, "
             "after the all-reduce"),
    cl::cat(category));
cl::opt<std::string> shardStage(
    "shard",
    cl::desc("Sharded data parallelism (ZeRO's stages; the recipe's shard): "
             "none (replicated, the default), optimizer (1: the optimizer "
             "state), gradients (2: and the gradients) or parameters (3: and "
             "the parameters); a stage number is accepted too, and auto "
             "(the fastest that fits --memory-per-rank). Needs --ranks"),
    cl::value_desc("stage"), cl::cat(category));
cl::opt<int64_t> shardRanks(
    "ranks",
    cl::desc("The world size the shards are planned for (the recipe's "
             "ranks); the program refuses to start at another"),
    cl::init(0), cl::cat(category));
cl::opt<std::string> remat(
    "remat",
    cl::desc("Activation recomputation (dtc-rematerialize): none (the "
             "default), blocks (each block instance keeps its input and "
             "recomputes its forward in backward, as torch.utils.checkpoint) "
             "or selective (keep the GEMMs', convolutions' and attention's "
             "results, recompute the elementwise and normalization work), or "
             "auto (the fastest plan that fits --memory-per-rank)"),
    cl::init("none"), cl::cat(category));
cl::opt<std::string> memoryPerRank(
    "memory-per-rank",
    cl::desc("Choose the plan (sharding stage, recomputation, micro-batch "
             "and accumulation, bucket size) whose predicted peak memory a "
             "rank fits this budget and whose predicted step is the fastest: "
             "bytes, or with K, M, G or T (powers of 1024: 6G, 1.5GiB); "
             "--report prints the plans considered"),
    cl::value_desc("size"), cl::cat(category));
cl::opt<std::string> machineFile(
    "machine",
    cl::desc("The machine the cost model predicts for: a file of train "
             "--calibrate (default: the cached one for --ranks, "
             "<cache>/machine-<N>ranks.json, else built-in defaults)"),
    cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> shardGroups(
    "shard-groups",
    cl::desc("What stage 3 gathers at once (and every stage reduce-scatters): "
             "bucket (the default: buckets of --bucket-mb) or block (each "
             "block instance's parameters, as FSDP wraps per layer)"),
    cl::init("bucket"), cl::cat(category));
cl::opt<int64_t> shardPrefetch(
    "shard-prefetch",
    cl::desc("Stage 3: the gathers started ahead of the one being read "
             "(default 1)"),
    cl::init(1), cl::cat(category));
cl::opt<std::string> cxx("cxx", cl::desc("Host C++ compiler"),
                         cl::init(DTC_DEFAULT_CXX), cl::cat(category));
// -O2, not -O3: g++ -O3 grows faster than linearly in the size of the step
// functions (4.5x slower at 200 layers) for no measured speed-up of the
// trained programs (docs/performance.md).
cl::opt<std::string> cxxFlags("cxx-flags",
                              cl::desc("Optimization flags for the host "
                                       "compiler (nvcc passes them on with "
                                       "-Xcompiler)"),
                              cl::init("-O2 -march=native"), cl::cat(category));
cl::opt<bool> staticLibs(
    "static-libs",
    cl::desc("Link OpenBLAS (with libgfortran and libquadmath), zlib and "
             "the C++ runtime statically, so that train runs where none of "
             "them is installed (CUDA's libraries and the C library stay "
             "shared); implies --gemm=openblas"),
    cl::cat(category));
// Prints the DSL's builtins (the registry, frontends/dsl/Builtins.h) as the
// Markdown table of docs/dsl.md, and exits.
cl::opt<bool> listBuiltins(
    "list-builtins",
    cl::desc("Print the DSL's builtin functions (the table of docs/dsl.md) "
             "and exit"),
    cl::ValueDisallowed, cl::cat(category), cl::callback([](const bool &) {
      dtc::dsl::printBuiltinTable(llvm::outs());
      std::exit(0);
    }));
cl::opt<std::string> gemmEngine(
    "gemm",
    cl::desc("CPU GEMM engine: onednn (oneDNN's JIT kernels, the default "
             "where dtc was built with it), openblas, or auto (onednn if "
             "available, openblas with --static-libs)"),
    cl::init("auto"), cl::cat(category));

/// Whether this machine has an NVIDIA GPU (the driver lists it).
bool hasGpu() {
  std::error_code ec;
  for (sys::fs::directory_iterator it("/proc/driver/nvidia/gpus", ec), end;
       !ec && it != end; it.increment(ec))
    return true;
  return false;
}

int fail(const Twine &msg) {
  llvm::errs() << "dtc: error: " << msg << "\n";
  return 1;
}

/// "6G", "1.5GiB", "512M", "1048576": bytes (K, M, G, T: powers of 1024).
std::optional<int64_t> parseSize(StringRef text) {
  StringRef s = text.trim();
  StringRef digits =
      s.take_while([](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  StringRef unit = s.drop_front(digits.size()).trim();
  double value;
  if (digits.empty() || digits.getAsDouble(value) || !(value > 0))
    return std::nullopt;
  unit.consume_back("B");
  unit.consume_back("i");
  double scale = 1;
  if (unit.size() > 1)
    return std::nullopt;
  if (!unit.empty()) {
    size_t at = StringRef("KMGT").find(char(toupper(unit[0])));
    if (at == StringRef::npos)
      return std::nullopt;
    scale = double(int64_t(1) << (10 * (at + 1)));
  }
  if (value * scale >= 9.2e18)
    return std::nullopt;
  return int64_t(value * scale);
}

/// The bytes train will hold of the data set the recipe names (0 when it
/// names none, or it cannot be read): IDX files as floats (a gzipped
/// file's size from its trailer), a text's files as bytes (symbolic links
/// skipped, as train does), CSV files as large as on disk, synthetic
/// samples as floats of the model's input and labels.
int64_t estimateDataBytes(mlir::ModuleOp module) {
  auto *dialect = module->getContext()->getLoadedDialect<dtc::DtcDialect>();
  dtc::RecipeAttr r = dialect->getRecipeAttrHelper().getAttr(module);
  if (!r)
    return 0;
  auto fileBytes = [](const Twine &path) -> int64_t {
    sys::fs::file_status st;
    if (sys::fs::status(path, st, /*follow=*/false) ||
        st.type() != sys::fs::file_type::regular_file)
      return 0;
    return int64_t(st.getSize());
  };
  // An IDX file's uncompressed bytes (a .gz's ISIZE trailer), less its
  // header, times 4 (floats, or int32 labels).
  auto idx = [&](StringRef name, int64_t header) -> int64_t {
    SmallString<256> raw(r.getDir());
    sys::path::append(raw, name);
    if (int64_t n = fileBytes(raw))
      return std::max<int64_t>(0, n - header) * 4;
    auto gz = MemoryBuffer::getFile(raw + ".gz");
    if (!gz || (*gz)->getBufferSize() < 4)
      return 0;
    const unsigned char *end =
        reinterpret_cast<const unsigned char *>((*gz)->getBufferEnd());
    const int64_t n = int64_t(end[-4]) | int64_t(end[-3]) << 8 |
                      int64_t(end[-2]) << 16 | int64_t(end[-1]) << 24;
    return std::max<int64_t>(0, n - header) * 4;
  };
  switch (r.getData()) {
  case dtc::DataKind::IDX:
    return idx("train-images-idx3-ubyte", 16) +
           idx("train-labels-idx1-ubyte", 8) +
           idx("t10k-images-idx3-ubyte", 16) + idx("t10k-labels-idx1-ubyte", 8);
  case dtc::DataKind::Text: {
    if (int64_t n = fileBytes(r.getTrain()))
      return n;
    int64_t total = 0;
    std::error_code ec;
    for (sys::fs::recursive_directory_iterator it(r.getTrain(), ec, false), end;
         !ec && it != end; it.increment(ec))
      total += fileBytes(it->path());
    return total;
  }
  case dtc::DataKind::CSV:
    return fileBytes(r.getTrain()) + fileBytes(r.getTest());
  case dtc::DataKind::Synthetic: {
    int64_t perSample = 0;
    if (auto fwd =
            module.lookupSymbol<mlir::func::FuncOp>(dtc::steps::kForward))
      for (mlir::Type t : fwd.getArgumentTypes())
        if (auto tensor = dyn_cast<mlir::RankedTensorType>(t)) {
          int64_t n = 4;
          for (int64_t d : tensor.getShape().drop_front())
            n *= d;
          perSample += n;
        }
    return (r.getTrainSize() + r.getTestSize()) * perSample;
  }
  default:
    return 0;
  }
}

/// The cache directory train --calibrate writes to ($DTC_CACHE_DIR, else
/// $XDG_CACHE_HOME/dtc, else $HOME/.cache/dtc; "" when none is set): the
/// runtime's defaultDataCacheDir (runtime/lib/data/data_cache.h).
std::string cacheDir() {
  if (const char *d = getenv("DTC_CACHE_DIR"); d && *d)
    return StringRef(d) == "off" ? "" : d;
  if (const char *d = getenv("XDG_CACHE_HOME"); d && *d == '/')
    return std::string(d) + "/dtc";
  if (const char *d = getenv("HOME"); d && *d == '/')
    return std::string(d) + "/.cache/dtc";
  return "";
}

/// Whether `compiler` is GCC (not clang, which defines __GNUC__ too): asks
/// its preprocessor, whatever the compiler is called (c++, g++-12, ...).
bool isGcc(StringRef compiler) {
  SmallString<128> out;
  if (sys::fs::createTemporaryFile("dtc-cxx-macros", "txt", out))
    return false;
  std::optional<StringRef> redirects[] = {StringRef(""), StringRef(out),
                                          StringRef("")};
  StringRef args[] = {compiler, "-dM", "-E", "-x", "c++", "/dev/null"};
  int rc = sys::ExecuteAndWait(compiler, args, std::nullopt, redirects);
  auto text = MemoryBuffer::getFile(out);
  sys::fs::remove(out);
  if (rc != 0 || !text)
    return false;
  StringRef macros = (*text)->getBuffer();
  return macros.contains("#define __GNUC__ ") &&
         !macros.contains("#define __clang__ ");
}

/// Writes `text` to `path` (or stdout for "-"); nothing is left on failure.
int writeOutput(StringRef path, function_ref<void(raw_ostream &)> write) {
  std::string err;
  auto out = mlir::openOutputFile(path, &err);
  if (!out)
    return fail(err);
  write(out->os());
  out->keep();
  return 0;
}

/// Runs the host compiler (nvcc for CUDA) on `source`, producing `output`
/// atomically.
int compileAndLink(StringRef source, StringRef output, bool cuda) {
  // A fresh name in the output's directory, created exclusively (a file or
  // symlink planted there is never written through), renamed at the end.
  // A character device or FIFO (-o /dev/null), or a link to one, is written
  // in place, as train writes them: renamed over, /dev/null would become a
  // regular file of the program's bytes. The program is built in the
  // temporary directory and copied into it.
  sys::fs::file_status status;
  const bool inPlace = !sys::fs::status(output, status) &&
                       (status.type() == sys::fs::file_type::character_file ||
                        status.type() == sys::fs::file_type::fifo_file);
  SmallString<256> tmpOut;
  {
    int tmpFd;
    if (auto ec =
            inPlace ? sys::fs::createTemporaryFile("dtc-out", "", tmpFd, tmpOut)
                    : sys::fs::createUniqueFile(output + ".dtc-tmp-%%%%%%",
                                                tmpFd, tmpOut))
      return fail("cannot write '" + output + "': " + ec.message());
    sys::fs::closeFile(tmpFd);
  }
  SmallVector<StringRef> flags;
  StringRef(cxxFlags).split(flags, ' ', -1, false);
  for (StringRef f : flags)
    if (cuda && f.contains(',') && !f.starts_with("-Wl,"))
      return fail("nvcc cannot pass '" + f +
                  "' to the host compiler (it splits "
                  "-Xcompiler arguments at commas); give it without commas");
  std::string compiler = cuda ? std::string(DTC_NVCC) : cxx.getValue();
  auto path = sys::findProgramByName(compiler);
  if (!path)
    return fail("cannot find the " + Twine(cuda ? "CUDA" : "C++") +
                " compiler '" + compiler + "'");
  std::vector<std::string> args = {*path, "-std=c++17"};
  if (cuda)
    args.push_back("-arch=" + cudaArch); // ptxas optimizes device code at -O3
  // Generated code never reads errno: math calls are then free of side
  // effects, and loops that call them can be vectorized.
  args.push_back(cuda ? "-Xcompiler=-fno-math-errno" : "-fno-math-errno");
  // GCC at -O2 vectorizes only loops that need no scalar remainder, and a
  // fused loop over B * N elements does (deep_mlp's GELU gradient stayed
  // scalar): its dynamic cost model (before --cxx-flags, which may undo it).
  if (!cuda && isGcc(*path))
    args.push_back("-fvect-cost-model=dynamic");
  // A sanitizer build's runtime needs its programs built the same way.
  if (!cuda && *DTC_SANITIZE_FLAGS) {
    SmallVector<StringRef> san;
    StringRef(DTC_SANITIZE_FLAGS).split(san, ' ', -1, false);
    for (StringRef f : san)
      args.push_back(f.str());
  }
  // glibc's vector math (dtc/vector_math.h) where the program is for this
  // machine; --static-libs programs are for others.
  const bool vectorMath = !cuda && !staticLibs && *DTC_VECTOR_MATH_LINK_LIBS;
  for (StringRef f : flags) {
    if (!cuda) {
      args.push_back(f.str());
    } else if (f.starts_with("-Wl,")) { // linker options: nvcc's own channel
      SmallVector<StringRef> parts;
      f.drop_front(4).split(parts, ',', -1, false);
      for (StringRef p : parts) {
        args.push_back("-Xlinker");
        args.push_back(p.str());
      }
    } else {
      args.push_back("-Xcompiler=" +
                     f.str()); // the host compile; -O2 by default
    }
  }
  if (!cuda && !vectorMath)
    args.push_back("-DDTC_NO_VECTOR_MATH");
  args.push_back("-I" DTC_RUNTIME_INCLUDE_DIR);
  args.push_back(source.str());
  args.push_back("-o");
  args.push_back(tmpOut.str().str());
  // The GEMM engine: an object file, linked whole (runtime/lib/kernels/gemm).
  const bool onednn = gemmEngine == "onednn";
  args.push_back(onednn ? DTC_GEMM_ONEDNN_LIBRARY : DTC_GEMM_OPENBLAS_LIBRARY);
  // The CUDA runtime uses the CPU runtime: it goes first.
  if (cuda)
    args.push_back(DTC_RUNTIME_CUDA_LIBRARY);
  args.push_back(DTC_RUNTIME_LIBRARY);
  SmallVector<StringRef> libs;
  StringRef(onednn ? DTC_GEMM_ONEDNN_LINK_LIBS : DTC_GEMM_OPENBLAS_LINK_LIBS)
      .split(libs, ' ', -1, false);
  if (cuda)
    StringRef(DTC_RUNTIME_CUDA_LINK_LIBS).split(libs, ' ', -1, false);
  if (vectorMath)
    StringRef(DTC_VECTOR_MATH_LINK_LIBS).split(libs, ' ', -1, false);
  StringRef(DTC_RUNTIME_LINK_LIBS).split(libs, ' ', -1, false);
  // With --static-libs, the archives (in Debian's -dev packages; OpenBLAS's
  // Fortran runtime comes with GCC) by file name: nvcc does not keep
  // -Bstatic/-Bdynamic around the libraries they should apply to.
  for (StringRef l : libs) {
    if (staticLibs && l == "-lopenblas") {
      for (const char *a :
           {"-l:libopenblas.a", "-l:libgfortran.a", "-l:libquadmath.a"})
        args.push_back(a);
    } else if (staticLibs && l == "-ldeflate") {
      args.push_back("-l:libdeflate.a");
    } else {
      args.push_back(l.str());
    }
  }
  if (staticLibs)
    for (const char *a : {"-static-libstdc++", "-static-libgcc"})
      args.push_back(cuda ? std::string("-Xcompiler=") + a : std::string(a));
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  if (verbose) {
    for (auto [i, a] : llvm::enumerate(args))
      llvm::errs() << (i ? " " : "") << a;
    llvm::errs() << "\n";
  }
  std::string err;
  int rc = sys::ExecuteAndWait(*path, argRefs, std::nullopt, {}, 0, 0, &err);
  if (rc != 0) {
    sys::fs::remove(tmpOut);
    return fail(
        "the C++ compiler failed" +
        (err.empty() ? Twine(" (exit ") + Twine(rc) + ")" : Twine(": ") + err));
  }
  if (inPlace) {
    auto program = MemoryBuffer::getFile(tmpOut, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
    sys::fs::remove(tmpOut);
    if (!program)
      return fail("cannot write '" + output +
                  "': " + program.getError().message());
    std::error_code ec;
    raw_fd_ostream os(output, ec);
    if (!ec) {
      os << (*program)->getBuffer();
      os.close();
      ec = os.error();
      os.clear_error();
    }
    if (ec)
      return fail("cannot write '" + output + "': " + ec.message());
    return 0;
  }
  if (auto ec = sys::fs::rename(tmpOut, output)) {
    sys::fs::remove(tmpOut);
    return fail("cannot write '" + output + "': " + ec.message());
  }
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "dtc " DTC_VERSION " (MLIR " DTC_MLIR_VERSION ")\n";
  });
  // MLIR's own options: --mlir-print-ir-after-all, --mlir-timing, ...; the
  // passes registered (the hub dtc-opt uses too) so that they can be named.
  dtc::registerAllPasses();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::ParseCommandLineOptions(
      argc, argv,
      "dtc: compiles a model and its training recipe "
      "into a training program\n\n"
      "MLIR's pass-manager, timing and printing options "
      "(--mlir-print-ir-after-all, --mlir-timing, ...) "
      "apply too: dtc --help-hidden lists them\n");
  bool cudaBuilt = StringRef(DTC_RUNTIME_CUDA_LIBRARY).size() > 0;
  if (target != "cpu" && target != "cuda" && target != "auto")
    return fail("unknown target '" + target + "' (expected cpu, cuda, auto)");
  bool cuda = target == "cuda" || (target == "auto" && cudaBuilt && hasGpu());
  if (cuda && !cudaBuilt && emitKind == Emit::Exe)
    return fail("--target=cuda: this dtc was built without the CUDA runtime "
                "(no CUDA toolkit found when it was configured)");
  if (layout != "auto" && layout != "nchw" && layout != "channels-last" &&
      layout != "blocked")
    return fail("unknown layout '" + layout +
                "' (expected auto, nchw, channels-last, blocked)");
  const bool onednnBuilt = StringRef(DTC_GEMM_ONEDNN_LIBRARY).size() > 0;
  if (gemmEngine == "auto")
    gemmEngine = staticLibs ? "openblas" : DTC_GEMM_DEFAULT;
  if (gemmEngine != "onednn" && gemmEngine != "openblas")
    return fail("unknown GEMM engine '" + gemmEngine +
                "' (expected onednn, openblas, auto)");
  if (gemmEngine == "onednn" && staticLibs)
    return fail("--gemm=onednn cannot be linked with --static-libs (Debian "
                "ships no static oneDNN); use --gemm=openblas");
  if (gemmEngine == "onednn" && !onednnBuilt && emitKind == Emit::Exe)
    return fail("--gemm=onednn: this dtc was built without oneDNN "
                "(libdnnl-dev was not installed when it was configured)");
  // oneDNN's AVX-512 convolutions run on nChw16c: blocked activations take
  // their reorders out of the step (docs/performance.md). The program is
  // built for this host (-march=native), so its ISA decides.
  std::string activations = layout;
  if (activations == "auto")
    activations =
        !cuda && gemmEngine == "onednn" && __builtin_cpu_supports("avx512f")
            ? "blocked"
            : "nchw";

  // The output's directory is checked before any work, in dtc's words (the
  // linker would say "cannot open output file ...dtc-tmp").
  std::string out = outputFile.empty() ? (emitKind == Emit::Exe ? "train" : "-")
                                       : outputFile.getValue();
  if (out != "-") {
    SmallString<256> dir(sys::path::parent_path(out));
    if (dir.empty())
      dir = ".";
    if (sys::fs::is_directory(out))
      return fail("cannot write '" + out + "': it is a directory");
    if (!sys::fs::is_directory(dir))
      return fail("cannot write '" + out + "': the directory '" + dir +
                  "' does not exist");
    if (sys::fs::access(dir, sys::fs::AccessMode::Write))
      return fail("cannot write '" + out + "': the directory '" + dir +
                  "' is not writable");
  }

  // One timing tree for the whole compile (--mlir-timing): the front end,
  // each pass, emission and the host compiler.
  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope rootTiming = timing.getRootScope();

  auto file = MemoryBuffer::getFile(inputFile, /*IsText=*/true);
  if (!file)
    return fail("cannot open '" + inputFile +
                "': " + file.getError().message());
  SourceMgr sourceMgr;
  StringRef source = (*file)->getBuffer();
  sourceMgr.AddNewSourceBuffer(std::move(*file), SMLoc());

  mlir::MLIRContext context;
  mlir::DialectRegistry registry;
  dtc::registerDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  // A model: DSL source, or dtc IR at any stage (the pipeline's passes
  // leave IR they have already transformed as it is).
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (StringRef(inputFile).ends_with(".mlir")) {
    mlir::TimingScope t = rootTiming.nest("parse .mlir");
    module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
    if (!module)
      return 1;
  } else {
    std::optional<dtc::dsl::Program> program;
    {
      mlir::TimingScope t = rootTiming.nest("parse");
      program = dtc::dsl::parse(source, inputFile, &context);
    }
    if (!program)
      return 1;
    mlir::TimingScope t = rootTiming.nest("mlirgen");
    module = dtc::dsl::buildModule(*program, inputFile, &context);
    if (!module)
      return 1;
  }
  // IR already lowered to runtime calls (a dtcrt module, with its
  // dtcrt.spec) goes to the printers as it is, for the target it was
  // lowered for.
  if (dtcrt::SpecOp spec = dtc::specOf(*module)) {
    const bool specCuda = spec.getTarget() == dtcrt::Target::Cuda;
    if (target.getNumOccurrences() && target != "auto" && specCuda != cuda)
      return fail("'" + inputFile + "' is lowered for the " +
                  (specCuda ? "CUDA" : "CPU") +
                  " target (its dtcrt.spec); --target=" + target +
                  " cannot change it");
    cuda = specCuda;
    if (cuda && !cudaBuilt && emitKind == Emit::Exe)
      return fail("'" + inputFile +
                  "' is for the CUDA target: this dtc was "
                  "built without the CUDA runtime");
    if (emitKind == Emit::MLIR || emitKind == Emit::MLIROpt)
      return fail("'" + inputFile +
                  "' is lowered to runtime calls already; "
                  "it can be printed (--emit=cpp) or compiled");
    if (emitKind == Emit::MLIRRuntime)
      return writeOutput(out, [&](raw_ostream &os) { module->print(os); });
  } else {
    // The target, set once on the module: the passes that depend on it and
    // the backend contract (which owns the target's rules) read it there.
    {
      auto *dialect = context.getLoadedDialect<dtc::DtcDialect>();
      dialect->getTargetAttrHelper().setAttr(
          *module, dtc::TargetAttr::get(&context, cuda ? dtc::Target::Cuda
                                                       : dtc::Target::Cpu));
    }
    // The sharding: the command line's over the recipe's.
    if (shardStage.getNumOccurrences() || shardRanks.getNumOccurrences()) {
      auto *dialect = context.getLoadedDialect<dtc::DtcDialect>();
      dtc::ShardAttr recipe = dialect->getShardAttrHelper().getAttr(*module);
      std::optional<dtc::ShardStage> stage =
          recipe ? recipe.getStage() : dtc::ShardStage::None;
      if (shardStage.getNumOccurrences() && shardStage != "auto") {
        StringRef s = shardStage;
        stage = s.size() == 1 && s[0] >= '0' && s[0] <= '3'
                    ? dtc::ShardStage(s[0] - '0')
                    : dtc::symbolizeShardStage(s);
        if (!stage)
          return fail("unknown --shard '" + shardStage +
                      "' (expected none, optimizer, gradients, parameters, "
                      "0 to 3, or auto)");
      }
      if (shardRanks.getNumOccurrences() && shardRanks < 1)
        return fail("--ranks must be >= 1");
      int64_t ranks = shardRanks.getNumOccurrences()
                          ? int64_t(shardRanks)
                          : (recipe ? recipe.getRanks() : 0);
      dialect->getShardAttrHelper().setAttr(
          *module, dtc::ShardAttr::get(&context, *stage, ranks));
    }
    if (emitKind == Emit::MLIR)
      return writeOutput(out, [&](raw_ostream &os) { module->print(os); });

    mlir::PassManager pm(&context);
    dtc::PipelineOptions options;
    options.fuse = !noFuse;
    if (bucketMB < 0 || firstBucketMB < 0)
      return fail("bucket sizes must be >= 0");
    options.bucketBytes = int64_t(bucketMB * 1048576.0);
    options.firstBucketBytes = int64_t(firstBucketMB * 1048576.0);
    options.overlap = !noOverlap;
    options.foldMomentum = !noFoldMomentum;
    if (shardGroups != "bucket" && shardGroups != "block")
      return fail("unknown --shard-groups '" + shardGroups +
                  "' (expected bucket, block)");
    if (shardPrefetch < 1)
      return fail("--shard-prefetch must be >= 1");
    if (remat != "none" && remat != "blocks" && remat != "selective" &&
        remat != "auto")
      return fail("unknown --remat '" + remat +
                  "' (expected none, blocks, selective, auto)");
    options.remat = remat == "auto" ? "none" : remat.getValue();
    options.shardByBlock = shardGroups == "block";
    options.shardPrefetch = shardPrefetch;
    options.channelsLast = activations == "channels-last";
    options.blocked = activations == "blocked";
    // IR that already has its training step (a .mlir input) keeps it.
    options.autodiff = !module->lookupSymbol(dtc::steps::kTrain);

    // The machine the cost model predicts for: --machine, else the one
    // train --calibrate cached for this world size, else the defaults.
    auto *dialect = context.getLoadedDialect<dtc::DtcDialect>();
    dtc::ShardAttr planned = dialect->getShardAttrHelper().getAttr(*module);
    const int64_t ranks =
        planned && planned.getRanks() > 0 ? planned.getRanks() : 1;
    dtc::Machine machine = dtc::Machine::defaults(ranks);
    {
      std::string path = machineFile;
      if (path.empty() && !cacheDir().empty()) {
        std::string cached =
            cacheDir() + "/machine-" + std::to_string(ranks) + "ranks.json";
        if (sys::fs::exists(cached))
          path = cached;
      }
      if (!path.empty()) {
        std::string error;
        std::optional<dtc::Machine> loaded = dtc::Machine::load(path, error);
        if (!loaded)
          return fail("--machine: " + error);
        machine = std::move(*loaded);
        options.machine = path;
        if (machine.ranks != ranks)
          llvm::errs() << "dtc: warning: '" << path << "' was measured at "
                       << machine.ranks << " rank"
                       << (machine.ranks == 1 ? "" : "s")
                       << ", this program is planned for " << ranks
                       << ": its communication is predicted from the other "
                          "world size's\n";
      }
    }
    // The plan: chosen by the cost model where asked (a budget, or auto).
    int64_t budget = 0;
    if (memoryPerRank.getNumOccurrences()) {
      std::optional<int64_t> b = parseSize(memoryPerRank);
      if (!b)
        return fail("--memory-per-rank '" + memoryPerRank +
                    "': expected a size such as 6G, 512M or 1.5GiB");
      budget = *b;
    }
    const bool autoShard = shardStage == "auto", autoRemat = remat == "auto";
    if (budget > 0 || autoShard || autoRemat) {
      if (autoShard && !shardRanks.getNumOccurrences() &&
          !(planned && planned.getRanks() > 0))
        return fail("--shard=auto needs --ranks (the world size to plan for)");
      dtc::PlanRequest request;
      request.ranks = ranks;
      request.budget = budget;
      request.dataBytes = estimateDataBytes(*module);
      request.machine = machine;
      if (!autoShard &&
          (shardStage.getNumOccurrences() ||
           (planned && planned.getStage() != dtc::ShardStage::None)))
        request.stage = planned ? planned.getStage() : dtc::ShardStage::None;
      if (!autoRemat && remat.getNumOccurrences())
        request.remat = remat.getValue();
      if (bucketMB.getNumOccurrences())
        request.bucketBytes = options.bucketBytes.getValue();
      mlir::FailureOr<dtc::Plan> plan;
      std::string error;
      {
        mlir::TimingScope t = rootTiming.nest("plan");
        plan = dtc::choosePlan(*module, options, request,
                               report ? &llvm::outs() : nullptr, &error);
      }
      if (mlir::failed(plan))
        return fail(error);
      dtc::applyPlan(*module, options, *plan, ranks);
      options.budget = budget;
    }
    dtc::buildPipeline(pm, options);
    if (report) // the plan, as an analysis of the planned IR (dtc-report)
      pm.addPass(dtc::createReport());
    // (--report: the module as the front end made it, planned again under
    // each stage of sharding and world size.)
    mlir::OwningOpRef<mlir::ModuleOp> frontEnd;
    if (report)
      frontEnd = module->clone();
    if (mlir::failed(mlir::applyPassManagerCLOptions(pm)))
      return 1;
    {
      mlir::TimingScope t = rootTiming.nest("passes");
      pm.enableTiming(t);
      if (mlir::failed(pm.run(*module)))
        return 1;
    }
    if (report) {
      dtc::ShardAttr shard = context.getLoadedDialect<dtc::DtcDialect>()
                                 ->getShardAttrHelper()
                                 .getAttr(*frontEnd);
      if (mlir::failed(dtc::printShardingReport(
              *frontEnd, options, shard ? shard.getRanks() : 0, llvm::outs())))
        return 1;
      // The cost model's step, by kernel (against a --trace of the run).
      dtc::Prediction p = dtc::predict(*module, machine);
      llvm::outs() << "predicted step (machine: " << machine.source
                   << "): " << dtc::formatSeconds(p.stepSeconds)
                   << " = kernels " << dtc::formatSeconds(p.computeSeconds)
                   << " + waiting for collectives "
                   << dtc::formatSeconds(p.commSeconds) << "; a rank's peak "
                   << dtc::formatBytes(p.peakBytes)
                   << " (the data set not included)\n";
      for (auto &[kind, seconds] : p.kernelSeconds)
        llvm::outs() << llvm::format("  %-28s %10s %5.1f%%\n", kind.c_str(),
                                     dtc::formatSeconds(seconds).c_str(),
                                     100.0 * seconds / p.computeSeconds);
    }
    if (emitKind == Emit::MLIROpt)
      return writeOutput(out, [&](raw_ostream &os) { module->print(os); });

    // The one lowering both printers print.
    {
      mlir::PassManager lower(&context);
      lower.addPass(dtc::createLowerToRuntime());
      if (mlir::failed(mlir::applyPassManagerCLOptions(lower)))
        return 1;
      mlir::TimingScope t = rootTiming.nest("lower");
      lower.enableTiming(t);
      if (mlir::failed(lower.run(*module)))
        return 1;
    }
    if (emitKind == Emit::MLIRRuntime)
      return writeOutput(out, [&](raw_ostream &os) { module->print(os); });
  }

  std::string cpp;
  {
    mlir::TimingScope t = rootTiming.nest("emit");
    llvm::raw_string_ostream cppStream(cpp);
    if (mlir::failed(dtc::emitSource(*module, cppStream)))
      return 1;
  }
  if (emitKind == Emit::Cpp)
    return writeOutput(out, [&](raw_ostream &os) { os << cpp; });

  SmallString<128> srcPath;
  int fd;
  if (auto ec = sys::fs::createTemporaryFile("dtc-model", cuda ? "cu" : "cpp",
                                             fd, srcPath))
    return fail("cannot create a temporary file: " + ec.message());
  {
    raw_fd_ostream src(fd, /*shouldClose=*/true);
    src << cpp;
  }
  int rc;
  {
    mlir::TimingScope t = rootTiming.nest("host compile");
    rc = compileAndLink(srcPath, out, cuda);
  }
  sys::fs::remove(srcPath);
  return rc;
}
