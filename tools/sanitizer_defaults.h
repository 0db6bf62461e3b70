//===- sanitizer_defaults.h - ASan defaults of the tools that link MLIR
//----===//
//
// Included by exactly one file of each program that links Debian's MLIR and
// LLVM libraries (dtc, dtc-opt, the DSL fuzz harness). In a DTC_SANITIZE
// build our code is instrumented and those libraries are not: LLVM's
// BumpPtrAllocator poisons the free part of its slabs in instrumented code
// and hands it out without unpoisoning in the libraries, which ASan would
// report as use-after-poison on every run. allow_user_poisoning=0 turns that
// manual poisoning off; every other ASan check stays. ASAN_OPTIONS still
// overrides it.
//
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTC_ASAN_DEFAULTS 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DTC_ASAN_DEFAULTS 1
#endif

#ifdef DTC_ASAN_DEFAULTS
extern "C" __attribute__((visibility("default"), used)) const char *
__asan_default_options() {
  return "allow_user_poisoning=0";
}
#endif
