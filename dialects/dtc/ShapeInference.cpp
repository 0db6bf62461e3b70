//===- ShapeInference.cpp - Result shapes of dtc ops ----------------------===//
#include "dialects/dtc/ShapeInference.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeRange.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace dtc::shape {

std::string str(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return "<unranked>";
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(t.getShape())) {
    if (i)
      s += ", ";
    s += ShapedType::isDynamic(d) ? std::string("B") : std::to_string(d);
  }
  return s + "]";
}

static RankedTensorType f32(ArrayRef<int64_t> shape, Type like) {
  return RankedTensorType::get(shape, cast<ShapedType>(like).getElementType());
}

bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i])
      return false;
  return true;
}

FailureOr<RankedTensorType> broadcast(Loc loc, Type lhs, Type rhs) {
  auto a = cast<RankedTensorType>(lhs).getShape();
  auto b = cast<RankedTensorType>(rhs).getShape();
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return emitOptionalError(loc, "shapes ", str(lhs), " and ", str(rhs),
                               " do not broadcast");
  }
  for (size_t i = 1; i < rank; ++i)
    if (ShapedType::isDynamic(out[i]))
      return emitOptionalError(loc, "broadcasting ", str(lhs), " with ",
                               str(rhs),
                               " would move the batch dimension B away from "
                               "the first dimension");
  return f32(out, lhs);
}

FailureOr<RankedTensorType> matmul(Loc loc, Type lhs, Type rhs, bool transLhs,
                                   bool transRhs, bool contractBatch) {
  auto a = cast<RankedTensorType>(lhs).getShape();
  auto b = cast<RankedTensorType>(rhs).getShape();
  if (a.size() < 2 || b.size() < 2)
    return emitOptionalError(loc,
                             "matmul needs operands of at least 2 "
                             "dimensions, got ",
                             str(lhs), " and ", str(rhs));
  auto leadA = a.drop_back(2), leadB = b.drop_back(2);
  auto last2 = [](ArrayRef<int64_t> s, bool t) {
    size_t r = s.size();
    return std::pair<int64_t, int64_t>{t ? s[r - 1] : s[r - 2],
                                       t ? s[r - 2] : s[r - 1]};
  };
  if (contractBatch) {
    // sum over every leading position l of op(A_l) op(B_l): the weight
    // gradient of a matmul whose rhs is broadcast (one GEMM over the rows
    // of both operands, viewed 2-D).
    if (a.size() != b.size() || a.drop_back() != b.drop_back() || !transLhs ||
        transRhs)
      return emitOptionalError(loc,
                               "matmul contract_batch needs operands of "
                               "the same leading dimensions, the lhs "
                               "transposed and the rhs not, got ",
                               str(lhs), " and ", str(rhs));
    int64_t m = a.back(), n = b.back();
    if (ShapedType::isDynamic(m) || ShapedType::isDynamic(n))
      return emitOptionalError(loc, "matmul contract_batch result dimensions "
                                    "cannot be the batch dimension");
    if (failed(size(loc, {m, n})))
      return failure();
    return f32({m, n}, lhs);
  }
  if (!leadB.empty() && leadA != leadB)
    return emitOptionalError(
        loc,
        "matmul operands need the same leading (batch) dimensions, or a "
        "2-D rhs, got ",
        str(lhs), " and ", str(rhs));
  if (leadB.empty() && !leadA.empty() && transLhs)
    return emitOptionalError(loc,
                             "matmul with a 2-D rhs broadcast over the "
                             "lhs's leading dimensions cannot transpose "
                             "the lhs, got ",
                             str(lhs));
  auto [m, k1] = last2(a, transLhs);
  auto [k2, n] = last2(b, transRhs);
  if (k1 != k2)
    return emitOptionalError(loc, "matmul inner dimensions differ: ", str(lhs),
                             transLhs ? "^T" : "", " x ", str(rhs),
                             transRhs ? "^T" : "");
  if (ShapedType::isDynamic(n))
    return emitOptionalError(loc, "matmul result columns cannot be the batch "
                                  "dimension");
  if (ShapedType::isDynamic(m) && !leadA.empty())
    return emitOptionalError(loc, "matmul result rows cannot be the batch "
                                  "dimension under leading dimensions");
  SmallVector<int64_t> out(leadA.begin(), leadA.end());
  out.append({m, n});
  if (failed(size(loc, out)))
    return failure();
  return f32(out, lhs);
}

FailureOr<RankedTensorType> concat(Loc loc, mlir::TypeRange pieces,
                                   int64_t ax) {
  if (pieces.empty())
    return emitOptionalError(loc, "concat of no tensors");
  auto first = cast<RankedTensorType>(pieces.front()).getShape();
  if (failed(axis(loc, first.size(), ax)))
    return failure();
  if (ShapedType::isDynamic(first[ax]))
    return emitOptionalError(loc, "cannot split or concatenate along the "
                                  "batch dimension B");
  SmallVector<int64_t> out(first.begin(), first.end());
  out[ax] = 0;
  for (Type t : pieces) {
    auto s = cast<RankedTensorType>(t).getShape();
    bool same = s.size() == first.size();
    for (size_t i = 0; same && i < s.size(); ++i)
      same = int64_t(i) == ax || s[i] == first[i];
    if (!same)
      return emitOptionalError(loc, "tensors joined along axis ", ax,
                               " must have the same shape elsewhere, got ",
                               str(pieces.front()), " and ", str(t));
    out[ax] += s[ax];
  }
  if (failed(size(loc, out)))
    return failure();
  return f32(out, pieces.front());
}

FailureOr<RankedTensorType> transpose(Loc loc, Type x, ArrayRef<int64_t> perm) {
  auto s = cast<RankedTensorType>(x).getShape();
  if (perm.size() != s.size())
    return emitOptionalError(loc, "transpose of a rank-", s.size(),
                             " tensor needs ", s.size(), " axes, got ",
                             perm.size());
  SmallVector<bool> seen(s.size(), false);
  SmallVector<int64_t> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)s.size() || seen[p])
      return emitOptionalError(loc, "transpose axes are not a permutation");
    seen[p] = true;
    out.push_back(s[p]);
  }
  return f32(out, x);
}

LogicalResult axis(Loc loc, int64_t rank, int64_t axis) {
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, "axis ", axis, " is out of range for a rank-",
                             rank, " tensor");
  return success();
}

FailureOr<RankedTensorType> reduce(Loc loc, Type x, int64_t ax) {
  auto s = cast<RankedTensorType>(x).getShape();
  if (failed(axis(loc, s.size(), ax)))
    return failure();
  SmallVector<int64_t> out(s.begin(), s.end());
  out.erase(out.begin() + ax);
  return f32(out, x);
}

FailureOr<RankedTensorType> reshape(Loc loc, Type x, ArrayRef<int64_t> shape) {
  auto xt = cast<RankedTensorType>(x);
  auto out = f32(shape, x);
  bool xDyn = !xt.hasStaticShape(), oDyn = !out.hasStaticShape();
  if (llvm::count_if(shape, ShapedType::isDynamic) > 1 ||
      (oDyn && !ShapedType::isDynamic(shape[0])))
    return emitOptionalError(loc, "reshape: only the first dimension may be "
                                  "the batch dimension B");
  if (failed(size(loc, shape)))
    return failure();
  if (xDyn != oDyn || numElementsPerBatch(xt) != numElementsPerBatch(out))
    return emitOptionalError(loc, "cannot reshape ", str(x), " to ", str(out),
                             ": the number of elements differs");
  return out;
}

FailureOr<RankedTensorType> crossEntropy(Loc loc, Type logits, Type labels) {
  auto l = cast<RankedTensorType>(logits).getShape();
  auto y = cast<RankedTensorType>(labels).getShape();
  if (l.size() < 2 || y.size() + 1 != l.size() || l.drop_back() != y ||
      ShapedType::isDynamic(l.back()))
    return emitOptionalError(loc,
                             "cross_entropy needs logits [N, ..., C] and "
                             "labels [N, ...] of the logits' shape without "
                             "C, got ",
                             str(logits), " and ", str(labels));
  return f32({}, logits);
}

SmallVector<int64_t> tokensHeadsSwap(int64_t rank) {
  auto range = llvm::seq<int64_t>(0, rank);
  SmallVector<int64_t> perm(range.begin(), range.end());
  std::swap(perm[rank - 3], perm[rank - 2]);
  return perm;
}

RankedTensorType swapTokensAndHeads(Type t) {
  auto r = cast<RankedTensorType>(t);
  SmallVector<int64_t> s(r.getShape());
  std::swap(s[s.size() - 3], s[s.size() - 2]);
  return RankedTensorType::get(s, r.getElementType());
}

FailureOr<std::pair<RankedTensorType, RankedTensorType>>
attention(Loc loc, Type q, Type k, Type v, bool causal) {
  auto qs = cast<RankedTensorType>(q).getShape();
  auto ks = cast<RankedTensorType>(k).getShape();
  auto vs = cast<RankedTensorType>(v).getShape();
  if (qs.size() < 2 || ks.size() != qs.size() || vs.size() != qs.size())
    return emitOptionalError(loc,
                             "attention needs q [..., Tq, D], k [..., Tk, D] "
                             "and v [..., Tk, Dv] of one rank (at least 2), "
                             "got ",
                             str(q), ", ", str(k), " and ", str(v));
  const size_t r = qs.size();
  if (qs.drop_back(2) != ks.drop_back(2) || qs.drop_back(2) != vs.drop_back(2))
    return emitOptionalError(loc,
                             "attention's q, k and v need the same leading "
                             "(batch and head) dimensions, got ",
                             str(q), ", ", str(k), " and ", str(v));
  for (size_t i = r - 2; i < r; ++i)
    if (ShapedType::isDynamic(qs[i]) || ShapedType::isDynamic(ks[i]) ||
        ShapedType::isDynamic(vs[i]))
      return emitOptionalError(loc,
                               "attention's sequence and feature dimensions "
                               "cannot be the batch, got ",
                               str(q));
  if (ks[r - 1] != qs[r - 1])
    return emitOptionalError(loc,
                             "attention's q and k need the same feature "
                             "size D, got ",
                             str(q), " and ", str(k));
  if (vs[r - 2] != ks[r - 2])
    return emitOptionalError(loc,
                             "attention's k and v need the same number "
                             "of keys Tk, got ",
                             str(k), " and ", str(v));
  if (causal && qs[r - 2] != ks[r - 2])
    return emitOptionalError(
        loc,
        "a causal mask needs square scores (as many queries as keys), "
        "got ",
        qs[r - 2], " queries and ", ks[r - 2], " keys");
  SmallVector<int64_t> out(qs.begin(), qs.end());
  out.back() = vs.back();
  return std::pair{f32(out, q), f32(qs.drop_back(), q)};
}

FailureOr<RankedTensorType> embedding(Loc loc, Type ids, Type weight) {
  auto w = cast<RankedTensorType>(weight).getShape();
  if (w.size() != 2 || ShapedType::isDynamic(w[0]) ||
      ShapedType::isDynamic(w[1]))
    return emitOptionalError(loc, "embedding needs a table [num, dim], got ",
                             str(weight));
  auto i = cast<RankedTensorType>(ids).getShape();
  SmallVector<int64_t> out(i.begin(), i.end());
  out.push_back(w[1]);
  if (failed(size(loc, out)))
    return failure();
  return f32(out, weight);
}

/// The output size of one spatial dimension, or failure (after an error)
/// when the window does not fit the padded input.
static FailureOr<int64_t> windowOutput(Loc loc, llvm::StringRef what,
                                       const char *dim, int64_t in, int64_t k,
                                       int64_t s, int64_t p, int64_t d) {
  if (k < 1 || s < 1 || p < 0 || d < 1)
    return emitOptionalError(loc, what,
                             ": kernel, stride and dilation must be "
                             ">= 1 and padding >= 0");
  const int64_t span = d * (k - 1) + 1, padded = in + 2 * p;
  if (span > padded)
    return emitOptionalError(
        loc, what, ": the kernel (", span,
        " with dilation) is larger than the padded input (", padded, ") in ",
        dim);
  return (padded - span) / s + 1;
}

SmallVector<int64_t> nchwToNhwc(ArrayRef<int64_t> s) {
  return {s[0], s[2], s[3], s[1]};
}
SmallVector<int64_t> nhwcToNchw(ArrayRef<int64_t> s) {
  return {s[0], s[3], s[1], s[2]};
}

bool isBlocked(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.getRank() == 5 && r.getDimSize(4) == kBlock;
}
SmallVector<int64_t> nchwToBlocked(ArrayRef<int64_t> s) {
  return {s[0], s[1] / kBlock, s[2], s[3], kBlock};
}
SmallVector<int64_t> blockedToNchw(ArrayRef<int64_t> s) {
  return {s[0], s[1] * kBlock, s[2], s[3]};
}
bool sameOrBlocked(RankedTensorType nchw, Type actual) {
  if (nchw == actual)
    return true;
  if (!isBlocked(actual) || nchw.getRank() != 4 || nchw.getDimSize(1) % kBlock)
    return false;
  return RankedTensorType::get(nchwToBlocked(nchw.getShape()),
                               nchw.getElementType()) == actual;
}

/// A blocked input [N, C / 16, H, W, 16] as its NCHW view (other types as
/// they are); a rank-5 input that is not blocked is an error.
static FailureOr<Type> nchwView(Loc loc, StringRef what, Type x) {
  auto t = cast<RankedTensorType>(x);
  if (t.getRank() != 5)
    return x;
  if (!isBlocked(x) || ShapedType::isDynamic(t.getDimSize(1)))
    return emitOptionalError(
        loc, what, ": a blocked input must be [N, C / 16, H, W, 16], got ",
        str(x));
  return Type(
      RankedTensorType::get(blockedToNchw(t.getShape()), t.getElementType()));
}

/// A channels-last window's shape function: the NCHW one on x's dimensions
/// in NCHW order, its result back in NHWC order.
template <class F>
static FailureOr<RankedTensorType> viaNchw(Type x, const Window &w,
                                           const F &nchw) {
  auto t = cast<RankedTensorType>(x);
  if (!w.channelsLast || t.getRank() != 4)
    return nchw(x, w);
  Window planar = w;
  planar.channelsLast = false;
  auto r =
      nchw(RankedTensorType::get(nhwcToNchw(t.getShape()), t.getElementType()),
           planar);
  if (failed(r))
    return failure();
  return RankedTensorType::get(nchwToNhwc(r->getShape()), r->getElementType());
}

FailureOr<RankedTensorType> conv2d(Loc loc, Type x, Type weight,
                                   const Window &w, int64_t groups) {
  if (cast<RankedTensorType>(x).getRank() == 5) {
    if (w.channelsLast)
      return emitOptionalError(loc,
                               "conv2d: a blocked input is not channels last");
    auto v = nchwView(loc, "conv2d", x);
    if (failed(v))
      return failure();
    return conv2d(loc, *v, weight, w, groups);
  }
  if (w.channelsLast)
    return viaNchw(x, w, [&](Type xn, const Window &wn) {
      return conv2d(loc, xn, weight, wn, groups);
    });
  auto xs = cast<RankedTensorType>(x).getShape();
  auto ws = cast<RankedTensorType>(weight).getShape();
  if (xs.size() != 4)
    return emitOptionalError(loc, "conv2d needs an input [N, C, H, W], got ",
                             str(x));
  if (ws.size() != 4)
    return emitOptionalError(
        loc, "conv2d needs a weight [O, C/groups, kH, kW], got ", str(weight));
  for (size_t i = 1; i < 4; ++i)
    if (ShapedType::isDynamic(xs[i]) || ShapedType::isDynamic(ws[i]) ||
        ShapedType::isDynamic(ws[0]))
      return emitOptionalError(
          loc, "conv2d: only the input's first dimension may be the batch");
  if (groups < 1 || xs[1] % groups || ws[0] % groups)
    return emitOptionalError(
        loc, "conv2d: ", xs[1], " input channels and ", ws[0],
        " output channels must both be divisible by groups (", groups, ")");
  if (ws[1] != xs[1] / groups)
    return emitOptionalError(loc, "conv2d: the weight ", str(weight), " takes ",
                             ws[1], " channels per group, but the input ",
                             str(x), " has ", xs[1] / groups, " (", xs[1],
                             " channels in ", groups, " group",
                             groups == 1 ? "" : "s", ")");
  auto h = windowOutput(loc, "conv2d", "height", xs[2], ws[2], w.stride[0],
                        w.padding[0], w.dilation[0]);
  if (failed(h))
    return failure();
  auto wo = windowOutput(loc, "conv2d", "width", xs[3], ws[3], w.stride[1],
                         w.padding[1], w.dilation[1]);
  if (failed(wo))
    return failure();
  SmallVector<int64_t> out{xs[0], ws[0], *h, *wo};
  if (failed(size(loc, out)))
    return failure();
  return f32(out, x);
}

FailureOr<RankedTensorType> pool2d(Loc loc, llvm::StringRef what, Type x,
                                   const Window &w) {
  if (cast<RankedTensorType>(x).getRank() == 5) {
    if (w.channelsLast)
      return emitOptionalError(loc, what,
                               ": a blocked input is not channels last");
    auto v = nchwView(loc, what, x);
    if (failed(v))
      return failure();
    return pool2d(loc, what, *v, w);
  }
  if (w.channelsLast)
    return viaNchw(x, w, [&](Type xn, const Window &wn) {
      return pool2d(loc, what, xn, wn);
    });
  auto xs = cast<RankedTensorType>(x).getShape();
  if (xs.size() != 4)
    return emitOptionalError(loc, what, " needs an input [N, C, H, W], got ",
                             str(x));
  for (size_t i = 1; i < 4; ++i)
    if (ShapedType::isDynamic(xs[i]))
      return emitOptionalError(
          loc, what, ": only the input's first dimension may be the batch");
  for (int i = 0; i < 2; ++i)
    if (w.padding[i] < 0 || 2 * w.padding[i] > w.kernel[i])
      return emitOptionalError(loc, what, ": padding (", w.padding[i],
                               ") must be at most half the kernel (",
                               w.kernel[i], ")");
  auto h = windowOutput(loc, what, "height", xs[2], w.kernel[0], w.stride[0],
                        w.padding[0], w.dilation[0]);
  if (failed(h))
    return failure();
  auto wo = windowOutput(loc, what, "width", xs[3], w.kernel[1], w.stride[1],
                         w.padding[1], w.dilation[1]);
  if (failed(wo))
    return failure();
  return f32({xs[0], xs[1], *h, *wo}, x);
}

FailureOr<RankedTensorType> batchNorm(Loc loc, Type x, bool channelsLast) {
  auto xs = cast<RankedTensorType>(x).getShape();
  if (xs.size() == 5) {
    if (channelsLast)
      return emitOptionalError(
          loc, "batch_norm: a blocked input is not channels last");
    auto v = nchwView(loc, "batch_norm", x);
    if (failed(v))
      return failure();
    return batchNorm(loc, *v, false);
  }
  if (channelsLast && xs.size() != 4)
    return emitOptionalError(loc,
                             "batch_norm: channels last needs an input "
                             "[N, H, W, C], got ",
                             str(x));
  if (channelsLast)
    return batchNorm(
        loc,
        RankedTensorType::get(nhwcToNchw(xs), Float32Type::get(x.getContext())),
        false);
  if (xs.size() < 2 || xs.size() > 4)
    return emitOptionalError(loc,
                             "batch_norm needs an input [N, C], [N, C, L] or "
                             "[N, C, H, W], got ",
                             str(x));
  for (size_t i = 1; i < xs.size(); ++i)
    if (ShapedType::isDynamic(xs[i]))
      return emitOptionalError(
          loc, "batch_norm: only the input's first dimension may be the batch");
  return RankedTensorType::get({xs[1]}, Float32Type::get(x.getContext()));
}

FailureOr<RankedTensorType> mse(Loc loc, Type prediction, Type target) {
  if (prediction != target)
    return emitOptionalError(loc,
                             "mse needs prediction and target of the same "
                             "shape, got ",
                             str(prediction), " and ", str(target));
  return f32({}, prediction);
}

LogicalResult size(Loc loc, ArrayRef<int64_t> shape) {
  if (shape.size() > kMaxRank)
    return emitOptionalError(loc, "tensors have at most ", kMaxRank,
                             " dimensions, got ", shape.size());
  int64_t n = 1;
  for (int64_t d : shape) {
    if (ShapedType::isDynamic(d))
      continue;
    if (d < 1 || llvm::MulOverflow(n, d, n) || n > kMaxElements)
      return emitOptionalError(loc, "tensor too large: more than 2^40 "
                                    "elements (per sample)");
  }
  return success();
}

int64_t numElementsPerBatch(RankedTensorType type) {
  int64_t n = 1;
  for (int64_t d : type.getShape())
    if (!ShapedType::isDynamic(d))
      n *= d;
  return n;
}

} // namespace dtc::shape
