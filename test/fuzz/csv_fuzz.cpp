//===- csv_fuzz.cpp - The CSV reader --------------------------------------===//
//
// Input: a CSV file, read as class labels + 3 features and as 2 value labels
// + 2 features. Every sample must be complete and finite, or the reader
// throws dtc::rt::Error.
//
//===----------------------------------------------------------------------===//
#include "data/data.h"
#include "support/error.h"
#include "fuzz_input.h"

#include <cmath>
#include <cstdlib>

using namespace dtc::rt;

namespace {
void check(const Dataset &ds) {
  if (ds.x.size() != size_t(ds.size * ds.features) || ds.lines.size() != size_t(ds.size))
    std::abort();
  for (float v : ds.x)
    if (!std::isfinite(v))
      std::abort();
  for (float v : ds.yValue)
    if (!std::isfinite(v))
      std::abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dtc::fuzz::MemFile file(data, size);
  try {
    check(readCsv(file.path(), LabelKind::Class, 1, 3));
  } catch (const Error &) {
  }
  try {
    check(readCsv(file.path(), LabelKind::Value, 2, 2));
  } catch (const Error &) {
  }
  return 0;
}
