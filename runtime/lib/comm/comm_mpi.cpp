//===- comm_mpi.cpp - mpi and gloo: a communication thread over a plugin ===//
//
// MPI implementations progress non-blocking collectives only while some MPI
// call runs, so an MPI_Iallreduce started by the step would mostly run
// inside the step's final wait. Instead, one dedicated thread owns every MPI
// call: it calls MPI_Init_thread(MPI_THREAD_FUNNELED) (so it is MPI's main
// thread), then executes a FIFO of operations (the bucket collectives:
// all-reduces from allreduceStart, reduce-scatters from reduceScatterStart,
// all-gathers from allgatherStart; and the driver's blocking collectives,
// which queue behind pending bucket collectives) with blocking MPI calls,
// and finally MPI_Finalize. A bucket has one slot (an Op) per collective
// kind, so that its all-gather can be in flight with its reduce-scatter.
// The gloo plugin (torchrun, TF_CONFIG) has the same table and runs under
// the same thread: its init is the rendezvous, its calls gloo's collectives.
// The compute thread only enqueues and waits on a condition variable, with
// the --comm-timeout deadline (with deferred starts, a bucket is enqueued
// at its wait, after every bucket started before it); a wait that times out marks the communicator
// broken (its thread may be stuck inside MPI or gloo forever), and the driver then
// ends the process with _exit after printing the error.
//
//===----------------------------------------------------------------------===//
#include "comm/comm_impl.h"

#include "comm/mpi_plugin.h"
#include "support/tracer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dtc::rt {
namespace {

constexpr size_t kErrLen = 1024;

// "MPI" or "gloo", for messages.
std::string label(const DtcrtMpiApi *api) {
  return std::strcmp(api->backend, "mpi") == 0 ? "MPI" : api->backend;
}

class PluginCommunicator final : public CommBase {
public:
  PluginCommunicator(double timeoutSeconds, const DtcrtMpiApi *api)
      : CommBase(timeoutSeconds), api_(api), ring_(64) {}

  void setTracer(Tracer *t) override {
    std::lock_guard<std::mutex> lock(traceM_);
    tracer_ = t;
  }

  ~PluginCommunicator() override {
    if (!thread_.joinable())
      return;
    if (broken_ || threadExited()) {
      if (broken_)
        thread_.detach(); // stuck inside MPI or gloo: the caller _exits
      else
        thread_.join();
      return;
    }
    Op &op = blocking_;
    std::unique_lock<std::mutex> lock(m_);
    deferred_.clear(); // never waited for (a step that threw): their buffers are gone
    op = Op{};
    op.kind = Kind::Shutdown;
    push(&op);
    work_.notify_one();
    if (!done_.wait_until(lock, deadline(Clock::now()), [&] { return op.done; })) {
      std::fflush(stdout);
      fmt::print(stderr, "train: error: rank {}: {} did not complete within {:g} s\n", rank_,
                 label(api_) == "MPI" ? "MPI_Finalize" : "the gloo shutdown", timeout_);
      std::fflush(stderr);
      ::_exit(1);
    }
    if (!op.error.empty())
      fmt::print(stderr, "train: warning: rank {}: {}\n", rank_, op.error);
    lock.unlock();
    thread_.join();
  }

  // Starts the thread and waits until it has initialized MPI (gloo: met
  // the other ranks at the rendezvous, if given).
  void start(const Rendezvous *rdzv) {
    char err[kErrLen] = "";
    if (rdzv && api_->setRendezvous &&
        api_->setRendezvous(rdzv->rank, rdzv->size, rdzv->host.c_str(), rdzv->port, timeout_, err,
                            kErrLen))
      throw Error(fmt::format("cannot initialize {}: {}", label(api_), err));
    thread_ = std::thread([this] { run(); });
    std::unique_lock<std::mutex> lock(m_);
    // A rendezvous has the same deadline inside the plugin, whose message
    // (who did not arrive) is the better one: it gets 5 s more here.
    const auto initDeadline =
        deadline(Clock::now()) + std::chrono::seconds(api_->setRendezvous ? 5 : 0);
    if (!done_.wait_until(lock, initDeadline, [&] { return initDone_; })) {
      broken_ = true;
      throw FatalCommError(
          fmt::format("{} initialization did not complete within {:g} s", label(api_), timeout_));
    }
    if (!initError_.empty())
      throw Error(fmt::format("cannot initialize {}: {}", label(api_), initError_));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localRank() const override { return localRank_; }
  int localSize() const override { return localSize_; }
  const char *backend() const override { return api_->backend; }
  std::string libraryVersion() const override { return version_; }
  bool broken() const override { return broken_; }

  Request allreduceStart(int bucket, float *data, int64_t count) override {
    return start(Kind::AllreduceFloat, bucket, data, nullptr, count);
  }

  Request reduceScatterStart(int bucket, float *data, float *shard, int64_t shardCount) override {
    checkShard(bucket, data, shard, shardCount);
    return start(Kind::ReduceScatterFloat, bucket, data, shard, shardCount);
  }

  Request allgatherStart(int bucket, float *data, int64_t shardCount) override {
    return start(Kind::AllgatherFloat, bucket, data, nullptr, shardCount);
  }

  void setDeferredStarts(bool defer) override {
    bool pushed;
    {
      std::lock_guard<std::mutex> lock(m_);
      pushed = pushDeferred(nullptr);
      defer_ = defer;
    }
    if (pushed)
      work_.notify_one();
  }
  bool deferredStarts() const override {
    std::lock_guard<std::mutex> lock(m_);
    return defer_;
  }

  void wait(Request r) override {
    const auto start = Clock::now();
    checkOwn(r);
    const CollectiveKind kind = r.kind();
    const int bucket = r.bucket();
    std::unique_lock<std::mutex> lock(m_);
    const std::unique_ptr<Op> *slot = buckets_.find(kind, bucket);
    if (!slot || !*slot)
      checkInFlight(r, 0, false); // throws: never started here
    Op &op = **slot;
    checkInFlight(r, op.serial, op.pending);
    if (pushDeferred(&op))
      work_.notify_one();
    if (!done_.wait_until(lock, deadline(start), [&] { return op.done; })) {
      broken_ = true;
      throw Error(fmt::format("{} did not complete within {:g} s; another rank may have died "
                              "or stopped",
                              collectiveName(kind, bucket), timeout_));
    }
    op.pending = false;
    if (!op.error.empty()) {
      broken_ = true;
      throw Error(fmt::format("{} failed: {}", collectiveName(kind, bucket), op.error));
    }
    lock.unlock();
    if (tracer_)
      tracer_->span(Tracer::kComputeTid, fmt::format("wait bucket {}", bucket), start,
                    Clock::now());
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    blocking(Kind::Broadcast, data, nullptr, bytes, root);
  }
  void allreduceSum(double *data, int64_t count) override {
    blocking(Kind::AllreduceDouble, data, nullptr, count, 0);
  }
  void allgather(const void *send, void *recv, int64_t bytesPerRank) override {
    blocking(Kind::Allgather, recv, send, bytesPerRank, 0);
  }
  void barrier() override { blocking(Kind::Barrier, nullptr, nullptr, 0, 0); }

  Clock::time_point finishedAt(CollectiveKind kind, int bucket) const override {
    std::lock_guard<std::mutex> lock(m_);
    const std::unique_ptr<Op> *slot = buckets_.find(kind, bucket);
    return slot && *slot ? (*slot)->finished : Clock::time_point();
  }

private:
  // The bucket collectives (the first three: see collectiveOf), then the
  // driver's.
  enum class Kind {
    AllreduceFloat,
    ReduceScatterFloat,
    AllgatherFloat,
    AllreduceDouble,
    Broadcast,
    Allgather,
    Barrier,
    Shutdown
  };
  static bool isBucket(Kind kind) { return kind <= Kind::AllgatherFloat; }
  static CollectiveKind collectiveOf(Kind kind) {
    return kind == Kind::AllreduceFloat       ? CollectiveKind::Allreduce
           : kind == Kind::ReduceScatterFloat ? CollectiveKind::ReduceScatter
                                              : CollectiveKind::Allgather;
  }
  struct Op {
    Kind kind = Kind::Barrier;
    int bucket = -1;
    uint64_t serial = 0; // the latest request's (a bucket collective)
    void *data = nullptr;
    const void *send = nullptr;
    float *shard = nullptr; // a reduce-scatter's result
    int64_t count = 0; // floats/doubles (per rank: reduce-scatter, all-gather), or bytes
    int root = 0;
    Tracer *tracer = nullptr;
    int64_t bytes = 0;    // a bucket's, for the trace
    bool pending = false; // a bucket collective between its start and wait
    bool done = false;
    std::string error;
    Clock::time_point finished;
  };

  Clock::time_point deadline(Clock::time_point from) const {
    return from +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  }

  bool threadExited() {
    std::lock_guard<std::mutex> lock(m_);
    return exited_;
  }

  // The FIFO (a ring that only grows); m_ held.
  void push(Op *op) {
    if (count_ == ring_.size()) {
      std::vector<Op *> bigger(ring_.size() * 2);
      for (size_t i = 0; i < count_; ++i)
        bigger[i] = ring_[(head_ + i) % ring_.size()];
      ring_.swap(bigger);
      head_ = 0;
    }
    ring_[(head_ + count_) % ring_.size()] = op;
    ++count_;
  }
  Op *pop() {
    Op *op = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --count_;
    return op;
  }
  // Every bucket collective: checks and records the start in the bucket's
  // slot for its kind, and enqueues it (or, deferred, leaves it to its wait
  // or the next collective). count: floats (per rank for a reduce-scatter
  // or all-gather).
  Request start(Kind kind, int bucket, float *data, float *shard, int64_t count) {
    const CollectiveKind collective = collectiveOf(kind);
    Request r;
    {
      std::lock_guard<std::mutex> lock(m_);
      std::unique_ptr<Op> &slot = buckets_.at(collective, bucket);
      if (!slot)
        slot = std::make_unique<Op>();
      checkStart(collective, bucket, slot->pending);
      r = newRequest(collective, bucket);
      Op &op = *slot;
      op.kind = kind;
      op.bucket = bucket;
      op.serial = r.serial();
      op.data = data;
      op.shard = shard;
      op.count = count;
      op.tracer = tracer_;
      op.bytes = count * int64_t(sizeof(float)) * (kind == Kind::AllreduceFloat ? 1 : size_);
      op.pending = true;
      op.done = false;
      op.error.clear();
      op.finished = Clock::time_point();
      if (defer_) { // enqueued by its wait, or by a later collective
        deferred_.push_back(&op);
        return r;
      }
      push(&op);
    }
    work_.notify_one();
    return r;
  }

  // Enqueues the deferred bucket collectives in the order they were
  // started: up to and including `upTo` when it is deferred, else (null) all
  // of them; m_ held. Returns whether it enqueued any.
  bool pushDeferred(const Op *upTo) {
    size_t n = deferred_.size();
    if (upTo) {
      auto it = std::find(deferred_.begin(), deferred_.end(), upTo);
      if (it == deferred_.end())
        return false;
      n = size_t(it - deferred_.begin()) + 1;
    }
    for (size_t i = 0; i < n; ++i)
      push(deferred_[i]);
    deferred_.erase(deferred_.begin(), deferred_.begin() + ptrdiff_t(n));
    return n > 0;
  }

  void blocking(Kind kind, void *data, const void *send, int64_t count, int root) {
    const auto start = Clock::now();
    Op &op = blocking_;
    std::unique_lock<std::mutex> lock(m_);
    pushDeferred(nullptr); // started before this collective: they run first
    op = Op{};
    op.kind = kind;
    op.data = data;
    op.send = send;
    op.count = count;
    op.root = root;
    push(&op);
    work_.notify_one();
    auto what = [&] {
      switch (kind) {
      case Kind::Broadcast:
        return fmt::format("broadcast of {} bytes from rank {}", count, root);
      case Kind::AllreduceDouble:
        return fmt::format("all-reduce of {} values", count);
      case Kind::Allgather:
        return fmt::format("allgather of {} bytes per rank", count);
      default:
        return std::string("barrier");
      }
    };
    if (!done_.wait_until(lock, deadline(start), [&] { return op.done; })) {
      broken_ = true;
      throw Error(fmt::format("{} did not complete within {:g} s; another rank may have died or "
                              "stopped",
                              what(), timeout_));
    }
    if (!op.error.empty()) {
      broken_ = true;
      throw Error(fmt::format("{} failed: {}", what(), op.error));
    }
  }

  int execute(Op &op, char *err) {
    switch (op.kind) {
    case Kind::AllreduceFloat:
      return api_->allreduceFloatSum(static_cast<float *>(op.data), op.count, err, kErrLen);
    case Kind::ReduceScatterFloat: {
      float *data = static_cast<float *>(op.data);
      const bool inPlace = op.shard == data + int64_t(rank_) * op.count;
      return api_->reduceScatterFloatSum(data, op.shard, op.count, inPlace, err, kErrLen);
    }
    case Kind::AllgatherFloat:
      return api_->allgatherFloat(static_cast<float *>(op.data), op.count, err, kErrLen);
    case Kind::AllreduceDouble:
      return api_->allreduceDoubleSum(static_cast<double *>(op.data), op.count, err, kErrLen);
    case Kind::Broadcast:
      return api_->broadcast(op.data, op.count, op.root, err, kErrLen);
    case Kind::Allgather:
      return api_->allgather(op.send, op.data, op.count, err, kErrLen);
    case Kind::Barrier:
      return api_->barrier(err, kErrLen);
    case Kind::Shutdown:
      return api_->finalize(err, kErrLen);
    }
    return 0;
  }

  // The communication thread.
  void run() {
    char err[kErrLen] = "", version[256] = "";
    int rank = 0, size = 1, localRank = 0, localSize = 1;
    const int rc =
        api_->init(&rank, &size, &localRank, &localSize, version, sizeof version, err, kErrLen);
    {
      std::lock_guard<std::mutex> lock(m_);
      rank_ = rank;
      size_ = size;
      localRank_ = localRank;
      localSize_ = localSize;
      version_ = version;
      if (rc)
        initError_ = err[0] ? err : "unknown error";
      initDone_ = true;
      exited_ = rc != 0;
    }
    done_.notify_all();
    if (rc)
      return;
    for (;;) {
      Op *op;
      {
        std::unique_lock<std::mutex> lock(m_);
        work_.wait(lock, [&] { return count_ > 0; });
        op = pop();
      }
      const auto start = Clock::now();
      err[0] = 0;
      const int failed = execute(*op, err);
      const auto end = Clock::now();
      if (op->tracer && isBucket(op->kind)) {
        // Only into the tracer it started under, if that is still the
        // current one (setTracer may have ended it since).
        std::lock_guard<std::mutex> lock(traceM_);
        if (op->tracer == tracer_)
          op->tracer->span(Tracer::kCommTid, spanName(collectiveOf(op->kind), op->bucket), start,
                           end, op->bytes);
      }
      const bool shutdown = op->kind == Kind::Shutdown;
      {
        std::lock_guard<std::mutex> lock(m_);
        op->finished = end;
        if (failed)
          op->error = err[0] ? err : "unknown " + label(api_) + " error";
        op->done = true;
        if (shutdown)
          exited_ = true;
      }
      done_.notify_all();
      if (shutdown)
        return;
    }
  }

  const DtcrtMpiApi *api_;
  int rank_ = 0, size_ = 1, localRank_ = 0, localSize_ = 1;
  std::string version_;

  mutable std::mutex m_;
  std::mutex traceM_; // tracer_ against the communication thread's spans
  std::condition_variable work_, done_;
  std::vector<Op *> ring_;
  size_t head_ = 0, count_ = 0;
  BucketSlots<std::unique_ptr<Op>> buckets_; // an Op per (kind, bucket) ever started
  bool defer_ = false;
  std::vector<Op *> deferred_; // started, not yet enqueued (start order, every kind)
  Op blocking_; // the driver's collectives, one at a time
  bool initDone_ = false, exited_ = false;
  std::string initError_;
  std::atomic<bool> broken_{false};
  std::thread thread_;
};

// Loads a plugin and returns its table: libdtcrt_mpi.so (factory
// dtcrt_mpi_plugin) or libdtcrt_gloo.so (dtcrt_gloo_plugin).
struct PluginKind {
  const char *label;   // "MPI", "gloo"
  const char *factory; // DTCRT_MPI_PLUGIN_FACTORY, ...
  const char *file;    // "libdtcrt_mpi.so"
  const char *envVar;  // "DTC_MPI_PLUGIN"
  const char *install; // what to install for the library it links
};
constexpr PluginKind kMpi = {"MPI", DTCRT_MPI_PLUGIN_FACTORY, "libdtcrt_mpi.so", "DTC_MPI_PLUGIN",
                             "the MPI library it was built with"};
constexpr PluginKind kGloo = {"gloo", DTCRT_GLOO_PLUGIN_FACTORY, "libdtcrt_gloo.so",
                              "DTC_GLOO_PLUGIN", "libgloo0"};

const DtcrtMpiApi *loadPlugin(const PluginKind &kind, const std::string &pluginPath,
                              const std::string &why) {
  // RTLD_GLOBAL: MPI libraries dlopen their own components, which expect
  // libmpi's symbols to be global.
  void *handle = ::dlopen(pluginPath.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    throw Error(fmt::format("cannot load the {} plugin '{}' (needed because {}): {}; set "
                            "{} to {}, and install {}",
                            kind.label, pluginPath, why, ::dlerror(), kind.envVar, kind.file,
                            kind.install));
  auto factory = reinterpret_cast<DtcrtMpiFactory>(::dlsym(handle, kind.factory));
  if (!factory)
    throw Error(
        fmt::format("'{}' is not a dtc {} plugin: {}", pluginPath, kind.label, ::dlerror()));
  const DtcrtMpiApi *api = factory();
  if (!api || api->abi != DTCRT_MPI_PLUGIN_ABI)
    throw Error(fmt::format("the {} plugin '{}' has interface version {}, this runtime needs {}; "
                            "use the {} built with it",
                            kind.label, pluginPath, api ? api->abi : -1, DTCRT_MPI_PLUGIN_ABI,
                            kind.file));
  // The plugin (and libmpi) stay loaded until the process ends: unloading
  // MPI after MPI_Finalize is not portable.
  return api;
}

std::unique_ptr<CommBase> startPlugin(const DtcrtMpiApi *api, double timeoutSeconds,
                                      const Rendezvous *rdzv) {
  auto comm = std::make_unique<PluginCommunicator>(timeoutSeconds, api);
  try {
    comm->start(rdzv);
  } catch (const FatalCommError &) {
    comm.release(); // its thread may still be inside MPI_Init
    throw;
  }
  return comm;
}

} // namespace

std::unique_ptr<CommBase> createMpiCommunicator(double timeoutSeconds,
                                                const std::string &pluginPath,
                                                const std::string &why) {
  if (pluginPath.empty())
    throw Error(fmt::format("MPI is needed ({}), but this runtime was built without MPI "
                            "(no libdtcrt_mpi.so); install an MPI development package (e.g. "
                            "libopenmpi-dev) and rebuild dtc",
                            why));
  return startPlugin(loadPlugin(kMpi, pluginPath, why), timeoutSeconds, nullptr);
}

std::unique_ptr<CommBase> createGlooCommunicator(double timeoutSeconds,
                                                 const std::string &pluginPath,
                                                 const std::string &why, const Rendezvous &rdzv) {
  if (pluginPath.empty())
    throw Error(fmt::format("gloo is needed ({}), but this runtime was built without gloo "
                            "(no libdtcrt_gloo.so); install libgloo-dev and rebuild dtc, or "
                            "start the job with mpirun",
                            why));
  return startPlugin(loadPlugin(kGloo, pluginPath, why), timeoutSeconds, &rdzv);
}

} // namespace dtc::rt
