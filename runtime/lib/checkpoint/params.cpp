//===- params.cpp - Model spec checks and parameter initialization -------===//
//
// Initializers (fan_in/fan_out from the ParamSpec; U = uniform, N = normal):
//   Zeros          0
//   Constant       a
//   Uniform        U(a, b)
//   Normal         N(mean a, std b)
//   GlorotUniform  U(-r, r), r = gain * sqrt(6 / (fan_in + fan_out)),
//                  gain = a (a == 0 is read as gain 1)
//   GlorotNormal   N(0, sqrt(2 / (fan_in + fan_out)))
//   HeUniform      U(-r, r), r = sqrt(6 / fan_in)
//   HeNormal       N(0, sqrt(2 / fan_in))
// Parameter i draws from Rng(mixSeed(seed, i)), elements in storage order, so
// adding a parameter does not change the others' initial values.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/params.h"
#include "checkpoint/shards.h"

#include "support/error.h"
#include "support/rng.h"

#include <fmt/format.h>

#include <vector>

#include <cmath>
#include <string>

namespace dtc::rt {
namespace {

double fanScale(const ParamSpec &p, double numerator, bool both) {
  const int64_t fan = both ? p.fanIn + p.fanOut : p.fanIn;
  if (fan <= 0)
    throw Error(fmt::format("parameter '{}' needs a positive fan for its initializer "
                            "(fan_in {}, fan_out {})",
                            p.name, p.fanIn, p.fanOut));
  return std::sqrt(numerator / static_cast<double>(fan));
}

} // namespace

void validateSpec(const ModelSpec &spec) {
  auto bad = [&](const std::string &why) {
    return Error(fmt::format("model '{}' is malformed (a dtc bug): {}",
                             spec.name ? spec.name : "?", why));
  };
  if (!spec.name || !spec.trainStep || !spec.evalStep)
    throw bad("missing name or step functions");

  if ((spec.trainStepCuda == nullptr) != (spec.evalStepCuda == nullptr))
    throw bad("CUDA steps must come together (trainStepCuda and evalStepCuda)");
  if (spec.numOutputs < 1 || !spec.outputNames || std::string(spec.outputNames[0]) != "loss")
    throw bad("outputs must start with \"loss\"");
  if (spec.inputNumel < 1 || spec.labelNumel < 1)
    throw bad("empty input or label");
  if (spec.paramBytes > spec.persistentBytes || spec.paramBytes < 0 ||
      spec.arenaPerSample < 0 || spec.arenaFixed < 0 || spec.gradArenaPerSample < 0 ||
      spec.gradArenaFixed < 0)
    throw bad("inconsistent memory sizes");
  // The elements of a shape (of rank <= 6: checked before it is used).
  auto numelOf = [](int32_t rank, const int64_t *shape) {
    int64_t numel = 1;
    for (int32_t d = 0; d < rank && d < 6; ++d)
      numel *= shape[d];
    return numel;
  };
  for (int32_t i = 0; i < spec.numParams; ++i) {
    const ParamSpec &p = spec.params[i];
    const int64_t numel = numelOf(p.rank, p.shape);
    // (Stage 3: the offset in the gathered image, shards.h.)
    const int64_t paramsEnd = spec.shardStage == 3 ? paramImageBytes(spec) : spec.paramBytes;
    if (!p.name || p.rank < 0 || p.rank > 6 || numel != p.numel || p.offset < 0 ||
        p.offset % 4 != 0 || p.offset + p.numel * 4 > paramsEnd)
      throw bad(fmt::format("parameter {} ('{}') has an inconsistent shape or offset", i,
                            p.name ? p.name : "?"));
    if (spec.numStates > 0 && spec.shardStage == 0 &&
        (p.stateOffset < spec.paramBytes + spec.bufferBytes || p.stateOffset % 4 != 0 ||
         p.stateOffset + spec.numStates * p.numel * 4 > spec.persistentBytes))
      throw bad(fmt::format("parameter {} ('{}') has its optimizer state outside the "
                            "persistent block",
                            i, p.name));
  }
  if (spec.numBuffers < 0 || (spec.numBuffers > 0 && !spec.buffers) || spec.bufferBytes < 0 ||
      spec.paramBytes + spec.bufferBytes > spec.persistentBytes)
    throw bad("inconsistent buffers");
  for (int32_t i = 0; i < spec.numBuffers; ++i) {
    const BufferSpec &b = spec.buffers[i];
    const int64_t numel = numelOf(b.rank, b.shape);
    const int64_t bytes = elementBytes(b.type);
    if (!b.name || b.rank < 0 || b.rank > 6 || numel != b.numel || b.offset % bytes != 0 ||
        b.offset < spec.paramBytes || b.offset + b.numel * bytes > spec.paramBytes + spec.bufferBytes)
      throw bad(fmt::format("buffer {} ('{}') has an inconsistent shape or offset", i,
                            b.name ? b.name : "?"));
  }
  if (spec.numStates < 0 || spec.numStates > 2)
    throw bad(fmt::format("{} optimizer state buffers per parameter", spec.numStates));
  if (spec.numBuckets < 0 || (spec.numBuckets > 0 && !spec.buckets))
    throw bad("inconsistent gradient buckets");
  for (int32_t i = 0; i < spec.numBuckets; ++i) {
    const BucketSpec &b = spec.buckets[i];
    bool ok = b.count >= 0 && b.numParams >= 0 && (b.numParams == 0 || b.params);
    for (int32_t k = 0; ok && k < b.numParams; ++k)
      ok = b.params[k] >= 0 && b.params[k] < spec.numParams;
    if (!ok)
      throw bad(fmt::format("gradient bucket {} is inconsistent", b.id));
  }
  // Sharded: every parameter in one bucket, inside its parameters; each
  // bucket's parameters and state shard inside the persistent block.
  if (spec.shardStage < 0 || spec.shardStage > 3 || (spec.shardStage > 0) != (spec.shardRanks > 0))
    throw bad(fmt::format("sharding stage {} over {} ranks", spec.shardStage, spec.shardRanks));
  if (spec.shardStage > 0) {
    std::vector<int> holders(size_t(spec.numParams), 0);
    for (int32_t i = 0; i < spec.numBuckets; ++i) {
      const BucketSpec &b = spec.buckets[i];
      // (Stage 3: the bucket's shard of the parameters; else all of them.)
      const int64_t held = spec.shardStage == 3 ? b.shard : b.count;
      bool ok = b.within && b.shard > 0 && b.shard * spec.shardRanks == b.count &&
                b.paramOffset >= 0 && b.paramOffset % 4 == 0 &&
                b.paramOffset + held * 4 <= spec.paramBytes &&
                b.stateOffset >= spec.paramBytes + spec.bufferBytes && b.stateOffset % 4 == 0 &&
                b.stateOffset + int64_t(spec.numStates) * b.shard * 4 <= spec.persistentBytes;
      for (int32_t k = 0; ok && k < b.numParams; ++k) {
        const ParamSpec &p = spec.params[b.params[k]];
        ok = b.within[k] >= 0 && b.within[k] + p.numel <= b.count &&
             p.offset == (spec.shardStage == 3 ? paramImageOffset(spec, b.params[k]) : b.paramOffset) +
                             b.within[k] * 4;
        ++holders[size_t(b.params[k])];
      }
      if (!ok)
        throw bad(fmt::format("sharded bucket {} is inconsistent", b.id));
    }
    for (int32_t i = 0; i < spec.numParams; ++i)
      if (holders[size_t(i)] != 1)
        throw bad(fmt::format("parameter {} ('{}') is in {} sharded buckets", i,
                              spec.params[i].name, holders[size_t(i)]));
  }
}

const char *optimizerName(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::SGD:
    return "sgd";
  case OptimizerKind::Adam:
    return "adam";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  return "?";
}

int64_t countParams(const ModelSpec &spec) {
  int64_t n = 0;
  for (int32_t i = 0; i < spec.numParams; ++i)
    n += spec.params[i].numel;
  return n;
}


void initParams(const ModelSpec &spec, uint64_t seed, char *persistent) {
  initBuffers(spec, persistent);
  for (int32_t i = 0; i < spec.numParams; ++i)
    initParam(spec, i, seed, reinterpret_cast<float *>(persistent + spec.params[i].offset));
}

void initParam(const ModelSpec &spec, int32_t i, uint64_t seed, float *w) {
  {
    const ParamSpec &p = spec.params[i];
    Rng rng(mixSeed(seed, static_cast<uint64_t>(i)));
    auto fillUniform = [&](double lo, double hi) {
      for (int64_t k = 0; k < p.numel; ++k)
        w[k] = static_cast<float>(rng.uniform(lo, hi));
    };
    auto fillNormal = [&](double mean, double stddev) {
      for (int64_t k = 0; k < p.numel; ++k)
        w[k] = static_cast<float>(mean + stddev * rng.normal());
    };
    switch (p.init) {
    case InitKind::Zeros:
      std::fill(w, w + p.numel, 0.0f);
      break;
    case InitKind::Constant:
      std::fill(w, w + p.numel, static_cast<float>(p.a));
      break;
    case InitKind::Uniform:
      fillUniform(p.a, p.b);
      break;
    case InitKind::Normal:
      fillNormal(p.a, p.b);
      break;
    case InitKind::GlorotUniform: {
      double r = (p.a == 0 ? 1.0 : p.a) * fanScale(p, 6, true);
      fillUniform(-r, r);
      break;
    }
    case InitKind::GlorotNormal:
      fillNormal(0, fanScale(p, 2, true));
      break;
    case InitKind::HeUniform: {
      double r = fanScale(p, 6, false);
      fillUniform(-r, r);
      break;
    }
    case InitKind::HeNormal:
      fillNormal(0, fanScale(p, 2, false));
      break;
    default:
      throw Error(fmt::format("parameter '{}' has unknown initializer {}", p.name,
                              static_cast<int>(p.init)));
    }
  }
}

void initBuffers(const ModelSpec &spec, char *persistent) {
  for (int32_t i = 0; i < spec.numBuffers; ++i) {
    const BufferSpec &b = spec.buffers[i];
    if (b.type == ElementType::I64) {
      int64_t *v = reinterpret_cast<int64_t *>(persistent + b.offset);
      std::fill(v, v + b.numel, static_cast<int64_t>(b.value));
    } else {
      float *v = reinterpret_cast<float *>(persistent + b.offset);
      std::fill(v, v + b.numel, static_cast<float>(b.value));
    }
  }
}

} // namespace dtc::rt
