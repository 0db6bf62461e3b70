//===- driver.cpp - runMain: the train program's top level ---------------===//
//
// Parses options, creates the communicator, checks that every rank runs the
// same program with the same options and data, loads data, builds the
// Session, then either runs the gradient check or the training loop
// (per-epoch evaluation, metrics file, trace, checkpoint). Every error
// becomes "train: error: ..." and a non-zero exit; with several ranks, an
// error on one rank ends its process at once (_exit), which makes the
// launcher end the others, so that no rank is left waiting for it.
//
//===----------------------------------------------------------------------===//
#include "dtc/runtime.h"

#include "files.h"
#include "checkpoint.h"
#include "comm_impl.h"
#include "error.h"
#include "executor.h"
#include "gemm/engine.h"
#include "gradcheck.h"
#include "parallel.h"
#include "params.h"
#include "preempt.h"
#include "progress.h"
#include "session.h"
#include "tracer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <sched.h>
#include <thread>
#include <unistd.h>


namespace dtc::rt {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// --metrics FILE: one CSV row per training step. The rows are kept and the
// whole file is written through an AtomicFile at each checkpoint, each
// epoch's end and the run's end, so that the file on disk always matches the
// latest checkpoint; a resumed run starts from the rows of the steps its
// checkpoint holds (those of an earlier file at the same path).
class MetricsFile {
public:
  MetricsFile(const std::string &path, const ModelSpec &spec, int64_t resumedStep)
      : path_(path) {
    if (path.empty())
      return;
    header_ = "epoch,step,batch";
    for (int32_t i = 0; i < spec.numOutputs; ++i)
      header_ += fmt::format(",{}", spec.outputNames[i]);
    header_ += ",lr,seconds\n";
    text_ = header_;
    if (resumedStep > 0)
      keepEarlierRows(resumedStep);
  }

  void row(int64_t epoch, int64_t step, int64_t batch, const std::vector<float> &outputs,
           float lr, double seconds) {
    if (path_.empty())
      return;
    text_ += fmt::format("{},{},{}", epoch, step, batch);
    for (float v : outputs)
      text_ += fmt::format(",{:.6g}", v);
    text_ += fmt::format(",{:.6g},{:.3f}\n", lr, seconds);
  }

  void commit() {
    if (path_.empty())
      return;
    AtomicFile out(path_, "metrics file");
    out.write(text_);
    out.commit();
  }

private:
  // The rows of steps <= step of the file at path_, if it is one of ours.
  void keepEarlierRows(int64_t step) {
    std::FILE *f = std::fopen(path_.c_str(), "r");
    if (!f)
      return;
    std::string old;
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      old.append(buf, n);
    std::fclose(f);
    if (old.compare(0, header_.size(), header_) != 0)
      return;
    for (size_t at = header_.size(); at < old.size();) {
      size_t eol = old.find('\n', at);
      if (eol == std::string::npos)
        break;
      const size_t comma = old.find(',', at);
      long long rowStep = comma < eol ? std::atoll(old.c_str() + comma + 1) : 0;
      if (rowStep < 1 || rowStep > step)
        break;
      text_.append(old, at, eol + 1 - at);
      at = eol + 1;
    }
  }

  std::string path_, header_, text_;
};

// Programs with CUDA steps also say where they run ("device cuda:0 (...)",
// "device cpu (no CUDA device found (cudaGetDeviceCount: ...))").
void printHeader(const Session &s, const Executor &exec, const DeviceChoice &device) {
  const Options &o = s.opts;
  std::string where;
  if (hasCudaSteps(s.spec) || device.cuda)
    where = fmt::format(" device {}{}", exec.describe(),
                        device.note.empty() ? "" : " (" + device.note + ")");
  fmt::print("model {} params {} batch {} epochs {} optimizer {} data {} ({} train, {} test "
             "samples) ranks {} backend {}{}\n",
             s.spec.name, countParams(s.spec), o.batch, o.epochs,
             optimizerDescription(s.spec, o.lr), o.data.describe(), s.data.train.size,
             s.data.test.size, s.comm.size(), s.comm.backend(), where);
  std::fflush(stdout);
}

//===--- startup checks: every rank runs the same program, options, data ---===//

uint64_t fnv1a(const void *data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// What must be equal on every rank, with a fixed layout (allgathered).
struct RunIdentity {
  uint64_t magic;   // layout version of this struct
  uint64_t program; // ModelSpec::fingerprint
  int64_t batch, epochs, maxSteps;
  uint64_t seed;
  uint32_t lrBits;
  int32_t shuffle, eval, metrics;
  int32_t dataKind, cuda; // no padding: compared with memcmp
  int64_t syntheticTrain, syntheticTest;
  int64_t logInterval; // steps between output reads (collectives with --metrics)
};
static_assert(sizeof(RunIdentity) == 8 * 6 + 4 * 6 + 8 * 3, "RunIdentity has padding");
constexpr uint64_t kRunIdentityMagic = 0x64746372756e3032ULL; // "dtcrun02"

RunIdentity runIdentity(const ModelSpec &spec, const Options &o, bool cuda) {
  RunIdentity id;
  std::memset(&id, 0, sizeof id);
  id.magic = kRunIdentityMagic;
  id.program = spec.fingerprint;
  id.batch = o.batch;
  id.epochs = o.epochs;
  id.maxSteps = o.maxSteps;
  id.seed = o.seed;
  std::memcpy(&id.lrBits, &o.lr, sizeof id.lrBits);
  id.shuffle = o.shuffle;
  id.eval = o.eval;
  id.metrics = !o.metricsPath.empty();
  id.dataKind = int32_t(o.data.kind);
  id.cuda = cuda;
  id.logInterval = cuda ? o.logInterval : 1;
  if (o.data.kind == DatasetKind::Synthetic) {
    id.syntheticTrain = o.data.trainSize;
    id.syntheticTest = o.data.testSize;
  }
  return id;
}

// The options in which two identities differ, e.g. "--batch 16 vs 8".
std::string optionDifferences(const RunIdentity &a, const RunIdentity &b) {
  std::vector<std::string> d;
  auto onOff = [](int32_t v) { return v ? "on" : "off"; };
  if (a.batch != b.batch)
    d.push_back(fmt::format("--batch {} vs {}", a.batch, b.batch));
  if (a.epochs != b.epochs)
    d.push_back(fmt::format("--epochs {} vs {}", a.epochs, b.epochs));
  if (a.maxSteps != b.maxSteps)
    d.push_back(fmt::format("--max-steps {} vs {}", a.maxSteps, b.maxSteps));
  if (a.seed != b.seed)
    d.push_back(fmt::format("--seed {} vs {}", a.seed, b.seed));
  if (a.lrBits != b.lrBits) {
    float x, y;
    std::memcpy(&x, &a.lrBits, sizeof x);
    std::memcpy(&y, &b.lrBits, sizeof y);
    d.push_back(fmt::format("--lr {:g} vs {:g}", x, y));
  }
  if (a.shuffle != b.shuffle)
    d.push_back(fmt::format("--shuffle {} vs {}", onOff(a.shuffle), onOff(b.shuffle)));
  if (a.eval != b.eval)
    d.push_back(fmt::format("--eval {} vs {}", onOff(a.eval), onOff(b.eval)));
  if (a.metrics != b.metrics)
    d.push_back(fmt::format("--metrics {} vs {}", a.metrics ? "given" : "not given",
                            b.metrics ? "given" : "not given"));
  if (a.cuda != b.cuda)
    d.push_back(fmt::format("--device {} vs {}", a.cuda ? "cuda" : "cpu", b.cuda ? "cuda" : "cpu"));
  if (a.logInterval != b.logInterval)
    d.push_back(fmt::format("--log-interval {} vs {}", a.logInterval, b.logInterval));
  if (a.dataKind != b.dataKind || a.syntheticTrain != b.syntheticTrain ||
      a.syntheticTest != b.syntheticTest)
    d.push_back("--data");
  return fmt::format("{}", fmt::join(d, ", "));
}

std::string rankList(const std::vector<int> &ranks) {
  return fmt::format("{}", fmt::join(ranks, ", "));
}

// Right after the communicator exists: refuses (on every rank, collectively)
// to train unless every rank runs the same compiled program with the same
// options.
void checkSameRun(Communicator &comm, const ModelSpec &spec, const Options &o, bool cuda) {
  if (comm.size() == 1)
    return;
  const RunIdentity mine = runIdentity(spec, o, cuda);
  std::vector<RunIdentity> all(static_cast<size_t>(comm.size()));
  comm.allgather(&mine, all.data(), sizeof(RunIdentity));
  const RunIdentity &ref = all[0];
  std::vector<int> differ;
  for (int r = 1; r < comm.size(); ++r)
    if (std::memcmp(&all[size_t(r)], &ref, sizeof ref) != 0)
      differ.push_back(r);
  if (differ.empty())
    return;
  const int r = differ[0];
  const RunIdentity &other = all[size_t(r)];
  const std::string more =
      differ.size() > 1 ? fmt::format(" (ranks {} differ from rank 0)", rankList(differ)) : "";
  const char *fix = "start the same train with the same options on every rank";
  if (other.magic != ref.magic)
    throw CollectiveError(fmt::format("rank {} runs a different dtc runtime than rank 0{}; {}", r,
                                      more, fix));
  if (other.program != ref.program)
    throw CollectiveError(fmt::format("rank {} runs a different compiled program (fingerprint "
                                      "{:016x}) than rank 0 ({:016x}){}; {}",
                                      r, other.program, ref.program, more, fix));
  throw CollectiveError(fmt::format("rank {} runs with different options than rank 0 ({}){}; {}",
                                    r, optionDifferences(other, ref), more, fix));
}

struct DataIdentity {
  int64_t trainSize, testSize;
  uint64_t trainDigest, testDigest;
};

// Size and a digest of up to 64 evenly spaced samples (features and labels).
uint64_t datasetDigest(const Dataset &ds) {
  uint64_t h = fnv1a(&ds.size, sizeof ds.size);
  const int64_t samples = std::min<int64_t>(ds.size, 64);
  for (int64_t j = 0; j < samples; ++j) {
    const int64_t i = j * ds.size / samples;
    h = fnv1a(ds.x.data() + i * ds.features, size_t(ds.features) * sizeof(float), h);
    if (ds.labelKind == LabelKind::Class)
      h = fnv1a(&ds.yClass[size_t(i)], sizeof(int32_t), h);
    else
      h = fnv1a(ds.yValue.data() + i * ds.labelWidth, size_t(ds.labelWidth) * sizeof(float), h);
  }
  return h;
}

// After loading: every rank must hold the same data sets.
void checkSameData(Communicator &comm, const DataSplits &data) {
  if (comm.size() == 1)
    return;
  const DataIdentity mine{data.train.size, data.test.size, datasetDigest(data.train),
                          datasetDigest(data.test)};
  std::vector<DataIdentity> all(static_cast<size_t>(comm.size()));
  comm.allgather(&mine, all.data(), sizeof(DataIdentity));
  std::vector<int> differ;
  for (int r = 1; r < comm.size(); ++r)
    if (std::memcmp(&all[size_t(r)], &all[0], sizeof mine) != 0)
      differ.push_back(r);
  if (differ.empty())
    return;
  const DataIdentity &a = all[size_t(differ[0])], &b = all[0];
  auto describe = [](int64_t size, uint64_t digest) {
    return fmt::format("{} samples, digest {:016x}", size, digest);
  };
  std::string what = a.trainSize != b.trainSize || a.trainDigest != b.trainDigest
                         ? fmt::format("training set: {} vs {}", describe(a.trainSize, a.trainDigest),
                                       describe(b.trainSize, b.trainDigest))
                         : fmt::format("test set: {} vs {}", describe(a.testSize, a.testDigest),
                                       describe(b.testSize, b.testDigest));
  throw CollectiveError(fmt::format(
      "rank {} loaded different data than rank 0 ({}){}; give every rank the same data",
      differ[0], what,
      differ.size() > 1 ? fmt::format(" (ranks {} differ from rank 0)", rankList(differ)) : ""));
}

//===--- training -----------------------------------------------------------===//

std::string testResults(const ModelSpec &spec, const std::vector<double> &results) {
  std::string line;
  for (int32_t i = 0; i < spec.numOutputs; ++i)
    line += fmt::format(" test_{} {:.4f}", spec.outputNames[i], results[size_t(i)]);
  return line;
}

// Runs the eval step over ds in file order, each rank on its contiguous part
// (rank r: samples [r*N/W, (r+1)*N/W)), staging each batch while the step
// before it runs; returns the sample-weighted mean of each output over the
// whole of ds (one allreduceSum).
std::vector<double> evaluate(Session &s, Executor &exec, const Dataset &ds) {
  const size_t numOutputs = size_t(s.spec.numOutputs);
  const int64_t slots = exec.outputSlots(), batch = s.opts.batch;
  // sums[i]: output i weighted by batch sizes; sums.back(): samples.
  std::vector<double> sums(numOutputs + 1, 0.0);
  std::vector<float> outs(size_t(slots) * numOutputs);
  std::vector<int64_t> pendingN;
  pendingN.reserve(size_t(slots));
  auto flush = [&] {
    if (pendingN.empty())
      return;
    exec.readOutputs(int64_t(pendingN.size()), outs.data());
    for (size_t k = 0; k < pendingN.size(); ++k) {
      for (size_t i = 0; i < numOutputs; ++i)
        sums[i] += double(outs[k * numOutputs + i]) * double(pendingN[k]);
      sums.back() += double(pendingN[k]);
    }
    pendingN.clear();
  };
  const int64_t W = s.comm.size(), r = s.comm.rank();
  const int64_t begin = ds.size * r / W, end = ds.size * (r + 1) / W;
  std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(0, std::min(batch, end - begin))));
  auto stage = [&](int64_t b) {
    const int64_t n = std::min(batch, end - b);
    std::iota(idx.begin(), idx.begin() + n, b);
    return exec.stage(ds, idx.data(), n);
  };
  int staged = begin < end ? stage(begin) : -1;
  for (int64_t b = begin; b < end; b += batch) {
    exec.eval(staged, int64_t(pendingN.size()));
    pendingN.push_back(std::min(batch, end - b));
    if (b + batch < end)
      staged = stage(b + batch);
    if (int64_t(pendingN.size()) == slots)
      flush();
  }
  flush();
  s.comm.allreduceSum(sums.data(), int64_t(sums.size()));
  const double total = std::max(sums.back(), 1.0);
  sums.pop_back();
  for (double &v : sums)
    v /= total;
  return sums;
}

//===--- checkpoints, resume, preemption ------------------------------------===//

// Runs fn on every rank; if it throws an Error on any, every rank throws a
// CollectiveError (the failing ones with their own message), so that the
// ranks end together instead of waiting for each other.
template <class Fn> void onEveryRank(CommBase &comm, const char *what, Fn fn) {
  std::string error;
  try {
    fn();
  } catch (const Error &e) {
    error = e.what();
  }
  if (comm.size() == 1) {
    if (!error.empty())
      throw Error(error);
    return;
  }
  double failed = error.empty() ? 0 : 1;
  comm.allreduceSum(&failed, 1);
  if (failed == 0)
    return;
  throw CollectiveError(error.empty() ? fmt::format("another rank failed {}", what) : error);
}

// Broadcasts rank 0's string to every rank.
void broadcastString(CommBase &comm, std::string &text) {
  if (comm.size() == 1)
    return;
  int64_t n = int64_t(text.size());
  comm.broadcast(&n, sizeof n, 0);
  text.resize(size_t(n));
  if (n > 0)
    comm.broadcast(text.data(), n, 0);
}

// "ck.safetensors" and step 120: "ck.step120.safetensors" (--checkpoint-keep).
std::string keptCheckpointName(const std::string &path, int64_t step) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  const bool hasExt = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  const std::string stem = hasExt ? path.substr(0, dot) : path;
  const std::string ext = hasExt ? path.substr(dot) : std::string();
  return fmt::format("{}.step{}{}", stem, step, ext);
}

// Removes kept checkpoints of path beyond the `keep` highest steps (never
// the one just written).
void pruneKeptCheckpoints(const std::string &path, int64_t keep, const std::string &latest) {
  const std::string dir = directoryOf(path);
  const std::string base = path.substr(path.find_last_of('/') + 1);
  const std::string probe = keptCheckpointName(base, 0); // "ck.step0.safetensors"
  const std::string prefix = probe.substr(0, probe.find(".step0") + 5);
  const std::string suffix = probe.substr(prefix.size() + 1);
  std::vector<std::pair<int64_t, std::string>> found;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix))
        continue;
      const std::string digits =
          name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      if (digits.empty() || digits.size() > 18 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        continue;
      found.push_back({std::stoll(digits), (dir == "." && path.find('/') == std::string::npos
                                                ? name
                                                : dir + "/" + name)});
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end());
  int64_t excess = int64_t(found.size()) - keep;
  for (auto &[step, name] : found) {
    if (excess <= 0)
      break;
    if (name == latest)
      continue;
    ::unlink(name.c_str());
    --excess;
  }
}

// Reads, checks and distributes the training state of --resume (collective):
// every rank gets its metadata and takes the options the checkpoint
// recorded unless given on the command line; rank 0 gets the persistent
// block (Session broadcasts it). Returns nothing for a fresh start (--resume
// auto without a checkpoint file).
std::optional<LoadedTrainingState> loadResume(CommBase &comm, const ModelSpec &spec,
                                              Options &o, const DataSplits &data) {
  if (o.resumePath.empty())
    return std::nullopt;
  const bool autoResume = o.resumePath == "auto";
  const std::string path = autoResume ? o.checkpointPath : o.resumePath;
  LoadedTrainingState loaded;
  std::string error, encoded;
  int64_t present = 1;
  if (comm.rank() == 0) {
    try {
      if (autoResume && ::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
        present = 0;
      } else {
        loaded = loadTrainingState(path, spec);
        const TrainingState &st = loaded.state;
        const uint64_t digest = datasetDigest(data.train);
        if (st.trainSamples != data.train.size || st.trainDigest != digest)
          throw Error(fmt::format(
              "checkpoint '{}' was trained on other data ({}: {} samples, digest {:016x}); "
              "this run's training set has {} samples, digest {:016x}",
              path, st.data, st.trainSamples, st.trainDigest, data.train.size, digest));
        encoded = encodeTrainingState(st);
      }
    } catch (const Error &e) {
      error = e.what();
    }
  }
  broadcastString(comm, error);
  if (!error.empty())
    throw CollectiveError(error);
  if (comm.size() > 1)
    comm.broadcast(&present, sizeof present, 0);
  if (!present) {
    if (comm.rank() == 0 && !o.quiet)
      fmt::print("no checkpoint at {} yet: starting afresh\n", path);
    return std::nullopt;
  }
  broadcastString(comm, encoded);
  loaded.state = decodeTrainingState(encoded);
  const TrainingState &st = loaded.state;
  // The options that make the position inside the epoch meaningful.
  auto refuse = [&](const char *option, const std::string &mine, const std::string &theirs) {
    throw CollectiveError(fmt::format(
        "{} {} differs from the checkpoint's {} ('{}'): a resumed run continues the epoch "
        "order the checkpoint recorded; drop {}, or start afresh from its parameters with "
        "--init",
        option, mine, theirs, path, option));
  };
  if (o.isGiven("--seed") && o.seed != st.seed)
    refuse("--seed", std::to_string(o.seed), std::to_string(st.seed));
  if (o.isGiven("--shuffle") && o.shuffle != st.shuffle)
    refuse("--shuffle", o.shuffle ? "on" : "off", st.shuffle ? "on" : "off");
  o.seed = st.seed;
  o.shuffle = st.shuffle;
  if (!o.isGiven("--batch"))
    o.batch = st.batch;
  if (!o.isGiven("--lr"))
    o.lr = st.lr;
  if (!o.isGiven("--epochs"))
    o.epochs = st.epochs;
  // --max-steps is where this invocation stops, not part of the run: a run
  // stopped by it continues to its --epochs unless given again.
  o.resumeActive = true;
  if (comm.rank() == 0 && !o.quiet) {
    fmt::print("resuming from {}: step {}, epoch {}, {} of {} samples of it done\n", path,
               st.step, st.epoch, st.epochSamples, st.trainSamples);
    const int64_t before = st.ranks * st.batch, now = int64_t(comm.size()) * o.batch;
    if (before != now)
      fmt::print("note: the global batch changes from {} ({} rank{} x {}) to {} ({} x {})\n",
                 before, st.ranks, st.ranks == 1 ? "" : "s", st.batch, now, comm.size(),
                 o.batch);
    std::fflush(stdout);
  }
  return loaded;
}

// Where the loop starts: a fresh run, or a resumed one.
struct RunStart {
  int64_t step = 0, epoch = 1, epochSamples = 0;
};

// The training loop. Steps are queued on the executor; their outputs are
// read back every outputSlots() steps (every step on the CPU) and at the
// end of each epoch, then weighed, checked and reported in step order. At
// those reads (a step boundary every rank reaches together) the ranks agree
// on whether a preemption signal came, and checkpoints are written. Returns
// the exit status: 0, or kExitPreempted.
int train(Session &s, Executor &exec, const RunStart &begin) {
  const ModelSpec &spec = s.spec;
  const Options &o = s.opts;
  const Dataset &trainSet = s.data.train;
  CommBase &comm = s.comm;
  const int rank = comm.rank();
  const bool root = rank == 0;
  Sampler sampler(trainSet.size, o.batch, o.seed, o.shuffle, rank, comm.size());
  Progress progress(o.quiet || !root ? ProgressMode::Off : o.progress, o.epochs,
                    comm.size() > 1);
  MetricsFile metrics(root ? o.metricsPath : std::string(), spec, begin.step);
  const bool stepMetrics = !o.metricsPath.empty(); // every rank joins the per-step sums
  const size_t numOutputs = size_t(spec.numOutputs);
  const int64_t slots = exec.outputSlots();
  // Steps whose outputs have not been read yet.
  struct Pending {
    int64_t epoch, step, batchIndex, n, global;
    float lr;
    double seconds;
  };
  std::vector<Pending> pending;
  pending.reserve(size_t(slots));
  std::vector<float> outs(size_t(slots) * numOutputs);
  // Per pending step: its outputs weighted by its batch size, then the size.
  std::vector<double> stepSums(size_t(slots) * (numOutputs + 1));
  std::vector<float> stepMeans(numOutputs);
  const bool evaluate = o.eval && s.data.test.size > 0;
  std::unique_ptr<Tracer> tracer;
  if (!o.tracePath.empty()) {
    tracer = std::make_unique<Tracer>(rank);
    // Where the step's all-reduces start (--overlap; trace.sh checks it).
    tracer->setMetadata("overlap", comm.deferredStarts() ? "off" : "on");
  }
  auto finishTrace = [&](int64_t steps) {
    exec.setTracer(nullptr);
    comm.setTracer(nullptr);
    const std::string path = Tracer::rankPath(o.tracePath, rank);
    tracer->write(path);
    tracer.reset();
    if (!root || o.quiet)
      return;
    std::string others;
    if (comm.size() == 2)
      others = fmt::format(" (rank 1: {})", Tracer::rankPath(o.tracePath, 1));
    else if (comm.size() > 2)
      others = fmt::format(" (ranks 1-{}: {}, ...)", comm.size() - 1,
                           Tracer::rankPath(o.tracePath, 1));
    fmt::print("wrote a trace of {} step{} to {}{}\n", steps, steps == 1 ? "" : "s", path,
               others);
  };
  const uint64_t trainDigest = o.checkpointPath.empty() ? 0 : datasetDigest(trainSet);
  // A preemption signal ends the run at a step boundary with a checkpoint
  // (only when there is one to write: otherwise signals end it as usual).
  std::optional<PreemptionHandler> preemption;
  if (!o.checkpointPath.empty())
    preemption.emplace();
  int64_t step = begin.step, checkpointedStep = -1;
  // The training state after `step`, at `position` of `epoch`'s order.
  auto writeCheckpoint = [&](int64_t epoch, int64_t position) {
    if (o.checkpointPath.empty() || checkpointedStep == step)
      return;
    checkpointedStep = step;
    if (!root)
      return;
    exec.persistentToHost();
    TrainingState st;
    st.step = step;
    st.epoch = epoch;
    st.epochSamples = position;
    st.ranks = comm.size();
    st.batch = o.batch;
    st.seed = o.seed;
    st.shuffle = o.shuffle;
    st.lr = o.lr;
    st.epochs = o.epochs;
    st.maxSteps = o.maxSteps;
    st.data = o.data.describe();
    st.trainSamples = trainSet.size;
    st.trainDigest = trainDigest;
    const std::string kept =
        o.checkpointKeep > 1 ? keptCheckpointName(o.checkpointPath, step) : std::string();
    saveTrainingState(o.checkpointPath, spec, s.persistent.data(), st, kept);
    if (!kept.empty())
      pruneKeptCheckpoints(o.checkpointPath, o.checkpointKeep, kept);
    metrics.commit();
  };
  // Whether any rank caught a preemption signal: a collective with more
  // than one rank (an all-reduce through the communication thread, ~16 us
  // on 2 ranks here), so every rank asks at the same step boundaries. The
  // first kCalibrate boundaries ask each time and measure the steps; then
  // the ranks ask every checkEvery boundaries, as many as fit in ~50 ms
  // (at most 64), which keeps the cost under 0.1% of a fast step and the
  // delay of a signal to about 50 ms.
  constexpr int64_t kCalibrate = 10;
  const auto loopStart = Clock::now();
  int64_t boundaries = 0, checkEvery = 1;
  auto preempted = [&](bool boundary) -> int {
    if (boundary && ++boundaries % checkEvery != 0)
      return 0;
    const int sig = PreemptionHandler::requested();
    const bool calibrate = boundary && boundaries == kCalibrate;
    double v[2] = {double(sig), calibrate ? secondsSince(loopStart) / double(boundaries) : 0};
    if (comm.size() > 1)
      comm.allreduceSum(v, 2); // any signal: > 0
    if (calibrate) {
      const double perBoundary = v[1] / double(comm.size());
      checkEvery = std::clamp<int64_t>(int64_t(0.05 / std::max(perBoundary, 1e-9)), 1, 64);
    }
    return v[0] > 0 ? (sig ? sig : -1) : 0;
  };
  const bool checkpointing = !o.checkpointPath.empty();
  const auto start = Clock::now();
  bool stop = false;

  if (o.epochs == 0 && evaluate) { // --epochs 0: evaluate the parameters only
    std::vector<double> results = dtc::rt::evaluate(s, exec, s.data.test);
    if (root) {
      fmt::print("eval{}\n", testResults(spec, results));
      std::fflush(stdout);
    }
  }

  std::string stepName;
  int signal = 0;
  for (int64_t epoch = begin.epoch; epoch <= o.epochs && !stop; ++epoch) {
    const auto epochStart = Clock::now();
    const int64_t startPosition = epoch == begin.epoch ? begin.epochSamples : 0;
    sampler.setEpoch(epoch, startPosition);
    progress.beginEpoch(epoch, sampler.numBatches());
    double lossSum = 0;
    int64_t seen = 0, globalSeen = 0;
    int64_t lastB = -1; // the epoch's last step done
    // Reads the outputs of the pending steps and accounts for them.
    auto flush = [&] {
      if (pending.empty())
        return;
      const size_t count = pending.size();
      exec.readOutputs(int64_t(count), outs.data());
      for (size_t k = 0; k < count; ++k) {
        const Pending &p = pending[k];
        const float loss = outs[k * numOutputs];
        if (!std::isfinite(loss))
          throw Error(fmt::format("the loss became {} at epoch {} step {}; try a lower "
                                  "learning rate (--lr)",
                                  loss, p.epoch, p.step));
        lossSum += double(loss) * double(p.n);
        seen += p.n;
        globalSeen += p.global;
      }
      if (stepMetrics) { // the global means of each step
        const size_t w = numOutputs + 1;
        for (size_t k = 0; k < count; ++k) {
          for (size_t i = 0; i < numOutputs; ++i)
            stepSums[k * w + i] = double(outs[k * numOutputs + i]) * double(pending[k].n);
          stepSums[k * w + numOutputs] = double(pending[k].n);
        }
        comm.allreduceSum(stepSums.data(), int64_t(count * w));
        for (size_t k = 0; k < count; ++k) {
          const double total = stepSums[k * w + numOutputs];
          for (size_t i = 0; i < numOutputs; ++i)
            stepMeans[i] = float(stepSums[k * w + i] / total);
          metrics.row(pending[k].epoch, pending[k].step, int64_t(total), stepMeans,
                      pending[k].lr, pending[k].seconds);
        }
      }
      progress.update(pending.back().batchIndex + 1, lossSum / double(seen),
                      double(globalSeen) / secondsSince(epochStart));
      pending.clear();
    };
    int staged = -1;
    if (sampler.numBatches() > 0) {
      int64_t n0;
      const int64_t *idx0 = sampler.batch(0, &n0);
      staged = exec.stage(trainSet, idx0, n0);
    }
    for (int64_t b = 0; b < sampler.numBatches() && !stop; ++b) {
      int64_t n;
      sampler.batch(b, &n);
      s.hyper.step = ++step;
      const bool traced = tracer && step - begin.step <= o.traceSteps;
      if (traced) {
        exec.setTracer(tracer.get());
        comm.setTracer(tracer.get());
        stepName = fmt::format("step {}", step);
        tracer->begin(stepName.c_str());
      }
      exec.train(staged, int64_t(pending.size()), sampler.gradSeed(b));
      if (traced) {
        tracer->end();
        if (step - begin.step == o.traceSteps)
          finishTrace(o.traceSteps);
      }
      pending.push_back({epoch, step, b, n, sampler.globalBatch(b), s.hyper.lr,
                         secondsSince(start)});
      lastB = b;
      stop = o.maxSteps > 0 && step >= o.maxSteps;
      const bool last = b + 1 == sampler.numBatches();
      const bool checkpointDue =
          checkpointing && o.checkpointEvery > 0 && step % o.checkpointEvery == 0;
      if (!last && !stop) { // overlaps this step on a device
        int64_t next;
        const int64_t *idx = sampler.batch(b + 1, &next);
        staged = exec.stage(trainSet, idx, next);
      }
      if (int64_t(pending.size()) == slots || checkpointDue)
        flush();
      if (!pending.empty() || !checkpointing)
        continue;
      // A step boundary: outputs read, every rank here after the same step.
      if ((signal = preempted(/*boundary=*/true)) != 0)
        break;
      if (checkpointDue && !last && !stop) // the epoch's end writes one below
        writeCheckpoint(epoch, sampler.positionAfter(b));
    }
    flush();
    const int64_t position = lastB >= 0 ? sampler.positionAfter(lastB) : startPosition;
    if (signal == 0 && checkpointing)
      signal = preempted(/*boundary=*/false);
    if (signal != 0) {
      // No evaluation: the resumed run ends this epoch (position may be its
      // end) and evaluates.
      progress.endEpoch();
      writeCheckpoint(epoch, position);
      break;
    }
    double totals[2] = {lossSum, double(seen)}; // over all ranks
    comm.allreduceSum(totals, 2);
    const double trainSeconds = secondsSince(epochStart);
    progress.endEpoch();

    std::string line = fmt::format("epoch {}/{} train_loss {:.4f}", epoch, o.epochs,
                                   totals[0] / std::max(totals[1], 1.0));
    if (evaluate)
      line += testResults(spec, dtc::rt::evaluate(s, exec, s.data.test));
    line += fmt::format(" images/s {:.0f} time {:.2f}s", totals[1] / trainSeconds,
                        secondsSince(epochStart));
    if (root) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    }
    // The epoch's end, or --max-steps inside it.
    const bool epochComplete = lastB + 1 == sampler.numBatches();
    if (epochComplete)
      writeCheckpoint(epoch + 1, 0);
    else
      writeCheckpoint(epoch, position);
  }
  if (tracer) // fewer steps than --trace-steps
    finishTrace(step - begin.step);
  if (root)
    metrics.commit();

  if (signal != 0) {
    if (root) {
      const char *what =
          signal > 0 ? PreemptionHandler::name(signal) : "a signal to another rank";
      fmt::print("stopped by {} after step {}: the training state is in {}; continue with "
                 "--resume {}\n",
                 what, step, o.checkpointPath, o.checkpointPath);
      std::fflush(stdout);
    }
    // Nobody exits before rank 0 has written the checkpoint (a launcher
    // ends the job when the first rank exits non-zero).
    comm.barrier();
    return kExitPreempted;
  }

  if (!o.savePath.empty() && root) {
    exec.persistentToHost();
    saveCheckpoint(o.savePath, spec, s.persistent.data());
    if (!o.quiet)
      fmt::print("saved parameters to {}\n", o.savePath);
  }
  return 0;
}

// Before any work: every file the run will write can be created (rank 0
// writes --save, --checkpoint and --metrics; every rank its --trace).
void checkOutputs(CommBase &comm, const Options &o) {
  onEveryRank(comm, "to check its output files", [&] {
    if (!o.tracePath.empty())
      checkWritable(Tracer::rankPath(o.tracePath, comm.rank()), "trace file");
    if (comm.rank() != 0)
      return;
    if (!o.savePath.empty())
      checkWritable(o.savePath, "parameters file");
    if (!o.checkpointPath.empty())
      checkWritable(o.checkpointPath, "checkpoint");
    if (!o.metricsPath.empty())
      checkWritable(o.metricsPath, "metrics file");
  });
}

// BLAS threads without --threads: the cores this process may run on when
// the launcher bound it to some (mpirun binds each of 2 ranks to a core),
// else the machine's cores shared by the ranks on this node.
int defaultThreads(const CommBase &comm) {
  const int hw = std::max(1, int(std::thread::hardware_concurrency()));
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < hw)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1, hw / std::max(1, comm.localSize()));
}

void reportError(const char *what, const CommBase *comm) {
  std::fflush(stdout);
  if (comm && comm->size() > 1)
    fmt::print(stderr, "train: error: rank {}: {}\n", comm->rank(), what);
  else
    fmt::print(stderr, "train: error: {}\n", what);
  std::fflush(stderr);
}

} // namespace

int runMain(int argc, char **argv, const ModelSpec &spec) {
  std::unique_ptr<CommBase> comm;
  std::string error;
  bool collective = false, fatal = false;
  try {
    validateSpec(spec);
    Options opts;
    if (std::optional<int> exitCode = parseOptions(argc, argv, spec, opts))
      return *exitCode;
    const DeviceChoice device = chooseDevice(spec, opts.device);
    const LaunchInfo launch = detectLaunch(opts.localRankArg);
    if (device.cuda)
      deviceBackend()->preselectDevice(launch.localRank >= 0 ? launch.localRank
                                                             : launch.torchLocalRank);
    comm = createCommunicator(opts.comm, opts.commTimeout, launch,
                              argc > 0 && argv[0] ? argv[0] : "train", device.cuda);
    comm->setBuckets(spec);
    if (device.cuda) {
      // Ranks started by an MPI launcher agree on the run (--device
      // included) before NCCL starts; torchrun's ranks only meet in NCCL.
      checkSameRun(*comm, spec, opts, true);
      comm = deviceBackend()->createCommunicator(std::move(comm), wantNccl(opts.comm, launch),
                                                 launch, opts);
      comm->setBuckets(spec);
    }
    checkLaunchAgreement(launch, *comm);
    checkSameRun(*comm, spec, opts, device.cuda);
    if (opts.gradcheck && comm->size() > 1)
      throw CollectiveError(fmt::format("--gradcheck checks a single process, but {} ranks "
                                        "were started; run it without a launcher",
                                        comm->size()));
    const int threads = opts.threadsGiven ? opts.threads : defaultThreads(*comm);
    // Overlap needs a core for the communication thread besides the
    // compute threads: without one, an all-reduce started during backward
    // takes turns with the computation, and spins while it waits for the
    // other ranks (deep_mlp on 2 ranks x 1 thread, 2 cores: 6% slower).
    // With the default --threads (all of the rank's cores), auto is off.
    if (!device.cuda)
      comm->setDeferredStarts(!overlapAllreduces(opts.overlap, defaultThreads(*comm), threads));
    setKernelThreads(device.cuda ? 1 : threads, comm->localSize() == 1);
    if (!device.cuda) // on a device the steps' GEMMs are cuBLAS's
      gemm_engine::setThreads(threads);
    checkOutputs(*comm, opts);
    checkStepMemory(spec, opts.batch, /*hostSteps=*/!device.cuda);
    DataSplits data = loadData(opts.data, spec);
    checkSameData(*comm, data);
    std::optional<LoadedTrainingState> resumed = loadResume(*comm, spec, opts, data);
    RunStart begin;
    if (resumed) {
      begin.step = resumed->state.step;
      begin.epoch = resumed->state.epoch;
      begin.epochSamples = resumed->state.epochSamples;
      if (begin.epoch > opts.epochs || (opts.maxSteps > 0 && begin.step >= opts.maxSteps))
        throw CollectiveError(fmt::format(
            "the run in '{}' is complete ({} steps, next epoch {} of --epochs {}{}); give a "
            "larger --epochs or --max-steps to train on",
            opts.resumePath == "auto" ? opts.checkpointPath : opts.resumePath, begin.step,
            begin.epoch, opts.epochs,
            opts.maxSteps > 0 ? fmt::format(", --max-steps {}", opts.maxSteps) : ""));
    }
    if (resumed) // its --batch
      checkStepMemory(spec, opts.batch, /*hostSteps=*/!device.cuda);
    Session session(spec, opts, std::move(data), *comm, /*hostSteps=*/!device.cuda,
                    resumed ? &resumed->persistent : nullptr);
    resumed.reset();
    std::unique_ptr<Executor> exec =
        device.cuda ? deviceBackend()->createExecutor(session) : makeCpuExecutor(session);
    if (!opts.quiet && comm->rank() == 0)
      printHeader(session, *exec, device);
    if (opts.gradcheck)
      return runGradcheck(session, *exec) ? 0 : 1;
    return train(session, *exec, begin);
  } catch (const std::bad_alloc &) {
    error = "out of memory";
  } catch (const std::exception &e) {
    error = e.what();
    collective = dynamic_cast<const CollectiveError *>(&e) != nullptr;
    fatal = dynamic_cast<const FatalCommError *>(&e) != nullptr;
  } catch (...) {
    error = "unknown exception";
  }
  reportError(error.c_str(), comm.get());
  // Another rank may be blocked in a collective waiting for this one, or
  // this rank's communication thread may be stuck inside MPI: end the
  // process now (the launcher then ends the others). Errors every rank
  // raised together shut down cleanly instead.
  if (fatal || (comm && (comm->broken() || (comm->size() > 1 && !collective))))
    ::_exit(1);
  return 1;
}

} // namespace dtc::rt
