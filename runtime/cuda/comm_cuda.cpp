//===- comm_cuda.cpp - The device communicators: local and NCCL ----------===//
#include "device_comm.h"

#include "cuda_util.h"
#include "options/options.h"
#include "comm/rendezvous.h"
#include "support/tracer.h"

#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace dtc::rt {

void DeviceComm::abortJob(const std::string &message) {
  std::fflush(stdout);
  if (size() > 1)
    fmt::print(stderr, "train: error: rank {}: {}\n", rank(), message);
  else
    fmt::print(stderr, "train: error: {}\n", message);
  std::fflush(stderr);
  abortCollectives();
  ::_exit(1);
}

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

//===--- one rank ---------------------------------------------------------===//

class CudaLocalComm final : public DeviceComm {
public:
  CudaLocalComm(std::unique_ptr<CommBase> base, int device)
      : DeviceComm(base->timeoutSeconds()), base_(std::move(base)), device_(device) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  int localRank() const override { return base_->localRank(); }
  int localSize() const override { return 1; }
  const char *backend() const override { return "local"; }
  void setComputeStream(cudaStream_t stream) override { compute_ = stream; }
  int device() const override { return device_; }

  Request allreduceStart(int bucket, float *data, int64_t count) override {
    (void)data; // the sum over one rank
    return start(CollectiveKind::Allreduce, bucket, count * int64_t(sizeof(float)), [] {});
  }

  Request reduceScatterStart(int bucket, float *data, float *shard, int64_t shardCount) override {
    checkShard(bucket, data, shard, shardCount);
    const size_t bytes = size_t(shardCount) * sizeof(float);
    if (shard != data && bytes > 0 && !compute_) // in place: shard is data (rank 0)
      throw Error("internal error: a reduce-scatter started before the compute stream was set");
    return start(CollectiveKind::ReduceScatter, bucket, int64_t(bytes), [&] {
      if (shard != data && bytes > 0) // ordered after the step's work, as its kernels
        cudaCheck(cudaMemcpyAsync(shard, data, bytes, cudaMemcpyDeviceToDevice, compute_),
                  "cudaMemcpyAsync");
    });
  }

  Request allgatherStart(int bucket, float *data, int64_t shardCount) override {
    (void)data; // this rank's part is the whole
    return start(CollectiveKind::Allgather, bucket, shardCount * int64_t(sizeof(float)), [] {});
  }

  void wait(Request r) override {
    const auto start = Clock::now();
    checkOwn(r);
    Slot &slot = slots_.at(r.kind(), r.bucket());
    checkInFlight(r, slot.serial, slot.pending);
    slot.pending = false;
    if (tracer_)
      tracer_->span(Tracer::kComputeTid, fmt::format("wait bucket {}", r.bucket()), start,
                    Clock::now());
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    base_->broadcast(data, bytes, root);
  }
  void allreduceSum(double *data, int64_t count) override { base_->allreduceSum(data, count); }
  void allgather(const void *send, void *recv, int64_t bytesPerRank) override {
    base_->allgather(send, recv, bytesPerRank);
  }
  void barrier() override { base_->barrier(); }
  Clock::time_point finishedAt(CollectiveKind, int) const override { return {}; }

private:
  struct Slot {
    uint64_t serial = 0;  // the latest request's; 0: never started
    bool pending = false; // between the start and wait
  };

  // Every bucket collective: checks and records the start, queues `work`
  // (what the collective does over one rank) and traces it.
  template <class Work>
  Request start(CollectiveKind kind, int bucket, int64_t bytes, const Work &work) {
    Slot &slot = slots_.at(kind, bucket);
    checkStart(kind, bucket, slot.pending);
    const auto began = Clock::now();
    work();
    const Request r = newRequest(kind, bucket);
    slot.serial = r.serial();
    slot.pending = true;
    if (tracer_)
      tracer_->span(Tracer::kCommTid, spanName(kind, bucket), began, Clock::now(), bytes);
    return r;
  }

  std::unique_ptr<CommBase> base_;
  int device_;
  cudaStream_t compute_ = nullptr;
  BucketSlots<Slot> slots_;
};

//===--- NCCL -------------------------------------------------------------===//

std::string ncclMessage(ncclResult_t r, ncclComm_t comm) {
  std::string m = ncclGetErrorString(r);
  if (const char *last = ncclGetLastError(comm); last && *last)
    m += fmt::format(" ({})", last);
  return m;
}

class NcclComm final : public DeviceComm {
public:
  // base: the MPI communicator NCCL was bootstrapped with (the driver's
  // collectives go through it), or null (they go through NCCL).
  NcclComm(std::unique_ptr<CommBase> base, double timeoutSeconds, int rank, int size,
           int localRank, int localSize, int device)
      : DeviceComm(timeoutSeconds), base_(std::move(base)), rank_(rank), size_(size),
        localRank_(localRank), localSize_(localSize), device_(device) {}

  ~NcclComm() override {
    if (comm_) {
      if (broken_) {
        ncclCommAbort(comm_);
      } else {
        cudaStreamSynchronize(stream_);
        ncclCommDestroy(comm_);
      }
    }
    buckets_.forEach([](CollectiveKind, int, Bucket &b) {
      if (b.done)
        cudaEventDestroy(b.done);
    });
    if (ready_)
      cudaEventDestroy(ready_);
    if (hostDone_)
      cudaEventDestroy(hostDone_);
    if (scratch_)
      cudaFree(scratch_);
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  // Creates the communication stream (high priority: all-reduces overtake
  // the backward kernels queued behind them) and joins the NCCL
  // communicator; a watchdog ends the process if that does not complete
  // within the timeout (e.g. a rank never started).
  void init(const ncclUniqueId &id) {
    int least = 0, greatest = 0;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
    cudaCheck(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest),
              "cudaStreamCreateWithPriority");
    cudaCheck(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    cudaCheck(cudaEventCreateWithFlags(&hostDone_, cudaEventDisableTiming), "cudaEventCreate");
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> lock(m);
      if (!cv.wait_for(lock, seconds(timeout_), [&] { return done; }))
        abortJob(fmt::format("NCCL initialization ({} ranks) did not complete within {:g} s; "
                             "another rank may have died or never started",
                             size_, timeout_));
    });
    const ncclResult_t r = ncclCommInitRank(&comm_, size_, id, rank_);
    {
      std::lock_guard<std::mutex> lock(m);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
    if (r != ncclSuccess) {
      comm_ = nullptr;
      throw Error(fmt::format("NCCL initialization failed: {}", ncclMessage(r, nullptr)));
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localRank() const override { return localRank_; }
  int localSize() const override { return localSize_; }
  const char *backend() const override { return "nccl"; }
  std::string libraryVersion() const override {
    int v = 0;
    ncclGetVersion(&v);
    return fmt::format("NCCL {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
  }
  bool broken() const override { return broken_; }
  void setComputeStream(cudaStream_t stream) override { compute_ = stream; }
  int device() const override { return device_; }
  bool canHang() const override { return size_ > 1; }

  Request allreduceStart(int bucket, float *data, int64_t count) override {
    return start(CollectiveKind::Allreduce, bucket, count * int64_t(sizeof(float)), [&] {
      return ncclAllReduce(data, data, size_t(count), ncclFloat, ncclSum, comm_, stream_);
    });
  }

  // In place when shard is data + rank * shardCount (NCCL's convention).
  Request reduceScatterStart(int bucket, float *data, float *shard, int64_t shardCount) override {
    checkShard(bucket, data, shard, shardCount);
    const int64_t bytes = shardCount * size_ * int64_t(sizeof(float));
    return start(CollectiveKind::ReduceScatter, bucket, bytes, [&] {
      return ncclReduceScatter(data, shard, size_t(shardCount), ncclFloat, ncclSum, comm_,
                               stream_);
    });
  }

  // In place: this rank's part is data + rank * shardCount.
  Request allgatherStart(int bucket, float *data, int64_t shardCount) override {
    const int64_t bytes = shardCount * size_ * int64_t(sizeof(float));
    return start(CollectiveKind::Allgather, bucket, bytes, [&] {
      return ncclAllGather(data + int64_t(rank_) * shardCount, data, size_t(shardCount),
                           ncclFloat, comm_, stream_);
    });
  }

  void wait(Request r) override {
    const auto start = Clock::now();
    checkOwn(r);
    Bucket *b = buckets_.find(r.kind(), r.bucket());
    if (!b || !b->done)
      checkInFlight(r, 0, false); // throws: never started here
    checkInFlight(r, b->seq, b->pending);
    cudaCheck(cudaStreamWaitEvent(compute_, b->done, 0), "cudaStreamWaitEvent");
    b->pending = false;
    if (tracer_)
      tracer_->span(Tracer::kComputeTid, fmt::format("wait bucket {}", r.bucket()), start,
                    Clock::now());
  }

  std::string asyncError() override {
    ncclResult_t async = ncclSuccess;
    if (comm_ && ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress)
      return "NCCL error: " + ncclMessage(async, comm_);
    return {};
  }

  std::string stalled() override {
    if (std::string error = asyncError(); !error.empty())
      return error;
    int oldest = -1;
    CollectiveKind oldestKind = CollectiveKind::Allreduce;
    uint64_t oldestSeq = 0;
    buckets_.forEach([&](CollectiveKind kind, int bucket, Bucket &b) {
      if (b.done && cudaEventQuery(b.done) == cudaErrorNotReady &&
          (oldest < 0 || b.seq < oldestSeq)) {
        oldest = bucket;
        oldestKind = kind;
        oldestSeq = b.seq;
      }
    });
    cudaGetLastError(); // clear cudaErrorNotReady
    return oldest < 0 ? std::string() : collectiveName(oldestKind, oldest);
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    if (base_)
      return base_->broadcast(data, bytes, root);
    char *p = static_cast<char *>(data);
    for (int64_t off = 0; off < bytes; off += kChunk) {
      const size_t n = size_t(std::min(kChunk, bytes - off));
      char *dev = static_cast<char *>(scratch(n));
      if (rank_ == root)
        cudaCheck(cudaMemcpyAsync(dev, p + off, n, cudaMemcpyHostToDevice, stream_),
                  "cudaMemcpyAsync");
      check(ncclBroadcast(dev, dev, n, ncclUint8, root, comm_, stream_), "broadcast");
      finish(fmt::format("broadcast of {} bytes from rank {}", bytes, root));
      if (rank_ != root)
        cudaCheck(cudaMemcpy(p + off, dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
    }
  }

  void allreduceSum(double *data, int64_t count) override {
    if (base_)
      return base_->allreduceSum(data, count);
    const size_t bytes = size_t(count) * sizeof(double);
    if (bytes == 0)
      return;
    double *dev = static_cast<double *>(scratch(bytes));
    cudaCheck(cudaMemcpyAsync(dev, data, bytes, cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync");
    check(ncclAllReduce(dev, dev, size_t(count), ncclDouble, ncclSum, comm_, stream_),
          "all-reduce");
    finish(fmt::format("all-reduce of {} values", count));
    cudaCheck(cudaMemcpy(data, dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

  void allgather(const void *send, void *recv, int64_t bytesPerRank) override {
    if (base_)
      return base_->allgather(send, recv, bytesPerRank);
    const size_t n = size_t(bytesPerRank);
    if (n == 0)
      return;
    char *dev = static_cast<char *>(scratch(n * size_t(size_)));
    cudaCheck(cudaMemcpyAsync(dev + n * size_t(rank_), send, n, cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync");
    check(ncclAllGather(dev + n * size_t(rank_), dev, n, ncclUint8, comm_, stream_), "allgather");
    finish(fmt::format("allgather of {} bytes per rank", bytesPerRank));
    cudaCheck(cudaMemcpy(recv, dev, n * size_t(size_), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

  void barrier() override {
    if (base_)
      return base_->barrier();
    float *dev = static_cast<float *>(scratch(sizeof(float)));
    check(ncclAllReduce(dev, dev, 1, ncclFloat, ncclSum, comm_, stream_), "barrier");
    finish("barrier");
  }

  Clock::time_point finishedAt(CollectiveKind, int) const override { return {}; }

protected:
  void abortCollectives() override {
    broken_ = true;
    if (comm_)
      ncclCommAbort(comm_);
    comm_ = nullptr;
  }

private:
  static constexpr int64_t kChunk = int64_t(64) << 20; // broadcast pieces

  struct Bucket {
    cudaEvent_t done = nullptr;
    bool pending = false; // between the start and wait
    uint64_t seq = 0;     // the latest request's serial (start order)
  };

  // Every bucket collective: orders `collective` (the NCCL call, on the
  // communication stream) after the work queued on the compute stream,
  // records the done event of the bucket's slot for `kind` and traces the
  // start (bytes: the bucket's).
  template <class Collective>
  Request start(CollectiveKind kind, int bucket, int64_t bytes, const Collective &collective) {
    if (!compute_)
      throw Error(fmt::format("internal error: {} {} started before the compute stream was set",
                              kind == CollectiveKind::Allreduce ? "an" : "a", kindName(kind)));
    Bucket &b = buckets_.at(kind, bucket);
    if (!b.done) // first use (the first step)
      cudaCheck(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming), "cudaEventCreate");
    checkStart(kind, bucket, b.pending);
    const auto began = Clock::now();
    cudaCheck(cudaEventRecord(ready_, compute_), "cudaEventRecord");
    cudaCheck(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    const ncclResult_t r = collective();
    if (r != ncclSuccess) {
      broken_ = true;
      throw Error(
          fmt::format("{} failed: {}", collectiveName(kind, bucket), ncclMessage(r, comm_)));
    }
    cudaCheck(cudaEventRecord(b.done, stream_), "cudaEventRecord");
    const Request request = newRequest(kind, bucket);
    b.pending = true;
    b.seq = request.serial(); // start order
    if (tracer_) // when it was queued; the device timeline is in Nsight Systems
      tracer_->span(Tracer::kCommTid, spanName(kind, bucket), began, Clock::now(), bytes);
    return request;
  }

  void check(ncclResult_t r, const char *what) {
    if (r == ncclSuccess)
      return;
    broken_ = true;
    throw Error(fmt::format("NCCL {} failed: {}", what, ncclMessage(r, comm_)));
  }

  // Device memory for the driver's collectives; grows (between steps).
  void *scratch(size_t bytes) {
    if (bytes <= scratchBytes_)
      return scratch_;
    cudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    if (scratch_)
      cudaFree(scratch_);
    scratch_ = nullptr;
    scratchBytes_ = 0;
    cudaCheck(cudaMalloc(&scratch_, bytes), "cudaMalloc (collective scratch)");
    scratchBytes_ = bytes;
    return scratch_;
  }

  // Waits for the communication stream's work so far, polling against the
  // timeout (a rank that died leaves NCCL waiting forever).
  void finish(const std::string &what) {
    cudaCheck(cudaEventRecord(hostDone_, stream_), "cudaEventRecord");
    const auto deadline = Clock::now() + seconds(timeout_);
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      const cudaError_t q = cudaEventQuery(hostDone_);
      if (q == cudaSuccess)
        return;
      if (q != cudaErrorNotReady)
        cudaCheck(q, what.c_str());
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress)
        abortJob(fmt::format("{} failed: NCCL error: {}", what, ncclMessage(async, comm_)));
      if (Clock::now() > deadline)
        abortJob(fmt::format("{} did not complete within {:g} s; another rank may have died or "
                             "stopped",
                             what, timeout_));
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  std::unique_ptr<CommBase> base_; // destroyed last (MPI_Finalize)
  int rank_, size_, localRank_, localSize_, device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr, compute_ = nullptr;
  cudaEvent_t ready_ = nullptr, hostDone_ = nullptr;
  BucketSlots<Bucket> buckets_; // per (kind, bucket)
  void *scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  bool broken_ = false;
};

int envInt(const char *name, int fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n <= 1 << 30 ? int(n) : fallback;
}

// The rendezvous port for torchrun-launched ranks: $DTC_RENDEZVOUS_PORT,
// else MASTER_PORT, or MASTER_PORT + 1 when torchrun's agent serves its own
// store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True).
int rendezvousPort() {
  if (int p = envInt("DTC_RENDEZVOUS_PORT", -1); p > 0)
    return p;
  const int master = envInt("MASTER_PORT", -1);
  if (master <= 0)
    throw Error("torchrun's WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (rank 0 hands the "
                "NCCL id to the others there)");
  const char *agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return agent && (std::strcmp(agent, "True") == 0 || std::strcmp(agent, "1") == 0) ? master + 1
                                                                                     : master;
}

} // namespace

std::unique_ptr<CommBase> createDeviceCommunicator(std::unique_ptr<CommBase> base, bool nccl,
                                                   const LaunchInfo &launch, const Options &opts) {
  int count = 0;
  cudaCheck(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count < 1)
    throw Error("no CUDA device found");
  if (!nccl) {
    const int device = std::max(base->localRank(), 0) % count;
    cudaCheck(cudaSetDevice(device), "cudaSetDevice");
    return std::make_unique<CudaLocalComm>(std::move(base), device);
  }

  const bool viaMpi = std::strcmp(base->backend(), "mpi") == 0;
  int rank = 0, size = 1, localRank = std::max(base->localRank(), 0), localSize = 1;
  if (viaMpi) {
    rank = base->rank();
    size = base->size();
    localRank = base->localRank();
    localSize = base->localSize();
  } else if (launch.torchWorldSize > 1) {
    if (launch.torchRank < 0 || launch.torchRank >= launch.torchWorldSize)
      throw Error(fmt::format("torchrun's RANK must be in [0, WORLD_SIZE={}), got {}",
                              launch.torchWorldSize, launch.torchRank));
    rank = launch.torchRank;
    size = launch.torchWorldSize;
    localRank = std::max(launch.torchLocalRank, 0);
    localSize = envInt("LOCAL_WORLD_SIZE", std::min(size, count));
  }
  // One visible device per rank is fine when the launcher gives each rank
  // its own (a per-rank CUDA_VISIBLE_DEVICES, Slurm's --gpus-per-task).
  if (size > 1 && localSize > count && !(count == 1 && std::getenv("CUDA_VISIBLE_DEVICES")))
    throw Error(fmt::format("{} ranks run on this node but it has {} CUDA device{}; NCCL needs a "
                            "device per rank: start at most {} rank{} per node",
                            localSize, count, count == 1 ? "" : "s", count,
                            count == 1 ? "" : "s"));
  const int device = localRank % count;
  cudaCheck(cudaSetDevice(device), "cudaSetDevice");

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw Error(fmt::format("ncclGetUniqueId failed: {}", ncclMessage(r, nullptr)));
  }
  if (viaMpi) {
    base->broadcast(&id, sizeof id, 0);
  } else if (size > 1) {
    const char *addr = std::getenv("MASTER_ADDR");
    if (!addr || !*addr)
      throw Error("torchrun's WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (rank 0 hands "
                  "the NCCL id to the others there)");
    rendezvousBroadcast(rank, size, addr, rendezvousPort(), opts.commTimeout, &id, sizeof id);
  }
  auto comm = std::make_unique<NcclComm>(viaMpi ? std::move(base) : nullptr, opts.commTimeout,
                                         rank, size, localRank, localSize, device);
  comm->init(id);
  return comm;
}

} // namespace dtc::rt
