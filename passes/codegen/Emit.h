//===- Emit.h - The last step: runtime calls to target source -------------===//
//
// Everything before this step (autodiff, fusion, memory planning, the
// decisions of the back end, the lowering to runtime calls) is
// target-independent and recorded in the IR; a printer only prints it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dialects/dtcrt/DtcrtDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace dtc {

/// Prints the lowered module (after dtc-lower-to-runtime) as the source of
/// its target, its dtcrt.spec's: for the CPU one C++ translation unit (one
/// function per step, each call a dtc/kernels.h call, elementwise kernels as
/// loop nests, and the ModelSpec + main() that hand them to the runtime,
/// runtime/include/dtc/runtime.h); for CUDA one CUDA C++ translation unit
/// (for nvcc) holding those CPU steps plus CUDA steps, the same calls into
/// dtc/cuda.h, each elementwise kernel a generated __global__ kernel, all
/// on the context's stream; the runtime picks the device at run time. What
/// it prints is a function of the dtcrt module alone.
mlir::LogicalResult emitSource(mlir::ModuleOp module, llvm::raw_ostream &os);

/// The lowered module's dtcrt.spec (null unless it has exactly one).
dtcrt::SpecOp specOf(mlir::ModuleOp module);

/// A C++ string literal that holds `s` byte for byte, whatever it contains.
std::string cppStringLiteral(llvm::StringRef s);

} // namespace dtc
