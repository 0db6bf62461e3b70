//===- gradcheck.cpp - Finite-difference check of the compiled gradients -===//
#include "gradcheck.h"

#include "error.h"
#include "executor.h"
#include "params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dtc::rt {
namespace {
constexpr int64_t kElementsPerParam = 16;
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

  std::vector<float> outputs(static_cast<size_t>(spec.numOutputs));
  auto loss = [&] {
    exec.eval(staged, 0);
    exec.readOutputs(1, outputs.data());
    return double(outputs[0]);
  };
  const double eps = s.opts.gradcheckEps, atol = s.opts.gradcheckAtol,
               rtol = s.opts.gradcheckRtol;
  bool allOk = true;
  const float *g = grads.data(); // packed in parameter order
  for (int32_t p = 0; p < spec.numParams; ++p) {
    const ParamSpec &ps = spec.params[p];
    // The host parameters are those of the executor: nothing has trained.
    const float *w = reinterpret_cast<const float *>(s.persistent.data() + ps.offset);
    const int64_t count = std::min(ps.numel, kElementsPerParam);
    double maxAbs = 0, maxRel = 0;
    bool ok = true;
    for (int64_t j = 0; j < count; ++j) {
      // Element j of `count` spread evenly: the middle of the j-th slice.
      const int64_t e = ps.numel <= kElementsPerParam ? j : (2 * j + 1) * ps.numel / (2 * count);
      const float orig = w[e];
      const float up = static_cast<float>(orig + eps), down = static_cast<float>(orig - eps);
      const int64_t at = ps.offset + e * int64_t(sizeof(float));
      exec.setParam(at, up);
      const double lossUp = loss();
      exec.setParam(at, down);
      const double lossDown = loss();
      exec.setParam(at, orig);
      const double fd = (lossUp - lossDown) / (double(up) - double(down));
      const double an = g[e];
      const double err = std::fabs(fd - an), scale = std::max(std::fabs(fd), std::fabs(an));
      maxAbs = std::max(maxAbs, err);
      maxRel = std::max(maxRel, scale > 0 ? err / scale : 0.0);
      ok = ok && err <= atol + rtol * scale;
    }
    allOk = allOk && ok;
    fmt::print("gradcheck {} max_abs_err {:.3e} max_rel_err {:.3e} checked {} {}\n", ps.name,
               maxAbs, maxRel, count, ok ? "ok" : "FAIL");
    g += ps.numel;
  }
  fmt::print("gradcheck {}\n", allOk ? "passed" : "FAILED");
  std::fflush(stdout);
  return allOk;
}

} // namespace dtc::rt
