//===- options.cpp - The train program's command line (CLI11) ------------===//
#include "options/options.h"

#include "data/data_cache.h"
#include "kernels/gemm/engine.h"
#include "support/error.h"
#include "checkpoint/params.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <iostream>
#include <sys/stat.h>
#include <thread>
#include <type_traits>
#include <vector>

namespace dtc::rt {
namespace {

constexpr const char *kRuntimeVersion = "0.1.0";
// Upper bounds of counts (epochs, batch, steps) and of --comm-timeout.
constexpr int64_t kMaxCount = int64_t(1) << 40;
constexpr double kMaxTimeout = 30 * 86400.0;

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

template <class T> bool parseAs(const std::string &text, T &value) {
  if constexpr (std::is_unsigned_v<T>)
    if (text.find('-') != std::string::npos)
      return false;
  return CLI::detail::lexical_cast(text, value);
}

// --data PATH: a directory is IDX; existing files are CSV ("train[,test]");
// a path that does not exist keeps the recipe's kind (so the error names the
// file that was expected), defaulting to CSV. text:PATH, or any PATH when
// the recipe's data is text: a text file or directory.
void applyDataOption(const std::string &arg, DataSource &src) {
  // synthetic[:TRAIN[,TEST]]: generated data whatever the recipe says.
  if (arg.rfind("synthetic", 0) == 0 &&
      (arg.size() == 9 || arg[9] == ':')) {
    src.kind = DatasetKind::Synthetic;
    if (src.trainSize <= 0)
      src.trainSize = 1024;
    if (src.testSize <= 0)
      src.testSize = 256;
    if (arg.size() > 10) {
      std::string sizes = arg.substr(10);
      size_t comma = sizes.find(',');
      int64_t train = 0, test = src.testSize;
      if (!parseAs(sizes.substr(0, comma), train) || train < 1 || train > kMaxCount ||
          (comma != std::string::npos &&
           (!parseAs(sizes.substr(comma + 1), test) || test < 0 || test > kMaxCount)))
        throw dtc::rt::Error("--data: expected synthetic[:TRAIN[,TEST]] with TRAIN from 1 and "
                             "TEST from 0 to 2^40, got '" + arg + "'");
      src.trainSize = train;
      src.testSize = test;
    }
    return;
  }
  if (arg.rfind("text:", 0) == 0 || src.kind == DatasetKind::Text) {
    src.kind = DatasetKind::Text;
    src.trainPath = arg.rfind("text:", 0) == 0 ? arg.substr(5) : arg;
    src.testPath.clear();
    return;
  }
  const bool recipeHasFiles = src.kind == DatasetKind::IDX || src.kind == DatasetKind::CSV;
  std::string first = arg.substr(0, arg.find(','));
  if (isDirectory(arg))
    src.kind = DatasetKind::IDX;
  else if (isFile(first) || !recipeHasFiles)
    src.kind = DatasetKind::CSV;
  if (src.kind == DatasetKind::IDX) {
    src.dir = arg;
  } else {
    size_t comma = arg.find(',');
    src.trainPath = arg.substr(0, comma);
    src.testPath = comma == std::string::npos ? "" : arg.substr(comma + 1);
  }
}

// Validators with plain messages ("--epochs: expected a positive integer,
// got '0'"); CLI11's own print the type's whole range.

// A number in [min, max] (finite for floating-point options), else
// "expected <what>, got '<text>'". The upper bounds keep every size and
// deadline computed from an option far from overflow.
template <class T> CLI::Validator inRange(T min, T max, std::string what) {
  return CLI::Validator(
      [min, max, what](std::string &text) -> std::string {
        T v;
        bool ok = parseAs(text, v) && v >= min && v <= max;
        if constexpr (std::is_floating_point_v<T>)
          ok = ok && std::isfinite(v);
        if (ok)
          return "";
        return fmt::format("expected {}, got '{}'", what, text);
      },
      "");
}

// Positive and finite (a step, a timeout).
template <class T> CLI::Validator positive(T max, std::string what) {
  return CLI::Validator(
      [max, what](std::string &text) -> std::string {
        T v;
        if (parseAs(text, v) && std::isfinite(v) && v > 0 && v <= max)
          return "";
        return fmt::format("expected {}, got '{}'", what, text);
      },
      "");
}

// Paths: an empty one would be silently ignored.
CLI::Validator nonEmpty() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        return text.empty() ? std::string("expected a path, got an empty string") : "";
      },
      "");
}

CLI::Validator oneOf(std::vector<std::string> choices) {
  return CLI::Validator(
      [choices](std::string &text) -> std::string {
        if (std::find(choices.begin(), choices.end(), text) != choices.end())
          return "";
        return fmt::format("expected one of {}, got '{}'", fmt::join(choices, "|"), text);
      },
      "");
}

} // namespace

std::string optimizerDescription(const ModelSpec &spec, float lr) {
  const Hyper &h = spec.recipe.hyper;
  if (spec.recipe.optimizer == OptimizerKind::SGD)
    return fmt::format("sgd(lr={:g}, momentum={:g}{}, weight_decay={:g})", lr, h.momentum,
                       h.nesterov ? ", nesterov" : "", h.weightDecay);
  return fmt::format("{}(lr={:g}, betas=({:g}, {:g}), eps={:g}, weight_decay={:g})",
                     optimizerName(spec.recipe.optimizer), lr, h.beta1, h.beta2, h.eps,
                     h.weightDecay);
}

Options defaultOptions(const ModelSpec &spec) {
  const RecipeSpec &r = spec.recipe;
  Options o;
  o.data.kind = r.data.kind;
  o.data.dir = r.data.dir ? r.data.dir : "";
  o.data.trainPath = r.data.trainPath ? r.data.trainPath : "";
  o.data.testPath = r.data.testPath ? r.data.testPath : "";
  o.data.trainSize = r.data.trainSize;
  o.data.testSize = r.data.testSize;
  o.data.seed = r.seed; // synthetic data stays fixed when --seed changes
  o.data.cacheDir = defaultDataCacheDir();
  o.data.validation = r.validation;
  o.epochs = r.epochs > 0 ? r.epochs : 1;
  o.batch = r.batch > 0 ? r.batch : 1;
  o.lr = r.hyper.lr;
  o.maxGradNorm = r.hyper.maxGradNorm;
  o.accumulate = r.accumulate > 1 ? r.accumulate : 1;
  const ScheduleSpec &sc = r.schedule;
  if (sc.kind >= 0 && sc.kind <= 3)
    o.schedule.kind = LrSchedule::Kind(sc.kind);
  o.schedule.warmup = sc.warmup;
  o.schedule.decaySteps = sc.decaySteps;
  o.schedule.minLr = sc.minLr;
  if (sc.stepSize > 0) { // a spec with a step schedule (zeros: the defaults)
    o.schedule.stepSize = sc.stepSize;
    o.schedule.gamma = sc.gamma;
  }
  o.seed = r.seed;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

bool Options::isGiven(const char *option) const {
  return std::find(given.begin(), given.end(), option) != given.end();
}

bool overlapAllreduces(Options::Overlap overlap, int coresPerRank, int threads) {
  return overlap == Options::Overlap::On ||
         (overlap == Options::Overlap::Auto && coresPerRank > threads);
}

std::optional<int> parseOptions(int argc, char **argv, const ModelSpec &spec,
                                Options &out) {
  out = defaultOptions(spec);
  CLI::App app(fmt::format("Trains model '{}' (compiled by dtc from {}).", spec.name,
                           spec.source ? spec.source : "?"),
               "train");
  app.set_version_flag("--version",
                       fmt::format("train: model {} from {} (dtc runtime {}, gemm {})", spec.name,
                                   spec.source ? spec.source : "?", kRuntimeVersion,
                                   gemm_engine::name()));
  std::string data, shuffle = "on", progress = "auto", eval = "on", comm = "auto",
                    device = "auto", tf32 = "off", overlap = "auto";
  app.add_option("--data", data,
                 "Data set: an IDX directory, train.csv[,test.csv], text:PATH (a file or directory), or "
                 "synthetic[:TRAIN[,TEST]]")
      ->type_name("PATH")
      ->check(nonEmpty())
      ->default_str(out.data.describe());
  app.add_option("--data-cache", out.data.cacheDir,
                 "Keep IDX data sets decoded in DIR, mapped by later runs instead of inflated "
                 "again (off: decode every run; default $DTC_CACHE_DIR, else "
                 "$XDG_CACHE_HOME/dtc, else ~/.cache/dtc)")
      ->type_name("DIR|off")
      ->check(nonEmpty())
      ->default_str(out.data.cacheDir.empty() ? "off" : out.data.cacheDir);
  app.add_option("--validation", out.data.validation,
                 "Hold out this fraction of the training set (its last samples) and evaluate "
                 "it after each epoch (val_loss, val_<metric>); the test set is then evaluated "
                 "once, after training")
      ->type_name("F")
      ->capture_default_str()
      ->check(inRange<double>(0, 0.999999, "a fraction from 0 to below 1"));
  app.add_option("--predict", out.predictPath,
                 "Run the model (its evaluation step) on the samples of FILE (IDX images, .npy, "
                 "or CSV of features) with the parameters of --init, and write one CSV row per "
                 "sample to --output: the class and the class probabilities, or the outputs")
      ->type_name("FILE")
      ->check(nonEmpty());
  app.add_option("--sample", out.sampleTokens,
                 "Generate N tokens with a language model (token ids in, logits [batch, T, V] "
                 "out) and the parameters of --init, after --prompt; to --output or standard "
                 "output")
      ->type_name("N")
      ->check(inRange<int64_t>(1, kMaxCount, "a number of tokens from 1 to 2^40"));
  app.add_option("--prompt", out.prompt,
                 "The text --sample continues (its bytes are the first tokens; the last T of "
                 "them when longer than the model's context)")
      ->type_name("TEXT")
      ->check(CLI::Validator(
          [](std::string &text) -> std::string {
            // Generation continues the prompt's last token: it needs one.
            return text.empty() ? std::string("the prompt is empty; give the text to continue "
                                              "(at least one byte), or leave --prompt out to "
                                              "start from a newline")
                                : "";
          },
          ""));
  app.add_option("--temperature", out.temperature,
                 "--sample: divide the logits by T before the softmax (0: always the most "
                 "likely token)")
      ->type_name("T")
      ->capture_default_str()
      ->check(inRange<double>(0, 1e6, "a temperature from 0 to 1e6"));
  app.add_option("--top-k", out.topK,
                 "--sample: draw from the K most likely tokens only (0: from all)")
      ->type_name("K")
      ->capture_default_str()
      ->check(inRange<int64_t>(0, kMaxCount, "a count from 0 to 2^40"));
  app.add_option("--calibrate", out.calibratePath,
                 "Train nothing: measure this machine at this world size and --threads (GEMMs, "
                 "convolutions, elementwise loops, the bucket collectives) and write the "
                 "results for dtc's cost model (dtc --machine FILE) to FILE (default: "
                 "<cache dir>/machine-<N>ranks.json, the cache dir as --data-cache's)")
      ->expected(0, 1)
      ->type_name("[FILE]");
  app.add_option("--output", out.outputPath,
                 "Where --predict writes its CSV, or --sample its text")
      ->type_name("FILE")
      ->check(nonEmpty());
  bool evalOnly = false;
  app.add_flag("--eval-only", evalOnly,
               "Only evaluate the parameters (from --init) on the test set: --epochs 0");
  app.add_option("--epochs", out.epochs, "Number of epochs (0: only evaluate)")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int64_t>(0, kMaxCount, "a number of epochs from 0 to 2^40"));
  app.add_option("--batch", out.batch, "Batch size")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int64_t>(1, kMaxCount, "a batch size from 1 to 2^40"));
  app.add_option("--lr", out.lr, "Learning rate")
      ->type_name("F")
      ->capture_default_str()
      ->check(inRange<float>(0, FLT_MAX, "a finite learning rate >= 0"));
  app.add_option("--accumulate", out.accumulate,
                 "Gradient accumulation: K micro-batches of --batch samples per optimizer "
                 "step, the all-reduce after the last only (DDP's no_sync); K > 1 needs "
                 "the recipe's accumulate compiled in")
      ->type_name("K")
      ->capture_default_str()
      ->check(inRange<int64_t>(1, kMaxCount, "a count from 1 to 2^40"));
  app.add_option("--clip-grad-norm", out.maxGradNorm,
                 "Clip the gradients to this global 2-norm (after the all-reduce), as "
                 "clip_grad_norm_; 0: off. The recipe's clip_grad_norm compiles it in")
      ->type_name("F")
      ->capture_default_str()
      ->check(inRange<float>(0, FLT_MAX, "a finite norm >= 0"));
  std::string schedule = scheduleKindName(out.schedule.kind);
  app.add_option("--lr-schedule", schedule,
                 "The learning rate over the steps: constant, cosine or linear (to --min-lr "
                 "at --decay-steps), step (x --lr-gamma every --lr-step-size steps); after "
                 "--warmup-steps of linear warmup")
      ->type_name("KIND")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "cosine", "linear", "step"}));
  app.add_option("--warmup-steps", out.schedule.warmup,
                 "Steps of linear warmup from lr / N to lr")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int64_t>(0, kMaxCount, "a number of steps from 0 to 2^40"));
  app.add_option("--decay-steps", out.schedule.decaySteps,
                 "cosine, linear: the step at which the rate reaches --min-lr (0: the run's "
                 "last step, --epochs x steps per epoch)")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int64_t>(0, kMaxCount, "a number of steps from 0 to 2^40"));
  app.add_option("--min-lr", out.schedule.minLr, "cosine, linear: the final learning rate")
      ->type_name("F")
      ->capture_default_str()
      ->check(inRange<double>(0, FLT_MAX, "a finite learning rate >= 0"));
  app.add_option("--lr-step-size", out.schedule.stepSize, "step: steps between decays")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int64_t>(1, kMaxCount, "a number of steps from 1 to 2^40"));
  app.add_option("--lr-gamma", out.schedule.gamma, "step: the factor of each decay")
      ->type_name("F")
      ->capture_default_str()
      ->check(inRange<double>(0, 1, "a factor from 0 to 1"));
  app.add_option("--seed", out.seed, "Seed of the initialization and the shuffle")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<uint64_t>(0, UINT64_MAX, "an integer from 0 to 2^64-1"));
  app.add_option("--shuffle", shuffle, "Shuffle the training set each epoch (off: file order)")
      ->type_name("on|off")
      ->capture_default_str()
      ->check(oneOf({"on", "off"}));
  app.add_option("--save", out.savePath, "Write the trained parameters to FILE (safetensors)")
      ->type_name("FILE")
      ->check(nonEmpty());
  app.add_option("--init", out.initPath, "Start from the parameters in FILE (safetensors)")
      ->type_name("FILE")
      ->check(nonEmpty());
  app.add_option("--checkpoint", out.checkpointPath,
                 "Write the training state (parameters, optimizer state, step, epoch and "
                 "position, options) to FILE (safetensors) at each epoch's end, every "
                 "--checkpoint-every steps and on SIGTERM/SIGINT/SIGUSR1")
      ->type_name("FILE")
      ->check(nonEmpty());
  app.add_option("--checkpoint-every", out.checkpointEvery,
                 "Also checkpoint every N optimizer steps (0: only at epoch ends and on signals)")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int64_t>(0, kMaxCount, "a number of steps from 0 to 2^40"));
  app.add_option("--checkpoint-keep", out.checkpointKeep,
                 "Keep the latest K checkpoints as <stem>.step<N><ext> besides FILE (1: FILE only)")
      ->type_name("K")
      ->capture_default_str()
      ->check(inRange<int64_t>(1, 1000000, "a number of checkpoints from 1 to 1000000"));
  app.add_option("--resume", out.resumePath,
                 "Continue the run saved in FILE by --checkpoint, exactly (auto: the "
                 "--checkpoint file if it exists, else start afresh)")
      ->type_name("FILE|auto")
      ->check(nonEmpty());
  app.add_option("--metrics", out.metricsPath,
                 "Write one CSV row per step to FILE: epoch,step,batch,loss,<metrics>,lr,seconds")
      ->type_name("FILE")
      ->check(nonEmpty());
  app.add_option("--progress", progress,
                 "Progress bar (auto: when stdout is a terminal and there is one rank)")
      ->type_name("auto|on|off")
      ->capture_default_str()
      ->check(oneOf({"auto", "on", "off"}));
  app.add_option("--threads", out.threads,
                 "BLAS threads (default: the cores this process may use, shared by the ranks "
                 "on a node)")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int>(1, 1024, "a number of threads from 1 to 1024"));
  app.add_option("--max-steps", out.maxSteps, "Stop training after N steps in total")
      ->type_name("N")
      ->check(inRange<int64_t>(1, kMaxCount, "a number of steps from 1 to 2^40"));
  app.add_option("--eval-every", out.evalEvery,
                 "Also evaluate every N steps: the validation set (else the test set), "
                 "printed as 'step N val_loss ...'")
      ->type_name("N")
      ->check(inRange<int64_t>(1, kMaxCount, "a number of steps from 1 to 2^40"));
  app.add_option("--eval", eval, "Evaluate on the test set after each epoch")
      ->type_name("on|off")
      ->capture_default_str()
      ->check(oneOf({"on", "off"}));
  app.add_flag("--gradcheck", out.gradcheck,
               "Check the gradients against finite differences on the first batch, then exit");
  app.add_option("--gradcheck-eps", out.gradcheckEps, "Finite-difference step")
      ->type_name("F")
      ->capture_default_str()
      ->check(positive<double>(1.0, "a finite step above 0, at most 1"));
  app.add_option("--gradcheck-atol", out.gradcheckAtol, "Absolute tolerance")
      ->type_name("F")
      ->capture_default_str()
      ->check(inRange<double>(0, 1e30, "a finite tolerance >= 0"));
  app.add_option("--gradcheck-rtol", out.gradcheckRtol, "Relative tolerance")
      ->type_name("F")
      ->capture_default_str()
      ->check(inRange<double>(0, 1e30, "a finite tolerance >= 0"));
  app.add_flag("--quiet", out.quiet, "Print only the per-epoch result lines");
  app.add_option("--comm", comm,
                 "Communication between ranks (auto: on the CPU, MPI when started by mpirun, "
                 "srun or another PMI launcher, gloo when started by torchrun or described "
                 "by TF_CONFIG, else local; on CUDA, NCCL when started by such a launcher or "
                 "torchrun, else local)")
      ->type_name("auto|local|mpi|gloo|nccl")
      ->capture_default_str()
      ->check(oneOf({"auto", "local", "mpi", "gloo", "nccl"}));
  app.add_option("--local_rank,--local-rank", out.localRankArg,
                 "The rank within the node, as torch.distributed.launch passes it (must agree "
                 "with LOCAL_RANK when both are set)")
      ->type_name("K")
      ->check(inRange<int>(0, 1 << 20, "a local rank from 0 to 2^20"));
  app.add_option("--comm-timeout", out.commTimeout,
                 "Give up (and end the job) when a communication with the other ranks takes "
                 "longer than this")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(positive<double>(kMaxTimeout, "a number of seconds above 0, at most 2592000 "
                                            "(30 days)"));
  app.add_option("--overlap", overlap,
                 "CPU: start each gradient bucket's all-reduce while backward still runs (on), "
                 "only when the step waits for it (off), or on only when each rank has a core "
                 "for its communication thread besides its --threads (auto; without one, "
                 "overlap takes time from the computation)")
      ->type_name("auto|on|off")
      ->capture_default_str()
      ->check(oneOf({"auto", "on", "off"}));
  app.add_option("--trace", out.tracePath,
                 "Write a Chrome trace (chrome://tracing, Perfetto) of the first training "
                 "steps to FILE (rank N > 0: FILE with .rankN before the extension)")
      ->type_name("FILE")
      ->check(nonEmpty());
  app.add_option("--trace-steps", out.traceSteps, "Steps recorded by --trace")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int64_t>(1, 1000000, "a number of steps from 1 to 1000000"));
  app.add_option("--device", device,
                 "Where the steps run (auto: cuda when the program has CUDA steps and a GPU "
                 "is present, else cpu)")
      ->type_name("auto|cpu|cuda")
      ->capture_default_str()
      ->check(oneOf({"auto", "cpu", "cuda"}));
  app.add_option("--log-interval", out.logInterval,
                 "CUDA: steps between reads of the loss and metrics from the device (progress "
                 "and the non-finite loss check happen then)")
      ->type_name("N")
      ->capture_default_str()
      ->check(inRange<int64_t>(1, 100000, "a number of steps from 1 to 100000"));
  app.add_option("--tf32", tf32, "CUDA: let GEMMs use TF32 tensor cores (faster, ~1e-3 relative)")
      ->type_name("on|off")
      ->capture_default_str()
      ->check(oneOf({"on", "off"}));

  // CLI11 reads "--save=" as "--save" and takes the next argument as its
  // value: refuse an empty value outright.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--")
      break;
    if (arg.size() > 3 && arg.compare(0, 2, "--") == 0 && arg.back() == '=' &&
        arg.find('=') == arg.size() - 1) {
      std::cerr << "train: error: " << arg.substr(0, arg.size() - 1)
                << ": expected a value after '=', got nothing\nRun with --help for more "
                   "information.\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion &e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError &e) {
    std::cerr << "train: error: " << e.what() << "\nRun with --help for more information.\n";
    return 2;
  }
  for (const CLI::Option *opt : app.get_options())
    if (opt->count() > 0 && !opt->get_lnames().empty())
      out.given.push_back("--" + opt->get_lnames()[0]);
  if (out.resumePath == "auto" && out.checkpointPath.empty()) {
    std::cerr << "train: error: --resume auto resumes from the --checkpoint file; give "
                 "--checkpoint FILE too\n";
    return 2;
  }
  if (!out.initPath.empty() && !out.resumePath.empty()) {
    std::cerr << "train: error: --init and --resume exclude each other (--resume restores "
                 "the parameters too)\n";
    return 2;
  }
  if (out.checkpointPath.empty() && app.count("--checkpoint-every") + app.count("--checkpoint-keep")) {
    std::cerr << "train: error: --checkpoint-every and --checkpoint-keep need --checkpoint FILE\n";
    return 2;
  }
  if (!out.predictPath.empty() && (out.outputPath.empty() || out.initPath.empty())) {
    std::cerr << "train: error: --predict needs --init CKPT (the trained parameters) and "
                 "--output FILE (where the predictions go)\n";
    return 2;
  }
  if (!out.predictPath.empty() && out.sampleTokens > 0) {
    std::cerr << "train: error: --predict and --sample exclude each other\n";
    return 2;
  }
  out.calibrate = app.count("--calibrate") > 0;
  if (out.calibrate)
    for (const char *o : {"--predict", "--sample", "--gradcheck", "--output"})
      if (app.count(o)) {
        std::cerr << "train: error: --calibrate and " << o
                  << " exclude each other (--calibrate trains nothing and only measures)\n";
        return 2;
      }
  if (out.sampleTokens > 0 && out.initPath.empty()) {
    std::cerr << "train: error: --sample needs --init CKPT (the trained parameters)\n";
    return 2;
  }
  if (out.sampleTokens == 0)
    for (const char *o : {"--prompt", "--temperature", "--top-k"})
      if (app.count(o)) {
        std::cerr << "train: error: " << o << " is an option of --sample; give --sample N\n";
        return 2;
      }
  if (out.predictPath.empty() && out.sampleTokens == 0 && !out.outputPath.empty()) {
    std::cerr << "train: error: --output is where --predict or --sample writes; give "
                 "--predict INPUTS or --sample N\n";
    return 2;
  }
  if (evalOnly) {
    if (app.count("--epochs") && out.epochs != 0) {
      std::cerr << "train: error: --eval-only trains no epoch; drop --epochs " << out.epochs
                << "\n";
      return 2;
    }
    out.epochs = 0;
  }
  if (out.accumulate > 1 && !spec.accumulateStep) {
    std::cerr << "train: error: --accumulate: model '" << spec.name
              << "' was compiled without gradient accumulation; add accumulate = "
              << out.accumulate << " to its recipe\n";
    return 2;
  }
  if (out.maxGradNorm > 0 && !(spec.recipe.hyper.maxGradNorm > 0)) {
    std::cerr << "train: error: --clip-grad-norm: model '" << spec.name
              << "' was compiled without gradient clipping; add clip_grad_norm = "
              << out.maxGradNorm << " to its recipe\n";
    return 2;
  }
  if (!data.empty())
    applyDataOption(data, out.data);
  if (out.data.cacheDir == "off")
    out.data.cacheDir.clear();
  out.shuffle = shuffle == "on";
  out.schedule.kind = *scheduleKindNamed(schedule);
  // cosine, linear: the decay ends at step decaySteps (0: the run's last
  // step), so it cannot end before the warmup does. A decay of 0 is
  // resolved to the run's steps, which the warmup may outlast: the rate
  // then only warms up, never dropping below it.
  const LrSchedule &sched = out.schedule;
  if ((sched.kind == LrSchedule::Kind::Cosine || sched.kind == LrSchedule::Kind::Linear) &&
      sched.decaySteps > 0 && sched.decaySteps < sched.warmup) {
    auto given = [&](const char *option, const char *key, int64_t v) {
      return app.count(option) ? fmt::format("{} {}", option, v)
                               : fmt::format("{} {} (the recipe's {})", option, v, key);
    };
    std::cerr << fmt::format(
        "train: error: {} is shorter than {}: the {} decay would be over before the warmup "
        "ends, the rate dropping from --lr to --min-lr at once after it; give --decay-steps of "
        "at least {} (the step at which the rate reaches --min-lr), or 0 for the run's last "
        "step\n",
        given("--decay-steps", "decay_steps", sched.decaySteps),
        given("--warmup-steps", "warmup", sched.warmup), scheduleKindName(sched.kind),
        sched.warmup);
    return 2;
  }
  out.threadsGiven = app.count("--threads") > 0;
  out.comm = comm == "local" ? CommKind::Local
             : comm == "mpi"  ? CommKind::Mpi
             : comm == "gloo" ? CommKind::Gloo
             : comm == "nccl" ? CommKind::Nccl
                              : CommKind::Auto;
  out.device = device == "cpu" ? DeviceKind::Cpu : device == "cuda" ? DeviceKind::Cuda
                                                                    : DeviceKind::Auto;
  out.tf32 = tf32 == "on";
  out.overlap = overlap == "on"    ? Options::Overlap::On
                : overlap == "off" ? Options::Overlap::Off
                                   : Options::Overlap::Auto;
  out.eval = eval == "on";
  if (out.evalEvery > 0 && !out.eval) {
    std::cerr << "train: error: --eval-every evaluates during training; drop --eval off\n";
    return 2;
  }
  out.progress = progress == "on"    ? ProgressMode::On
                 : progress == "off" ? ProgressMode::Off
                                     : ProgressMode::Auto;
  return std::nullopt;
}

} // namespace dtc::rt
