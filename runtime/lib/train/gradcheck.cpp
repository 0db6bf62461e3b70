//===- gradcheck.cpp - Finite-difference check of the compiled gradients -===//
#include "train/gradcheck.h"

#include "support/error.h"
#include "train/executor.h"
#include "checkpoint/params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dtc::rt {
namespace {
constexpr int64_t kElementsPerParam = 16;
// Steps tried for an element: h, h/8, h/64 (a failure at h may be a kink
// of ReLU/max inside [w-h, w+h], which a smaller step leaves outside).
constexpr int kSteps = 3;

enum class Verdict { Ok, Fail, Kink, NonFinite };

struct ElementCheck {
  Verdict verdict;
  double fd, err, scale, h;
};

} // namespace

bool runGradcheck(Session &s) {
  std::unique_ptr<Executor> cpu = makeCpuExecutor(s);
  return runGradcheck(s, *cpu);
}

bool runGradcheck(Session &s, Executor &exec) {
  const ModelSpec &spec = s.spec;
  if (!spec.gradStep)
    throw Error(fmt::format("model '{}' has no gradient step; --gradcheck is unavailable",
                            spec.name));
  Sampler sampler(s.data.train.size, s.opts.batch, 0, /*shuffle=*/false);
  int64_t n;
  const int64_t *idx = sampler.batch(0, &n);
  const int staged = exec.stage(s.data.train, idx, n);

  std::vector<float> grads(static_cast<size_t>(countParams(spec)), 0.0f);
  s.hyper.step = 1;
  exec.grad(staged, grads.data());

  // The loss of the gradient step: the training mode (dropout's masks of
  // this step, batch statistics), which the evaluation step is not.
  std::vector<float> outputs(static_cast<size_t>(spec.numOutputs));
  std::vector<float> ignored(grads.size());
  auto loss = [&] {
    exec.grad(staged, ignored.data());
    exec.readOutputs(1, outputs.data());
    return double(outputs[0]);
  };
  const double eps = s.opts.gradcheckEps, atol = s.opts.gradcheckAtol,
               rtol = s.opts.gradcheckRtol;
  const double loss0 = loss();
  // The loss is a float: a difference quotient with step h carries about
  // 8 ulp(loss) / h of rounding noise, allowed on top of the tolerances.
  const double ulp = std::max(std::fabs(loss0), 1e-30) * 0x1p-23;

  // Element `e` at byte offset `at`, value `orig`, analytic gradient `an`.
  auto checkElement = [&](int64_t at, float orig, double an) {
    // A step relative to the value (as numerical differentiation does), so
    // that w +- h never rounds back to w for large w.
    double h = eps * std::max(1.0, std::fabs(double(orig)));
    ElementCheck last{Verdict::Fail, 0, 0, 0, h};
    for (int k = 0; k < kSteps; ++k, h /= 8) {
      const float up = static_cast<float>(orig + h), down = static_cast<float>(orig - h);
      if (up == orig || down == orig)
        break; // below the float's resolution at w
      exec.setParam(at, up);
      const double lossUp = loss();
      exec.setParam(at, down);
      const double lossDown = loss();
      exec.setParam(at, orig);
      if (!std::isfinite(lossUp) || !std::isfinite(lossDown))
        return ElementCheck{Verdict::NonFinite, 0, 0, 0, h};
      const double width = double(up) - double(down);
      const double fd = (lossUp - lossDown) / width;
      const double err = std::fabs(fd - an), scale = std::max(std::fabs(fd), std::fabs(an));
      const double tol = atol + rtol * scale + 8 * ulp / (width / 2);
      // One-sided slopes: at a kink inside [w-h, w+h] they differ by the
      // jump of the slope, and the analytic gradient is one of them.
      const double fwd = (lossUp - loss0) / (double(up) - orig),
                   bwd = (loss0 - lossDown) / (orig - double(down));
      const bool kink = std::fabs(fwd - bwd) > 2 * tol &&
                        (std::fabs(fwd - an) <= tol || std::fabs(bwd - an) <= tol);
      last = {err <= tol ? Verdict::Ok : kink ? Verdict::Kink : Verdict::Fail, fd, err, scale, h};
      if (last.verdict == Verdict::Ok)
        return last;
    }
    return last;
  };

  bool allOk = true;
  int64_t uncheckable = 0;
  const float *g = grads.data(); // packed in parameter order
  for (int32_t p = 0; p < spec.numParams; ++p) {
    const ParamSpec &ps = spec.params[p];
    // The host parameters are those of the executor: nothing has trained.
    const float *w = reinterpret_cast<const float *>(s.persistent.data() + ps.offset);
    const int64_t count = std::min(ps.numel, kElementsPerParam);
    double maxAbs = 0, maxRel = 0;
    int64_t checked = 0, kinks = 0, nonFinite = 0;
    bool ok = true;
    for (int64_t j = 0; j < count; ++j) {
      // Element j of `count` spread evenly: the middle of the j-th slice.
      const int64_t e = ps.numel <= kElementsPerParam ? j : (2 * j + 1) * ps.numel / (2 * count);
      const ElementCheck c =
          checkElement(ps.offset + e * int64_t(sizeof(float)), w[e], double(g[e]));
      if (c.verdict == Verdict::Kink) {
        ++kinks;
        continue;
      }
      if (c.verdict == Verdict::NonFinite) {
        ++nonFinite;
        continue;
      }
      ++checked;
      maxAbs = std::max(maxAbs, c.err);
      maxRel = std::max(maxRel, c.scale > 0 ? c.err / c.scale : 0.0);
      ok = ok && c.verdict == Verdict::Ok;
    }
    allOk = allOk && ok;
    uncheckable += kinks + nonFinite;
    std::string why;
    if (kinks)
      why += fmt::format(" ({} at a kink of the loss: the one-sided differences disagree and "
                         "the gradient is one of them)",
                         kinks);
    if (nonFinite)
      why += fmt::format(" ({} where the loss is not finite at w +- h)", nonFinite);
    fmt::print("gradcheck {} max_abs_err {:.3e} max_rel_err {:.3e} checked {}{} {}\n", ps.name,
               maxAbs, maxRel, checked,
               kinks + nonFinite ? fmt::format(" not checkable {}{}", kinks + nonFinite, why)
                                 : std::string(),
               ok ? "ok" : "FAIL");
    g += ps.numel;
  }
  fmt::print("gradcheck {}{}\n", allOk ? "passed" : "FAILED",
             uncheckable ? fmt::format(" ({} element{} could not be checked)", uncheckable,
                                       uncheckable == 1 ? "" : "s")
                         : std::string());
  std::fflush(stdout);
  return allOk;
}

} // namespace dtc::rt
