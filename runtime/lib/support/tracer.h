//===- tracer.h - Chrome-trace recording of training steps ---------------===//
//
// A Tracer collects complete ("X") events of one rank: spans the compute
// thread opens and closes (traceBegin/traceEnd from generated code, the
// trace sink's `step K`, the communicator's `wait bucket K`; tid 1) and spans
// the communication thread records (`allreduce bucket K`, `reducescatter
// bucket K`, `allgather bucket K`; tid 2). write() produces the Chrome
// trace JSON ({"traceEvents": [...]}, ts/dur in microseconds since the
// tracer was created, pid = rank) that chrome://tracing and Perfetto open.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/trace.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dtc::rt {

class Tracer {
public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kComputeTid = 1, kCommTid = 2;

  explicit Tracer(int rank);

  // Compute thread: nested spans.
  void begin(const char *name);
  void end();
  // Any thread: a finished span; bytes >= 0 adds args {"bytes": bytes}.
  void span(int tid, std::string name, Clock::time_point start, Clock::time_point end,
            int64_t bytes = -1);

  // A string in the trace's "otherData" (Chrome's place for metadata).
  void setMetadata(const std::string &key, const std::string &value);

  size_t numEvents() const;
  std::string json() const;
  // Writes json() to path atomically (path.tmp, then rename).
  void write(const std::string &path) const;

  // FILE for rank 0; FILE with ".rankN" before the extension for others
  // (trace.json -> trace.rank1.json, trace -> trace.rank1).
  static std::string rankPath(const std::string &path, int rank);

private:
  struct Event {
    std::string name;
    int tid;
    double ts, dur; // microseconds
    int64_t bytes;
  };
  double micros(Clock::time_point t) const;

  int rank_;
  Clock::time_point origin_;
  std::vector<std::pair<const char *, Clock::time_point>> open_; // compute thread only
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

} // namespace dtc::rt
