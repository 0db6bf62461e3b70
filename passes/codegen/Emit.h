//===- Emit.h - The last step: runtime calls to target source -------------===//
//
// Everything before this step (autodiff, fusion, memory planning, the
// decisions of the back end, the lowering to runtime calls) is
// target-independent and recorded in the IR; a printer only prints it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace dtc {

/// Prints the lowered module (after dtc-lower-to-runtime) as one C++
/// translation unit for the CPU runtime: one function per step, each call a
/// dtc/kernels.h call, elementwise kernels as loop nests, and the ModelSpec +
/// main() that hand them to the runtime (runtime/include/dtc/runtime.h).
mlir::LogicalResult emitCpp(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Prints the lowered module as one CUDA C++ translation unit (for nvcc):
/// the CPU steps of emitCpp plus CUDA steps — the same calls into dtc/cuda.h,
/// each elementwise kernel a generated __global__ kernel — all on the
/// context's stream; the runtime picks the device at run time.
mlir::LogicalResult emitCuda(mlir::ModuleOp module, llvm::raw_ostream &os);

/// A C++ string literal that holds `s` byte for byte, whatever it contains.
std::string cppStringLiteral(llvm::StringRef s);

} // namespace dtc
