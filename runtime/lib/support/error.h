//===- error.h - The runtime's reportable error --------------------------===//
//
// Everything that can go wrong because of the user's input (options, data
// files, checkpoints) throws dtc::rt::Error; runMain catches it and prints
// "train: error: <message>". Tests check the messages directly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace dtc::rt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A kernel's last guard against a class label or an embedding id outside
// its range (the data sets are checked when loaded, naming file and offset):
// the message, the same from the CPU kernels (which print it and exit) and
// from the CUDA executor (which throws it when it reads the outputs).
std::string labelOutsideMessage(int64_t label, int64_t row, int64_t classes);
std::string idOutsideMessage(const char *kernel, int64_t id, int64_t row, int64_t rows);

} // namespace dtc::rt
