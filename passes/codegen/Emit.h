//===- Emit.h - The last step: planned dtc IR to target source ------------===//
//
// Everything before this step (autodiff, fusion, memory planning) is
// target-independent and recorded in the IR; an emitter only prints it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace dtc {

/// Prints the planned module (after dtc-plan-memory) as one C++ translation
/// unit for the CPU runtime: one function per step, GEMMs through the runtime's engine,
/// fused elementwise kernels as loop nests, and the ModelSpec + main() that
/// hand them to the runtime (runtime/include/dtc/runtime.h).
mlir::LogicalResult emitCpp(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Prints the planned module as one CUDA C++ translation unit (for nvcc):
/// the CPU steps of emitCpp plus CUDA steps — GEMMs through cuBLAS, each
/// dtc.fused as a generated __global__ kernel, the rest as dtc/cuda.h calls,
/// one optimizer-update launch per bucket — all on the context's stream; the
/// runtime picks the device at run time.
mlir::LogicalResult emitCuda(mlir::ModuleOp module, llvm::raw_ostream &os);

/// A C++ string literal that holds `s` byte for byte, whatever it contains.
std::string cppStringLiteral(llvm::StringRef s);

} // namespace dtc
