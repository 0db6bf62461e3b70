//===- DtcrtDialect.td - The runtime-call dialect ------------*- tablegen -*-===//
#ifndef DTCRT_DIALECT_TD
#define DTCRT_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Dtcrt_Dialect : Dialect {
  let name = "dtcrt";
  let cppNamespace = "::dtcrt";
  let summary = "Calls into dtc's runtime: the back end's one lowered form";
  let description = [{
    A planned dtc step (dtc-lower-to-runtime) as the calls the generated
    program makes: buffers at their planned places, sizes, and one op per
    runtime entry point, whose operands are the entry point's parameters in
    order (after the context). The ops here are the runtime ABI, declared
    once: both targets print the same calls, `dtc::kern::` on the CPU and
    `dtc::cuda::` on CUDA, and differ only in how an elementwise kernel is
    launched (a loop nest, or a `__global__` kernel).
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // The dtcrt.* attributes on ops other than dtcrt's own: a lowered step's
  // fixed region of the arena (its bytes; the per-sample region follows).
  let discardableAttrs = (ins "::mlir::IntegerAttr":$fixed_bytes);
}

class Dtcrt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dtcrt_Dialect, mnemonic, traits>;

def Dtcrt_PtrType : TypeDef<Dtcrt_Dialect, "Ptr"> {
  let mnemonic = "ptr";
  let summary = "A pointer to elements of a buffer (float *, int32_t * or int64_t *)";
  let parameters = (ins "::mlir::Type":$element);
  let assemblyFormat = "`<` $element `>`";
}
def Dtcrt_ArrayType : TypeDef<Dtcrt_Dialect, "Array"> {
  let mnemonic = "array";
  let summary = "A host array of integers (a shape, a permutation)";
  let parameters = (ins "::mlir::Type":$element);
  let assemblyFormat = "`<` $element `>`";
}
def Dtcrt_ItemsType : TypeDef<Dtcrt_Dialect, "Items"> {
  let mnemonic = "items";
  let summary = "A host array of dtc::rt::UpdateItem (one optimizer update)";
}
def Dtcrt_HyperType : TypeDef<Dtcrt_Dialect, "Hyper"> {
  let mnemonic = "hyper";
  let summary = "The optimizer's hyper-parameters of this step (dtc::rt::Hyper)";
}
def Dtcrt_RequestType : TypeDef<Dtcrt_Dialect, "Request"> {
  let mnemonic = "request";
  let summary = "An all-reduce in flight";
}

def Dtcrt_F32Ptr : Type<And<[CPred<"::llvm::isa<::dtcrt::PtrType>($_self)">,
    CPred<"::llvm::cast<::dtcrt::PtrType>($_self).getElement().isF32()">]>,
    "pointer to f32", "::dtcrt::PtrType">;
def Dtcrt_I32Ptr : Type<And<[CPred<"::llvm::isa<::dtcrt::PtrType>($_self)">,
    CPred<"::llvm::cast<::dtcrt::PtrType>($_self).getElement().isInteger(32)">]>,
    "pointer to i32", "::dtcrt::PtrType">;
def Dtcrt_I64Ptr : Type<And<[CPred<"::llvm::isa<::dtcrt::PtrType>($_self)">,
    CPred<"::llvm::cast<::dtcrt::PtrType>($_self).getElement().isInteger(64)">]>,
    "pointer to i64", "::dtcrt::PtrType">;
def Dtcrt_I64Array : Type<And<[CPred<"::llvm::isa<::dtcrt::ArrayType>($_self)">,
    CPred<"::llvm::cast<::dtcrt::ArrayType>($_self).getElement().isInteger(64)">]>,
    "array of i64", "::dtcrt::ArrayType">;
def Dtcrt_I32Array : Type<And<[CPred<"::llvm::isa<::dtcrt::ArrayType>($_self)">,
    CPred<"::llvm::cast<::dtcrt::ArrayType>($_self).getElement().isInteger(32)">]>,
    "array of i32", "::dtcrt::ArrayType">;

#endif // DTCRT_DIALECT_TD
