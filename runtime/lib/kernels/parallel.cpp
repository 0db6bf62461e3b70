//===- parallel.cpp - The helper threads of parallelFor -------------------===//
#include "kernels/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DTC_PAUSE() _mm_pause()
#else
#define DTC_PAUSE() ((void)0)
#endif

namespace dtc::rt {
namespace {

using Clock = std::chrono::steady_clock;


// Chunks per thread: small enough that the threads finish together.
constexpr int64_t kChunksPerThread = 8;
// At most (a job's chunk count and next chunk are 16 bits of job_).
constexpr int64_t kMaxChunks = 0xffff;

class Pool {
public:
  int threads() const { return int(helpers_.size()) + 1; }
  void setSpin(int micros) { spinMicros_.store(std::max(0, micros), std::memory_order_relaxed); }

  void resize(int threads, bool pin) {
    threads = std::max(1, threads);
    if (threads == this->threads())
      return;
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_.store(true, std::memory_order_release);
    }
    wake_.notify_all();
    for (std::thread &t : helpers_)
      t.join();
    helpers_.clear();
    stop_.store(false, std::memory_order_relaxed);
    const std::vector<int> cpus = pin ? helperCpus(threads - 1) : std::vector<int>();
    for (int i = 1; i < threads; ++i) {
      helpers_.emplace_back([this] { helper(); });
      if (!cpus.empty())
        pinTo(helpers_.back().native_handle(), cpus[size_t(i - 1)]);
    }
  }

  // The job is cut into chunks that the caller and the helpers claim from a
  // shared counter, so a helper that wakes late (its core busy with another
  // thread) finds the work done instead of holding the caller up.
  void run(int64_t n, int64_t minPerThread, void (*fn)(void *, int64_t, int64_t), void *ctx) {
    const int64_t most = std::max<int64_t>(1, n / std::max<int64_t>(1, minPerThread));
    if (threads() <= 1 || most <= 1) {
      fn(ctx, 0, n);
      return;
    }
    const int64_t parts =
        std::min({most, int64_t(threads()) * kChunksPerThread, int64_t(kMaxChunks)});
    // Chunks of 16 or more start at multiples of 16 (elements: chunks do not
    // share cache lines); fewer, larger units (heads, blocks of rows) are
    // dealt as they are, so that 48 heads split 24 and 24, not 32 and 16.
    const int64_t even = (n + parts - 1) / parts;
    const int64_t chunk = even >= 16 ? (even + 15) / 16 * 16 : even;
    const int64_t count = (n + chunk - 1) / chunk;
    fn_.store(fn, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    n_.store(n, std::memory_order_relaxed);
    chunk_.store(chunk, std::memory_order_relaxed);
    completed_.store(0, std::memory_order_relaxed);
    const uint64_t gen = (job_.load(std::memory_order_relaxed) >> 32) + 1;
    {
      std::lock_guard<std::mutex> lock(m_);
      // Chunk 0 of `count` of job gen.
      job_.store(gen << 32 | uint64_t(count) << 16, std::memory_order_release);
    }
    wake_.notify_all();
    work(gen);
    // A helper is finishing a chunk. It may share this core (the scheduler
    // likes to wake a thread where its waker runs): after a short spin, give
    // it the core.
    for (int i = 0; completed_.load(std::memory_order_acquire) < count; ++i) {
      if (i < 256)
        DTC_PAUSE();
      else
        std::this_thread::yield();
    }
  }

private:
  // A CPU for each helper, other than the caller's current one, when the
  // process may run on more CPUs than there are helpers; else none (no
  // pinning). Left to itself the scheduler often wakes a helper on its
  // waker's CPU, where the two then take turns (measured: the update twice
  // as slow as with the helper on the other core, in about one run of
  // three). The caller is not pinned: the scheduler moves it off a CPU it
  // would share with a pinned helper.
  static std::vector<int> helperCpus(int helpers) {
    cpu_set_t allowed;
    if (helpers < 1 || ::sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
        CPU_COUNT(&allowed) <= helpers)
      return {};
    const int self = ::sched_getcpu();
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE && int(cpus.size()) < helpers; ++c)
      if (c != self && CPU_ISSET(c, &allowed))
        cpus.push_back(c);
    return int(cpus.size()) == helpers ? cpus : std::vector<int>();
  }
  static void pinTo(pthread_t t, int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ::pthread_setaffinity_np(t, sizeof one, &one); // best effort
  }

  // Claims and runs chunks of job `gen` until none is left. Whether a
  // claim is one of the job's chunks is read from the claim itself, never
  // from a field the caller may be overwriting for its next job: a helper
  // holding the claim after a job's last chunk would otherwise see the next
  // job's larger count, and its claim succeed before that job is published.
  void work(uint64_t gen) {
    uint64_t claim = job_.load(std::memory_order_acquire);
    for (;;) {
      if (claim >> 32 != gen)
        return; // another job by now
      const int64_t k = int64_t(claim & 0xffffu), count = int64_t(claim >> 16 & 0xffffu);
      if (k >= count)
        return;
      if (!job_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel))
        continue;
      // The claim succeeded for this job: its fields stay put until every
      // chunk has completed.
      const int64_t chunk = chunk_.load(std::memory_order_relaxed);
      const int64_t begin = k * chunk;
      const int64_t end = std::min(n_.load(std::memory_order_relaxed), begin + chunk);
      fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), begin, end);
      completed_.fetch_add(1, std::memory_order_release);
      claim = job_.load(std::memory_order_acquire);
    }
  }

  void helper() {
    uint64_t seen = job_.load(std::memory_order_acquire) >> 32;
    auto fresh = [&] { return job_.load(std::memory_order_acquire) >> 32 != seen; };
    for (;;) {
      const auto until =
          Clock::now() + std::chrono::microseconds(spinMicros_.load(std::memory_order_relaxed));
      for (int i = 0; !fresh(); ++i) {
        DTC_PAUSE();
        if ((i & 63) == 63 && Clock::now() > until)
          break;
      }
      if (!fresh()) {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, [&] { return stop_.load(std::memory_order_relaxed) || fresh(); });
      }
      if (stop_.load(std::memory_order_acquire))
        return;
      seen = job_.load(std::memory_order_acquire) >> 32;
      work(seen);
    }
  }

  std::vector<std::thread> helpers_;
  std::mutex m_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false}; // set under m_
  std::atomic<int> spinMicros_{kDefaultHelperSpinMicros};
  // Job number (bits 32-63), its number of chunks (16-31) and its next
  // unclaimed chunk (0-15): a claim (a successful compare-exchange) is of a
  // chunk of the current job, decided by this word alone.
  alignas(64) std::atomic<uint64_t> job_{0};
  alignas(64) std::atomic<int64_t> completed_{0};
  // The job, published by the release store of job_, read only by a thread
  // holding a claim of it (the caller waits for that chunk before it writes
  // the next job's). Atomic (relaxed), as a helper's view of them may lag.
  alignas(64) std::atomic<void (*)(void *, int64_t, int64_t)> fn_{nullptr};
  std::atomic<void *> ctx_{nullptr};
  std::atomic<int64_t> n_{0}, chunk_{0};
};

// Never destroyed: helpers asleep at exit need no join, and an exit from
// another thread cannot race with a destructor.
Pool &pool() {
  static Pool *p = new Pool;
  return *p;
}

} // namespace

void setKernelThreads(int threads, bool pin) { pool().resize(threads, pin); }
void setHelperSpin(int microseconds) { pool().setSpin(microseconds); }
int kernelThreads() { return pool().threads(); }

void parallelFor(int64_t n, int64_t minPerThread, void (*fn)(void *, int64_t, int64_t),
                 void *ctx) {
  if (n <= 0)
    return;
  pool().run(n, minPerThread, fn, ctx);
}

} // namespace dtc::rt
