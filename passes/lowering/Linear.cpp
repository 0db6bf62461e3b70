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
    const size_t ra = a.size(), rb = b.size();
    // One GEMM over all rows where the leading dimensions fold into them:
    // a 2-D product, a 2-D rhs broadcast over the lhs's rows (M = every
    // row), and contract_batch (K = every row, the lhs transposed);
    // otherwise one product per leading index.
    Value m, n, k, count;
    if (op.getContractBatch()) {
      m = l.size(a, ra - 1, ra);
      k = l.size(a, 0, ra - 1);
    } else if (rb == 2 && !ta) {
      m = l.size(a, 0, ra - 1);
      k = l.size(a, ra - 1, ra);
    } else {
      m = l.size(a, ta ? ra - 1 : ra - 2, ta ? ra : ra - 1);
      k = l.size(a, ta ? ra - 2 : ra - 1, ta ? ra - 1 : ra);
      if (ra > 2)
        count = l.size(a, 0, ra - 2);
    }
    n = l.size(b, tb ? rb - 2 : rb - 1, tb ? rb - 1 : rb);
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
    if (count)
      dtcrt::GemmBatchedOp::create(l.b, l.loc, transA, transB, count, m, n, k,
                                   alpha, l.ptr(op.getLhs()),
                                   l.ptr(op.getRhs()), beta, c);
    else
      dtcrt::GemmOp::create(l.b, l.loc, transA, transB, m, n, k, alpha,
                            l.ptr(op.getLhs()), l.ptr(op.getRhs()), beta, c);
    return success();
  });
}
