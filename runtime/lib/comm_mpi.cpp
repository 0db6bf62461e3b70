//===- comm_mpi.cpp - The MPI backend: a communication thread over the plugin ===//
//
// MPI implementations progress non-blocking collectives only while some MPI
// call runs, so an MPI_Iallreduce started by the step would mostly run
// inside the step's final wait. Instead, one dedicated thread owns every MPI
// call: it calls MPI_Init_thread(MPI_THREAD_FUNNELED) (so it is MPI's main
// thread), then executes a FIFO of operations (bucket all-reduces from
// allreduceStart, and the driver's blocking collectives, which queue behind
// pending all-reduces) with blocking MPI calls, and finally MPI_Finalize.
// The compute thread only enqueues and waits on a condition variable, with
// the --comm-timeout deadline (with deferred starts, a bucket is enqueued
// at its wait, after every bucket started before it); a wait that times out marks the communicator
// broken (its thread may be stuck inside MPI forever), and the driver then
// ends the process with _exit after printing the error.
//
//===----------------------------------------------------------------------===//
#include "comm_impl.h"

#include "mpi_plugin.h"
#include "tracer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <dlfcn.h>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dtc::rt {
namespace {

constexpr size_t kErrLen = 1024;

class MpiCommunicator final : public CommBase {
public:
  MpiCommunicator(double timeoutSeconds, const DtcrtMpiApi *api)
      : CommBase(timeoutSeconds), api_(api), ring_(64) {}

  ~MpiCommunicator() override {
    if (!thread_.joinable())
      return;
    if (broken_ || threadExited()) {
      if (broken_)
        thread_.detach(); // stuck inside MPI: the caller _exits
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
      fmt::print(stderr, "train: error: rank {}: MPI_Finalize did not complete within {:g} s\n",
                 rank_, timeout_);
      std::fflush(stderr);
      ::_exit(1);
    }
    if (!op.error.empty())
      fmt::print(stderr, "train: warning: rank {}: {}\n", rank_, op.error);
    lock.unlock();
    thread_.join();
  }

  // Starts the thread and waits until it has initialized MPI.
  void start() {
    thread_ = std::thread([this] { run(); });
    std::unique_lock<std::mutex> lock(m_);
    if (!done_.wait_until(lock, deadline(Clock::now()), [&] { return initDone_; })) {
      broken_ = true;
      throw FatalCommError(
          fmt::format("MPI initialization did not complete within {:g} s", timeout_));
    }
    if (!initError_.empty())
      throw Error(fmt::format("cannot initialize MPI: {}", initError_));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localRank() const override { return localRank_; }
  int localSize() const override { return localSize_; }
  const char *backend() const override { return "mpi"; }
  std::string libraryVersion() const override { return version_; }
  bool broken() const override { return broken_; }

  void allreduceStart(int bucket, float *data, int64_t count) override {
    {
      std::lock_guard<std::mutex> lock(m_);
      std::unique_ptr<Op> &slot = buckets_[bucket];
      if (!slot)
        slot = std::make_unique<Op>();
      if (slot->pending)
        throw Error(fmt::format("internal error: all-reduce of {} started again before its wait",
                                bucketName(bucket)));
      Op &op = *slot;
      op.kind = Kind::AllreduceFloat;
      op.bucket = bucket;
      op.data = data;
      op.count = count;
      op.tracer = tracer_;
      op.pending = true;
      op.done = false;
      op.error.clear();
      op.finished = Clock::time_point();
      if (defer_) { // enqueued by its wait, or by a later collective
        deferred_.push_back(&op);
        return;
      }
      push(&op);
    }
    work_.notify_one();
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

  void wait(int bucket) override {
    const auto start = Clock::now();
    std::unique_lock<std::mutex> lock(m_);
    auto it = buckets_.find(bucket);
    if (it == buckets_.end() || !it->second->pending)
      throw Error(
          fmt::format("internal error: wait for {}, which was not started", bucketName(bucket)));
    Op &op = *it->second;
    if (pushDeferred(&op))
      work_.notify_one();
    if (!done_.wait_until(lock, deadline(start), [&] { return op.done; })) {
      broken_ = true;
      throw Error(fmt::format("all-reduce of {} did not complete within {:g} s; another rank "
                              "may have died or stopped",
                              bucketName(bucket), timeout_));
    }
    op.pending = false;
    if (!op.error.empty()) {
      broken_ = true;
      throw Error(fmt::format("all-reduce of {} failed: {}", bucketName(bucket), op.error));
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

  Clock::time_point finishedAt(int bucket) const override {
    std::lock_guard<std::mutex> lock(m_);
    auto it = buckets_.find(bucket);
    return it == buckets_.end() ? Clock::time_point() : it->second->finished;
  }

private:
  enum class Kind { AllreduceFloat, AllreduceDouble, Broadcast, Allgather, Barrier, Shutdown };
  struct Op {
    Kind kind = Kind::Barrier;
    int bucket = -1;
    void *data = nullptr;
    const void *send = nullptr;
    int64_t count = 0; // floats/doubles, or bytes
    int root = 0;
    Tracer *tracer = nullptr;
    bool pending = false; // a bucket between allreduceStart and wait
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
  // Enqueues the deferred all-reduces in the order they were started: up to
  // and including `upTo` when it is deferred, else (null) all of them; m_
  // held. Returns whether it enqueued any.
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
      if (op->tracer && op->kind == Kind::AllreduceFloat)
        op->tracer->span(Tracer::kCommTid, fmt::format("allreduce bucket {}", op->bucket), start,
                         end, op->count * int64_t(sizeof(float)));
      const bool shutdown = op->kind == Kind::Shutdown;
      {
        std::lock_guard<std::mutex> lock(m_);
        op->finished = end;
        if (failed)
          op->error = err[0] ? err : "unknown MPI error";
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
  std::condition_variable work_, done_;
  std::vector<Op *> ring_;
  size_t head_ = 0, count_ = 0;
  std::unordered_map<int, std::unique_ptr<Op>> buckets_;
  bool defer_ = false;
  std::vector<Op *> deferred_; // started, not yet enqueued (start order)
  Op blocking_; // the driver's collectives, one at a time
  bool initDone_ = false, exited_ = false;
  std::string initError_;
  std::atomic<bool> broken_{false};
  std::thread thread_;
};

} // namespace

std::unique_ptr<CommBase> createMpiCommunicator(double timeoutSeconds,
                                                const std::string &pluginPath,
                                                const std::string &why) {
  if (pluginPath.empty())
    throw Error(fmt::format("MPI is needed ({}), but this runtime was built without MPI "
                            "(no libdtcrt_mpi.so); install an MPI development package (e.g. "
                            "libopenmpi-dev) and rebuild dtc",
                            why));
  // RTLD_GLOBAL: MPI libraries dlopen their own components, which expect
  // libmpi's symbols to be global.
  void *handle = ::dlopen(pluginPath.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    throw Error(fmt::format("cannot load the MPI plugin '{}' (needed because {}): {}; set "
                            "DTC_MPI_PLUGIN to libdtcrt_mpi.so, and install the MPI library it "
                            "was built with",
                            pluginPath, why, ::dlerror()));
  auto factory = reinterpret_cast<DtcrtMpiFactory>(::dlsym(handle, DTCRT_MPI_PLUGIN_FACTORY));
  if (!factory)
    throw Error(fmt::format("'{}' is not a dtc MPI plugin: {}", pluginPath, ::dlerror()));
  const DtcrtMpiApi *api = factory();
  if (!api || api->abi != DTCRT_MPI_PLUGIN_ABI)
    throw Error(fmt::format("the MPI plugin '{}' has interface version {}, this runtime needs {}; "
                            "use the libdtcrt_mpi.so built with it",
                            pluginPath, api ? api->abi : -1, DTCRT_MPI_PLUGIN_ABI));
  // The plugin (and libmpi) stay loaded until the process ends: unloading
  // MPI after MPI_Finalize is not portable.
  auto comm = std::make_unique<MpiCommunicator>(timeoutSeconds, api);
  try {
    comm->start();
  } catch (const FatalCommError &) {
    comm.release(); // its thread may still be inside MPI_Init
    throw;
  }
  return comm;
}

} // namespace dtc::rt
