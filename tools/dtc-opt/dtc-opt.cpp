//===- dtc-opt.cpp - Runs dtc's (and upstream) passes on .mlir files -----===//
#include "passes/Passes.h"
#include "tools/sanitizer_defaults.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  dtc::registerDialects(registry);
  dtc::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dtc optimizer driver\n", registry));
}
