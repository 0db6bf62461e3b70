//===- idx_fuzz.cpp - The IDX (MNIST) reader ------------------------------===//
//
// Input: 2 bytes giving the length L of the images file (little-endian,
// modulo the input size), its L bytes, then the labels file. readIdx must
// return a consistent data set or throw dtc::rt::Error.
//
//===----------------------------------------------------------------------===//
#include "data/data.h"
#include "support/error.h"
#include "fuzz_input.h"

#include <cstdlib>

using namespace dtc::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  size_t split = size_t(data[0] | data[1] << 8);
  data += 2;
  size -= 2;
  split = size ? split % (size + 1) : 0;
  dtc::fuzz::MemFile images(data, split), labels(data + split, size - split);
  try {
    Dataset ds = readIdx(images.path(), labels.path());
    if (ds.x.size() != size_t(ds.size * ds.features) || ds.yClass.size() != size_t(ds.size))
      std::abort();
  } catch (const Error &) {
  }
  return 0;
}
