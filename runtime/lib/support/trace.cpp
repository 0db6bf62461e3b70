//===- trace.cpp - Chrome-trace recording of training steps --------------===//
#include "support/tracer.h"

#include "support/files.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace dtc::rt {

void traceBegin(Tracer *t, const char *name) {
  if (t)
    t->begin(name);
}

void traceEnd(Tracer *t) {
  if (t)
    t->end();
}

Tracer::Tracer(int rank) : rank_(rank), origin_(Clock::now()) {
  open_.reserve(16);
  events_.reserve(1024);
}

double Tracer::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Tracer::begin(const char *name) { open_.emplace_back(name, Clock::now()); }

void Tracer::end() {
  const auto now = Clock::now();
  if (open_.empty()) // an unbalanced traceEnd: ignored rather than fatal
    return;
  auto [name, start] = open_.back();
  open_.pop_back();
  span(kComputeTid, name ? name : "?", start, now);
}

void Tracer::span(int tid, std::string name, Clock::time_point start, Clock::time_point end,
                  int64_t bytes) {
  const double ts = micros(start), dur = std::max(0.0, micros(end) - ts);
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back({std::move(name), tid, ts, dur, bytes});
}

void Tracer::setMetadata(const std::string &key, const std::string &value) {
  std::lock_guard<std::mutex> lock(mutex_);
  metadata_.emplace_back(key, value);
}

size_t Tracer::numEvents() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

std::string Tracer::json() const {
  using nlohmann::json;
  std::vector<Event> events;
  std::vector<std::pair<std::string, std::string>> metadata;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events = events_;
    metadata = metadata_;
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event &a, const Event &b) { return a.ts < b.ts; });
  json list = json::array();
  auto meta = [&](const char *what, int tid, const std::string &name) {
    json e = {{"ph", "M"}, {"name", what}, {"pid", rank_}, {"args", {{"name", name}}}};
    if (tid >= 0)
      e["tid"] = tid;
    list.push_back(std::move(e));
  };
  meta("process_name", -1, "rank " + std::to_string(rank_));
  meta("thread_name", kComputeTid, "compute");
  meta("thread_name", kCommTid, "communication");
  for (const Event &ev : events) {
    json e = {{"name", ev.name}, {"ph", "X"},   {"pid", rank_},
              {"tid", ev.tid},   {"ts", ev.ts}, {"dur", ev.dur}};
    if (ev.bytes >= 0)
      e["args"] = {{"bytes", ev.bytes}};
    list.push_back(std::move(e));
  }
  json doc = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  if (!metadata.empty()) {
    json other = json::object();
    for (const auto &[key, value] : metadata)
      other[key] = value;
    doc["otherData"] = std::move(other);
  }
  return doc.dump(1) + "\n";
}

void Tracer::write(const std::string &path) const {
  const std::string text = json();
  AtomicFile out(path, "trace file");
  out.write(text.data(), text.size());
  out.commit();
}

std::string Tracer::rankPath(const std::string &path, int rank) {
  if (rank == 0)
    return path;
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  const std::string tag = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1)) // no extension (or a dotfile)
    return path + tag;
  return path.substr(0, dot) + tag + path.substr(dot);
}

} // namespace dtc::rt
