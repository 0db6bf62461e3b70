//===- error.h - The runtime's reportable error --------------------------===//
//
// Everything that can go wrong because of the user's input (options, data
// files, checkpoints) throws dtc::rt::Error; runMain catches it and prints
// "train: error: <message>". Tests check the messages directly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <stdexcept>
#include <string>

namespace dtc::rt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

} // namespace dtc::rt
