//===- checkpoint.cpp - Parameters and training state in safetensors -----===//
#include "checkpoint/checkpoint.h"

#include "support/error.h"
#include "support/files.h"
#include "checkpoint/params.h"
#include "checkpoint/shards.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <libdeflate.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

namespace dtc::rt {
namespace {

constexpr const char *kStatePrefix = "optimizer/";
constexpr const char *kTrainingStateKind = "training-state";
constexpr int kTrainingStateVersion = 1;

std::vector<int64_t> shapeOf(const ParamSpec &p) {
  return std::vector<int64_t>(p.shape, p.shape + p.rank);
}

// Reads a JSON array of non-negative integers; false if it is not one.
bool toIndices(const nlohmann::json &j, std::vector<int64_t> &out) {
  if (!j.is_array())
    return false;
  out.clear();
  for (const auto &e : j) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0)
      return false;
    out.push_back(e.get<int64_t>());
  }
  return true;
}

uint32_t crc32Of(uint32_t crc, const char *data, size_t n) {
  return n ? libdeflate_crc32(crc, data, n) : crc; // zlib's CRC-32
}

// One tensor to write: name, shape, bytes, safetensors dtype.
struct OutTensor {
  std::string name;
  std::vector<int64_t> shape;
  const char *data;
  size_t bytes;
  const char *dtype = "F32";
};

// A tensor of the model in the persistent block: a parameter (F32) or a
// buffer (F32 or I64), in that order.
struct ModelTensor {
  const char *name;
  const char *dtype;
  std::vector<int64_t> shape;
  int64_t numel, offset, elementBytes;
  bool param;
};
std::vector<ModelTensor> modelTensors(const ModelSpec &spec) {
  std::vector<ModelTensor> out;
  for (int32_t i = 0; i < spec.numParams; ++i) {
    const ParamSpec &p = spec.params[i];
    out.push_back({p.name, "F32", shapeOf(p), p.numel, p.offset, 4, true});
  }
  for (int32_t i = 0; i < spec.numBuffers; ++i) {
    const BufferSpec &b = spec.buffers[i];
    const bool i64 = b.type == ElementType::I64;
    out.push_back({b.name, i64 ? "I64" : "F32",
                   std::vector<int64_t>(b.shape, b.shape + b.rank), b.numel, b.offset,
                   elementBytes(b.type), false});
  }
  return out;
}

void writeSafetensors(const std::string &path, const char *what,
                      const std::vector<OutTensor> &tensors,
                      std::map<std::string, std::string> metadata, bool withCrc,
                      const std::string &alsoLinkAs = std::string()) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  int64_t offset = 0;
  uint32_t crc = crc32Of(0, nullptr, 0);
  for (const OutTensor &t : tensors) {
    if (header.contains(t.name) || t.name == "__metadata__")
      throw Error(fmt::format("cannot save {} '{}': duplicate tensor name '{}'", what, path,
                              t.name));
    const int64_t bytes = static_cast<int64_t>(t.bytes);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    if (withCrc)
      crc = crc32Of(crc, t.data, t.bytes);
  }
  if (withCrc)
    metadata["dtc.crc32"] = fmt::format("{:08x}", crc);
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  meta["format"] = "pt";
  for (const auto &[k, v] : metadata)
    meta[k] = v;
  header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));

  AtomicFile out(path, what);
  out.write(len, sizeof len);
  out.write(text.data(), text.size());
  for (const OutTensor &t : tensors)
    out.write(t.data, t.bytes);
  out.commit(alsoLinkAs);
}

// The parameters and buffers, as torch's state_dict has them.
// (Stage 3: the parameters from `image`, the gathered image of shards.h.)
std::vector<OutTensor> parameterTensors(const ModelSpec &spec, const char *persistent,
                                        const char *image = nullptr) {
  std::vector<OutTensor> out;
  for (const ModelTensor &t : modelTensors(spec))
    out.push_back({t.name, t.shape, (t.param && image ? image : persistent) + t.offset,
                   static_cast<size_t>(t.numel * t.elementBytes), t.dtype});
  return out;
}

// A safetensors file, parsed and checked for structure (not for content).
struct Tensor {
  std::string dtype;
  std::vector<int64_t> shape;
  const char *data;
  uint64_t begin, bytes; // data_offsets [begin, begin + bytes)
};
struct Safetensors {
  std::string file; // owns the bytes
  std::vector<std::pair<std::string, Tensor>> tensors; // in name order
  std::unordered_map<std::string, size_t> index;
  std::map<std::string, std::string> metadata;
  const char *data = nullptr;
  uint64_t dataSize = 0;

  const Tensor *find(const std::string &name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second].second;
  }
};

Safetensors readSafetensors(const std::string &path) {
  Safetensors st;
  st.file = readWholeFile(path, "checkpoint");
  const std::string &file = st.file;
  auto corrupt = [&](const std::string &why) {
    return Error(fmt::format("checkpoint '{}' is not a valid safetensors file: {}", path, why));
  };
  if (file.size() < 8)
    throw corrupt("shorter than its 8-byte header length");
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i)
    headerLen |= uint64_t(static_cast<unsigned char>(file[i])) << (8 * i);
  if (headerLen > file.size() - 8)
    throw corrupt(fmt::format("header length {} exceeds the file size {} (truncated?)",
                              headerLen, file.size()));
  st.dataSize = file.size() - 8 - headerLen;
  st.data = file.data() + 8 + headerLen;
  nlohmann::json header =
      nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + long(headerLen), nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    throw corrupt("the header is not a JSON object");
  for (const auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        throw corrupt("__metadata__ is not an object");
      for (const auto &[k, v] : entry.items())
        if (v.is_string())
          st.metadata[k] = v.get<std::string>();
      continue;
    }
    std::vector<int64_t> shape, range;
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !toIndices(entry["shape"], shape) ||
        !entry.contains("data_offsets") || !toIndices(entry["data_offsets"], range) ||
        range.size() != 2)
      throw corrupt(fmt::format("malformed entry for tensor '{}'", name));
    const uint64_t begin = static_cast<uint64_t>(range[0]), end = static_cast<uint64_t>(range[1]);
    if (begin > end || end > st.dataSize)
      throw corrupt(fmt::format("data_offsets [{}, {}] of tensor '{}' do not fit {} bytes "
                                "of data (truncated?)",
                                begin, end, name, st.dataSize));
    st.index.emplace(name, st.tensors.size());
    st.tensors.push_back({name, Tensor{entry["dtype"].get<std::string>(), std::move(shape),
                                       st.data + begin, begin, end - begin}});
  }
  return st;
}

// The data section's layout, as the reference loader (the safetensors
// crate, Python's safetensors) checks it: in the order of their offsets the
// tensors follow each other without overlap or gap, and the last ends where
// the data section does. Checked after the names and shapes (a missing or
// extra tensor is named as such), before anything is copied.
void checkLayout(const std::string &path, const Safetensors &st) {
  auto corrupt = [&](const std::string &why) {
    return Error(fmt::format("checkpoint '{}' is not a valid safetensors file: {}", path, why));
  };
  std::vector<size_t> order(st.tensors.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Tensor &x = st.tensors[a].second, &y = st.tensors[b].second;
    return x.begin != y.begin ? x.begin < y.begin : x.bytes < y.bytes;
  });
  uint64_t at = 0;
  const std::string *previous = nullptr;
  for (size_t i : order) {
    const auto &[name, t] = st.tensors[i];
    if (t.begin < at)
      throw corrupt(fmt::format("tensors '{}' (data_offsets [{}, {}]) and '{}' (data_offsets "
                                "[{}, {}]) overlap in the data section",
                                *previous, st.find(*previous)->begin, at, name, t.begin,
                                t.begin + t.bytes));
    if (t.begin > at)
      throw corrupt(fmt::format("bytes [{}, {}) of the data section, before tensor '{}', belong "
                                "to no tensor",
                                at, t.begin, name));
    at = t.begin + t.bytes;
    previous = &name;
  }
  if (at != st.dataSize)
    throw corrupt(fmt::format("the data section has {} bytes, but its tensors end at byte {}{}",
                              st.dataSize, at,
                              previous ? fmt::format(" (tensor '{}')", *previous) : ""));
}

// Checks that t is of dtype `dtype` (F32 unless said) and the given shape
// with matching data; the message names the tensor and says what differs.
void checkTensor(const std::string &path, const std::string &name, const Tensor &t,
                 const std::vector<int64_t> &shape, int64_t numel,
                 const std::string &dtype = "F32") {
  if (t.dtype != dtype)
    throw Error(fmt::format("checkpoint '{}': tensor '{}' has dtype {}, expected {}", path,
                            name, t.dtype, dtype));
  const int64_t elementBytes = dtype == "I64" ? 8 : 4;
  if (t.shape != shape)
    throw Error(fmt::format("checkpoint '{}': tensor '{}' has shape [{}], expected [{}]", path,
                            name, fmt::join(t.shape, ", "), fmt::join(shape, ", ")));
  if (t.bytes != static_cast<uint64_t>(numel * elementBytes))
    throw Error(fmt::format("checkpoint '{}' is not a valid safetensors file: data_offsets "
                            "[{}, {}] of tensor '{}' hold {} bytes, but {} {} values need {}",
                            path, t.begin, t.begin + t.bytes, name, t.bytes, numel, dtype,
                            numel * elementBytes));
}

// Every tensor of st is a parameter or buffer of spec (or, with
// allowState, an optimizer state tensor) and every parameter and buffer is
// there (as torch's strict load_state_dict): else an Error naming the first
// difference.
void checkParameters(const std::string &path, const Safetensors &st, const ModelSpec &spec,
                     bool allowState) {
  const std::vector<ModelTensor> model = modelTensors(spec);
  // In the model's order, so that the message names its first difference.
  for (const ModelTensor &m : model) {
    const Tensor *t = st.find(m.name);
    if (!t)
      throw Error(fmt::format("checkpoint '{}' has no tensor '{}'", path, m.name));
    checkTensor(path, m.name, *t, m.shape, m.numel, m.dtype);
  }
  std::unordered_map<std::string, size_t> byName;
  for (size_t i = 0; i < model.size(); ++i)
    byName.emplace(model[i].name, i);
  for (const auto &[name, t] : st.tensors) {
    if (allowState && name.rfind(kStatePrefix, 0) == 0)
      continue;
    if (!byName.count(name))
      throw Error(fmt::format("checkpoint '{}' has tensor '{}', which is not a parameter "
                              "or buffer of model '{}'",
                              path, name, spec.name));
  }
}

// Copies the parameters and buffers of a checked file into persistent.
// (Stage 3: the parameters into `image`, the gathered image of shards.h.)
void copyModelTensors(const Safetensors &st, const ModelSpec &spec, char *persistent,
                      char *image = nullptr) {
  for (const ModelTensor &m : modelTensors(spec))
    std::memcpy((m.param && image ? image : persistent) + m.offset, st.find(m.name)->data,
                static_cast<size_t>(m.numel * m.elementBytes));
}

//===--- metadata ------------------------------------------------------------===//

using Metadata = std::map<std::string, std::string>;

const std::string &metaString(const Metadata &m, const char *key, const char *where) {
  auto it = m.find(key);
  if (it == m.end())
    throw Error(fmt::format("{}: no '{}' in its metadata", where, key));
  return it->second;
}

// An integer (base 10) or a hexadecimal number (base 16, up to 64 bits).
template <class T> T metaNumber(const Metadata &m, const char *key, const char *where, int base) {
  const std::string &v = metaString(m, key, where);
  errno = 0;
  char *end = nullptr;
  const T x = base == 16 ? T(std::strtoull(v.c_str(), &end, 16)) : T(std::strtoll(v.c_str(), &end, 10));
  if (v.empty() || *end != '\0' || errno == ERANGE || (base == 16 && v.size() > 16))
    throw Error(fmt::format("{}: metadata '{}' is '{}', not {}", where, key, v,
                            base == 16 ? "a hexadecimal number" : "an integer"));
  return x;
}
int64_t metaInt(const Metadata &m, const char *key, const char *where) {
  return metaNumber<int64_t>(m, key, where, 10);
}
uint64_t metaHex(const Metadata &m, const char *key, const char *where) {
  return metaNumber<uint64_t>(m, key, where, 16);
}

std::map<std::string, std::string> stateMetadata(const TrainingState &s) {
  return {
      {"dtc.step", std::to_string(s.step)},
      {"dtc.epoch", std::to_string(s.epoch)},
      {"dtc.epoch_samples", std::to_string(s.epochSamples)},
      {"dtc.ranks", std::to_string(s.ranks)},
      {"dtc.batch", std::to_string(s.batch)},
      {"dtc.accumulate", std::to_string(s.accumulate)},
      {"dtc.seed", std::to_string(s.seed)},
      {"dtc.shuffle", s.shuffle ? "on" : "off"},
      {"dtc.lr", fmt::format("{:.9g}", s.lr)},
      // kind warmup decay_steps min_lr step_size gamma
      {"dtc.lr_schedule", fmt::format("{} {} {} {:.17g} {} {:.17g}",
                                      scheduleKindName(s.schedule.kind), s.schedule.warmup,
                                      s.schedule.decaySteps, s.schedule.minLr,
                                      s.schedule.stepSize, s.schedule.gamma)},
      {"dtc.epochs", std::to_string(s.epochs)},
      {"dtc.max_steps", std::to_string(s.maxSteps)},
      {"dtc.data", s.data},
      {"dtc.train_samples", std::to_string(s.trainSamples)},
      {"dtc.train_digest", fmt::format("{:016x}", s.trainDigest)},
  };
}

TrainingState stateFromMetadata(const std::map<std::string, std::string> &m, const char *where) {
  TrainingState s;
  s.step = metaInt(m, "dtc.step", where);
  s.epoch = metaInt(m, "dtc.epoch", where);
  s.epochSamples = metaInt(m, "dtc.epoch_samples", where);
  s.ranks = metaInt(m, "dtc.ranks", where);
  s.batch = metaInt(m, "dtc.batch", where);
  if (m.count("dtc.accumulate")) // absent from older checkpoints: 1
    s.accumulate = metaInt(m, "dtc.accumulate", where);
  const std::string seed = metaString(m, "dtc.seed", where);
  errno = 0;
  char *end = nullptr;
  s.seed = std::strtoull(seed.c_str(), &end, 10);
  if (seed.empty() || *end != '\0' || errno == ERANGE || seed[0] == '-')
    throw Error(fmt::format("{}: metadata 'dtc.seed' is '{}', not an integer", where, seed));
  const std::string shuffle = metaString(m, "dtc.shuffle", where);
  if (shuffle != "on" && shuffle != "off")
    throw Error(fmt::format("{}: metadata 'dtc.shuffle' is '{}', not on or off", where, shuffle));
  s.shuffle = shuffle == "on";
  const std::string lr = metaString(m, "dtc.lr", where);
  s.lr = std::strtof(lr.c_str(), &end);
  if (lr.empty() || *end != '\0' || !(s.lr >= 0) || s.lr == HUGE_VALF)
    throw Error(fmt::format("{}: metadata 'dtc.lr' is '{}', not a learning rate", where, lr));
  if (auto it = m.find("dtc.lr_schedule"); it != m.end()) {
    std::istringstream in(it->second);
    std::string kind, rest;
    LrSchedule &l = s.schedule;
    in >> kind >> l.warmup >> l.decaySteps >> l.minLr >> l.stepSize >> l.gamma;
    const auto k = scheduleKindNamed(kind);
    if (!in || (in >> rest) || !k || l.warmup < 0 || l.decaySteps < 0 || !(l.minLr >= 0) ||
        l.stepSize < 1 || !(l.gamma >= 0 && l.gamma <= 1))
      throw Error(fmt::format("{}: metadata 'dtc.lr_schedule' is '{}', not a learning-rate "
                              "schedule",
                              where, it->second));
    l.kind = *k;
  }
  s.epochs = metaInt(m, "dtc.epochs", where);
  s.maxSteps = metaInt(m, "dtc.max_steps", where);
  s.data = metaString(m, "dtc.data", where);
  s.trainSamples = metaInt(m, "dtc.train_samples", where);
  s.trainDigest = metaHex(m, "dtc.train_digest", where);
  if (s.step < 0 || s.epoch < 1 || s.epochSamples < 0 || s.ranks < 1 || s.batch < 1 ||
      s.accumulate < 1 || s.epochs < 0 || s.maxSteps < 0 || s.trainSamples < 0 || s.epochSamples > s.trainSamples)
    throw Error(fmt::format("{}: its step, epoch, position, ranks, batch or accumulation is out of range",
                            where));
  return s;
}

} // namespace

void saveCheckpoint(const std::string &path, const ModelSpec &spec,
                    const char *persistent, const char *image) {
  writeSafetensors(path, "checkpoint", parameterTensors(spec, persistent, image),
                   {{"dtc.kind", "parameters"}, {"dtc.model", spec.name}}, /*withCrc=*/false);
}

void loadCheckpoint(const std::string &path, const ModelSpec &spec, char *persistent,
                    char *image) {
  const Safetensors st = readSafetensors(path);
  auto kind = st.metadata.find("dtc.kind");
  const bool trainingState = kind != st.metadata.end() && kind->second == kTrainingStateKind;
  // Validate everything first, then copy: all or nothing.
  checkParameters(path, st, spec, trainingState);
  checkLayout(path, st);
  copyModelTensors(st, spec, persistent, image);
}

std::vector<std::string> stateTensorNames(const ModelSpec &spec, const ParamSpec &p) {
  std::vector<std::string> names;
  const std::string base = std::string(kStatePrefix) + p.name + "/";
  if (spec.numStates == 1)
    names.push_back(base + "momentum_buffer");
  else if (spec.numStates == 2) {
    names.push_back(base + "exp_avg");
    names.push_back(base + "exp_avg_sq");
  }
  return names;
}

void saveTrainingState(const std::string &path, const ModelSpec &spec, const char *persistent,
                       const TrainingState &state, const std::string &alsoLinkAs,
                       const float *gathered, const char *image) {
  if ((spec.shardStage > 0 && !gathered) || (spec.shardStage == 3 && !image))
    throw Error("internal error: a sharded program's state is saved gathered");
  std::vector<OutTensor> tensors = parameterTensors(spec, persistent, image);
  for (int32_t i = 0; i < spec.numParams; ++i) {
    const ParamSpec &p = spec.params[i];
    const size_t bytes = static_cast<size_t>(p.numel) * sizeof(float);
    std::vector<std::string> names = stateTensorNames(spec, p);
    for (size_t k = 0; k < names.size(); ++k)
      tensors.push_back(
          {names[k], shapeOf(p),
           spec.shardStage > 0
               ? reinterpret_cast<const char *>(gathered + gatheredStateOffset(spec, i, int(k)))
               : persistent + p.stateOffset + k * bytes,
           bytes});
  }
  std::map<std::string, std::string> meta = stateMetadata(state);
  meta["dtc.kind"] = kTrainingStateKind;
  meta["dtc.version"] = std::to_string(kTrainingStateVersion);
  meta["dtc.model"] = spec.name;
  meta["dtc.program"] = fmt::format("{:016x}", spec.fingerprint);
  meta["dtc.model_digest"] = fmt::format("{:016x}", spec.modelDigest);
  meta["dtc.shard"] = fmt::format("{}x{}", spec.shardStage, spec.shardRanks);
  meta["dtc.optimizer"] = optimizerName(spec.recipe.optimizer);
  writeSafetensors(path, "checkpoint", tensors, std::move(meta), /*withCrc=*/true, alsoLinkAs);
}

LoadedTrainingState loadTrainingState(const std::string &path, const ModelSpec &spec) {
  const Safetensors st = readSafetensors(path);
  const std::string where = fmt::format("checkpoint '{}'", path);
  auto meta = [&](const char *key) {
    auto it = st.metadata.find(key);
    return it == st.metadata.end() ? std::string() : it->second;
  };
  if (meta("dtc.kind") != kTrainingStateKind)
    throw Error(fmt::format("{} holds parameters only (written by --save or another program), "
                            "not a training state; --resume needs a file written by "
                            "--checkpoint (to start from its parameters, use --init)",
                            where));
  if (meta("dtc.version") != std::to_string(kTrainingStateVersion))
    throw Error(fmt::format("{} is a training state of version '{}'; this runtime reads "
                            "version {}",
                            where, meta("dtc.version"), kTrainingStateVersion));
  if (meta("dtc.model") != spec.name)
    throw Error(fmt::format("{} is a training state of model '{}', but this program trains "
                            "model '{}'",
                            where, meta("dtc.model"), spec.name));
  checkParameters(path, st, spec, /*allowState=*/true);
  if (meta("dtc.optimizer") != optimizerName(spec.recipe.optimizer))
    throw Error(fmt::format("{} was trained with optimizer {}, but this program uses {}; to "
                            "start from its parameters, use --init",
                            where, meta("dtc.optimizer"), optimizerName(spec.recipe.optimizer)));
  // The optimizer state: exactly the tensors this optimizer keeps.
  size_t stateTensors = 0;
  for (const auto &[name, t] : st.tensors)
    stateTensors += name.rfind(kStatePrefix, 0) == 0;
  size_t expected = 0;
  for (int32_t i = 0; i < spec.numParams; ++i) {
    const ParamSpec &p = spec.params[i];
    for (const std::string &name : stateTensorNames(spec, p)) {
      ++expected;
      const Tensor *t = st.find(name);
      if (!t)
        throw Error(fmt::format("{} has no optimizer state tensor '{}' (this program keeps {} "
                                "state buffer{} per parameter)",
                                where, name, spec.numStates, spec.numStates == 1 ? "" : "s"));
      checkTensor(path, name, *t, shapeOf(p), p.numel);
    }
  }
  if (stateTensors != expected)
    for (const auto &[name, t] : st.tensors)
      if (name.rfind(kStatePrefix, 0) == 0) {
        bool known = false;
        for (int32_t i = 0; i < spec.numParams && !known; ++i)
          for (const std::string &n : stateTensorNames(spec, spec.params[i]))
            known = known || n == name;
        if (!known)
          throw Error(fmt::format("{} has optimizer state tensor '{}', which this program's "
                                  "optimizer ({}) does not keep",
                                  where, name, optimizerName(spec.recipe.optimizer)));
      }
  const uint64_t program = metaHex(st.metadata, "dtc.program", where.c_str());
  // Another program of the same model (its digest): resharded, as the
  // state is written whole.
  const bool sameModel = spec.modelDigest != 0 && !meta("dtc.model_digest").empty() &&
                         metaHex(st.metadata, "dtc.model_digest", where.c_str()) ==
                             spec.modelDigest;
  if (program != spec.fingerprint && !sameModel)
    throw Error(fmt::format(
        "{} was written by another compiled program (fingerprint {:016x}, this one {:016x}) "
        "of another model digest ({}, this one {:016x}): the model's parameters and optimizer "
        "match, so the model or its recipe changed, or one of the programs was compiled from "
        "IR; start from its parameters with --init",
        where, program, spec.fingerprint,
        meta("dtc.model_digest").empty() ? "none" : meta("dtc.model_digest"), spec.modelDigest));
  checkLayout(path, st);
  // The data section (the tensors back to back) against its CRC-32.
  const uint32_t crc = crc32Of(crc32Of(0, nullptr, 0), st.data, st.dataSize);
  const uint64_t stored = metaHex(st.metadata, "dtc.crc32", where.c_str());
  if (stored != crc)
    throw Error(fmt::format("{} is damaged: its tensor data has CRC-32 {:08x}, the file says "
                            "{:08x}",
                            where, crc, stored));

  LoadedTrainingState out;
  out.state = stateFromMetadata(st.metadata, where.c_str());
  // (Sharded: the state gathered, after the block; each rank takes its
  // shards of it.)
  // (Stage 3: then the parameters' image.)
  const int64_t stateEnd =
      spec.persistentBytes + gatheredStateFloats(spec) * int64_t(sizeof(float));
  out.persistent.assign(
      static_cast<size_t>(stateEnd + (spec.shardStage == 3 ? paramImageBytes(spec) : 0)), 0);
  copyModelTensors(st, spec, out.persistent.data(),
                   spec.shardStage == 3 ? out.persistent.data() + stateEnd : nullptr);
  for (int32_t i = 0; i < spec.numParams; ++i) {
    const ParamSpec &p = spec.params[i];
    const size_t bytes = static_cast<size_t>(p.numel) * sizeof(float);
    std::vector<std::string> names = stateTensorNames(spec, p);
    for (size_t k = 0; k < names.size(); ++k) {
      const int64_t at = spec.shardStage > 0
                             ? spec.persistentBytes +
                                   gatheredStateOffset(spec, i, int(k)) * int64_t(sizeof(float))
                             : p.stateOffset + int64_t(k * bytes);
      std::memcpy(out.persistent.data() + at, st.find(names[k])->data, bytes);
    }
  }
  return out;
}

std::string encodeTrainingState(const TrainingState &s) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto &[k, v] : stateMetadata(s))
    j[k] = v;
  return j.dump();
}

TrainingState decodeTrainingState(const std::string &text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object())
    throw Error("internal error: a malformed training state was broadcast");
  std::map<std::string, std::string> m;
  for (const auto &[k, v] : j.items())
    if (v.is_string())
      m[k] = v.get<std::string>();
  return stateFromMetadata(m, "the broadcast training state");
}

} // namespace dtc::rt
