//===- resident.h - The process's resident memory, as the OS counts it ----===//
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dtc::rt {

// A "VmRSS:" / "VmHWM:" line of /proc/self/status in bytes (0 when it
// cannot be read): the resident set now, and its peak so far.
inline int64_t procStatusBytes(const char *key) {
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return 0;
  char line[256];
  int64_t kib = 0;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, n) == 0) {
      kib = std::strtoll(line + n, nullptr, 10);
      break;
    }
  std::fclose(f);
  return kib * 1024;
}
inline int64_t residentBytes() { return procStatusBytes("VmRSS:"); }
inline int64_t peakResidentBytes() { return procStatusBytes("VmHWM:"); }

} // namespace dtc::rt
