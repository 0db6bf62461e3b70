//===- ShapeInference.h - Result shapes of dtc ops ------------------------===//
//
// One place computes the result type of every shape-changing dtc op. The ops'
// InferTypeOpInterface and verifiers use it, and so does the DSL frontend, to
// report shape errors at the DSL source location before any op is built. Each
// function emits an error at `loc` (when given) and fails on bad input.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include <array>
#include <optional>
#include <string>
#include <utility>

namespace dtc::shape {
using mlir::FailureOr;
using mlir::RankedTensorType;
using mlir::Type;
using Loc = std::optional<mlir::Location>;

/// "[B, 784]": a shape as users write it (B is the dynamic batch dimension).
std::string str(Type type);

/// numpy broadcasting of two shapes; `?` only broadcasts with `?` or 1.
FailureOr<RankedTensorType> broadcast(Loc loc, Type lhs, Type rhs);
/// Whether `from` broadcasts to `to` (numpy rules, `to` the larger shape).
bool broadcastsTo(mlir::ArrayRef<int64_t> from, mlir::ArrayRef<int64_t> to);
/// op(lhs) x op(rhs) (op: a transpose of the last two dimensions when its
/// flag is set): [..., M, K] x [..., K, N] -> [..., M, N] over the same
/// leading (batch) dimensions, or a 2-D rhs [K, N] broadcast over the lhs's
/// (nn.Linear on any rank). contractBatch: the leading dimensions summed
/// over instead, [..., K, M]^T x [..., K, N] -> [M, N].
FailureOr<RankedTensorType> matmul(Loc loc, Type lhs, Type rhs, bool transLhs,
                                   bool transRhs, bool contractBatch = false);
/// Operands joined along `axis` (concat), or checked as the pieces of
/// `whole` along it (split): the same shape elsewhere, the sizes along the
/// axis adding up, the axis not the batch dimension.
FailureOr<RankedTensorType> concat(Loc loc, mlir::TypeRange pieces,
                                   int64_t axis);
FailureOr<RankedTensorType> transpose(Loc loc, Type x,
                                      mlir::ArrayRef<int64_t> perm);
FailureOr<RankedTensorType> reduce(Loc loc, Type x, int64_t axis);
FailureOr<RankedTensorType> reshape(Loc loc, Type x,
                                    mlir::ArrayRef<int64_t> shape);
/// Checks an axis of a rank-`rank` tensor (already normalized to >= 0).
mlir::LogicalResult axis(Loc loc, int64_t rank, int64_t axis);
/// logits [N, ..., C] against labels [N, ...]: a 0-d f32 (also accuracy's).
FailureOr<RankedTensorType> crossEntropy(Loc loc, Type logits, Type labels);
/// Attention of q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv] (the same
/// leading dimensions; causal: Tq = Tk): the result [..., Tq, Dv] and the
/// row statistics [..., Tq].
FailureOr<std::pair<RankedTensorType, RankedTensorType>>
attention(Loc loc, Type q, Type k, Type v, bool causal);
/// The permutation that swaps dimensions rank-3 and rank-2 (rank >= 3): an
/// attention operand tokens-first ([..., T, H, D]) to head-major ([..., H,
/// T, D]) and back (dtc-attention-tokens-first, the ops' verifiers).
llvm::SmallVector<int64_t> tokensHeadsSwap(int64_t rank);
/// t ([..., a, b, D], rank >= 3) with a and b swapped (tokensHeadsSwap).
RankedTensorType swapTokensAndHeads(Type t);
/// The rows of weight [num, dim] picked by ids (any shape): ids' shape + [dim].
FailureOr<RankedTensorType> embedding(Loc loc, Type ids, Type weight);

/// The geometry of a 2-D convolution or pooling window (PyTorch's meaning of
/// each: a pair per spatial dimension, H then W).
struct Window {
  std::array<int64_t, 2> kernel, stride, padding, dilation;
  /// The activations are NHWC ([N, H, W, C] in, [N, Ho, Wo, O] out), the
  /// layout dtc-channels-last plans; the weight stays [O, C / groups, kH, kW].
  bool channelsLast = false;
};
/// conv2d of x [N, C, H, W] with weight [O, C / groups, kH, kW] (the kernel
/// is the weight's; `w.kernel` is ignored): [N, O, Ho, Wo] with
/// Ho = (H + 2 pH - dH (kH - 1) - 1) / sH + 1, as torch.nn.Conv2d.
FailureOr<RankedTensorType> conv2d(Loc loc, Type x, Type weight,
                                   const Window &w, int64_t groups);
/// max_pool2d / avg_pool2d of x [N, C, H, W] (dilation 1 for avg): [N, C,
/// Ho, Wo]; padding at most half the kernel, as PyTorch requires.
FailureOr<RankedTensorType> pool2d(Loc loc, llvm::StringRef what, Type x,
                                   const Window &w);
FailureOr<RankedTensorType> mse(Loc loc, Type prediction, Type target);
/// batch_norm of x [N, C, ...] (rank 2 to 4, as BatchNorm1d / 2d): the type
/// of its per-channel tensors (weight, bias, statistics), [C].
/// With channelsLast (a 4-D NHWC input), the channels are the last dimension.
FailureOr<RankedTensorType> batchNorm(Loc loc, Type x,
                                      bool channelsLast = false);
/// [N, C, H, W] as [N, H, W, C], and back.
llvm::SmallVector<int64_t> nchwToNhwc(llvm::ArrayRef<int64_t> s);
llvm::SmallVector<int64_t> nhwcToNchw(llvm::ArrayRef<int64_t> s);
/// The blocked layout dtc-blocked-layout plans: [N, C, H, W] as oneDNN's
/// nChw16c, [N, C / kBlock, H, W, kBlock]. A rank-5 operand of conv2d,
/// the pools and batch_norm (with their gradients) is blocked; the shape
/// functions take it as its NCHW view and give NCHW results, which an op
/// may hold blocked.
constexpr int64_t kBlock = 16;
bool isBlocked(mlir::Type t);
/// [N, C, H, W] (C a multiple of kBlock) as [N, C / 16, H, W, 16], and back.
llvm::SmallVector<int64_t> nchwToBlocked(llvm::ArrayRef<int64_t> s);
llvm::SmallVector<int64_t> blockedToNchw(llvm::ArrayRef<int64_t> s);
/// Whether `actual` is the NCHW type `nchw`, or its blocked form.
bool sameOrBlocked(mlir::RankedTensorType nchw, mlir::Type actual);

/// Limits of every tensor: its rank, and its elements (per sample when it is
/// batched). The runtime's fixed-size shape arrays hold kMaxRank dims.
constexpr size_t kMaxRank = 6;
constexpr int64_t kMaxElements = int64_t(1) << 40;
/// Checks a shape against those limits (no overflow, no zero dimensions).
mlir::LogicalResult size(Loc loc, mlir::ArrayRef<int64_t> shape);

/// Number of elements, with the batch dimension counted as 1.
int64_t numElementsPerBatch(RankedTensorType type);
/// Whether the type's size scales with the batch (has a dynamic dimension).
inline bool isBatched(RankedTensorType type) { return !type.hasStaticShape(); }
} // namespace dtc::shape
