//===- Linear.cpp - GEMMs ------------------------------------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

void dtc::lowering::populateLinearLowerings(LoweringTable &t) {
  t.add<MatmulOp>([](MatmulOp op, Lowering &l) {
    auto a = op.getLhs().getType().getShape();
    auto b = op.getRhs().getType().getShape();
    bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
    Value m = l.size(a, ta ? 1 : 0, ta ? 2 : 1),
          k = l.size(a, ta ? 0 : 1, ta ? 1 : 2);
    Value n = l.size(b, tb ? 0 : 1, tb ? 1 : 2);
    // A folded gradient (dtc-fold-momentum): the GEMM accumulates it into
    // its momentum buffer itself, C = A B + share C.
    Value c, beta;
    if (auto it = l.momentumOf.find(op.getResult()); it != l.momentumOf.end()) {
      c = l.persistent(it->second);
      l.map(op, c);
      l.accumulated.insert(op.getResult());
      beta = l.scalar(dtcrt::StepScalar::MomentumShare);
    } else {
      c = l.resultBuffer(op);
      beta = l.f32(0.0f);
    }
    Value transA = l.i1(ta);
    Value transB = l.i1(tb);
    Value alpha = l.f32(1.0f);
    dtcrt::GemmOp::create(l.b, l.loc, transA, transB, m, n, k, alpha,
                          l.ptr(op.getLhs()), l.ptr(op.getRhs()), beta, c);
    return success();
  });
}
