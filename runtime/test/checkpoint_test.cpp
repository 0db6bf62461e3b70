//===- checkpoint_test.cpp - safetensors save/load and rejection ---------===//
#include "support/files.h"
#include "checkpoint/checkpoint.h"
#include "support/error.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace dtc::rt;
using dtc::test::readFile;
using dtc::test::TempDir;
using dtc::test::writeFile;

namespace {

// fc.weight [3,4] at 0, fc.bias [3] at 64 (a gap), scale [] at 128; the
// persistent block also holds 64 bytes of "optimizer state" after 192.
// With Adam (2 state buffers per parameter), the state lies at 192
// (fc.weight: 2 x 12 floats), 320 (fc.bias: 2 x 3) and 352 (scale: 2 x 1).
const ParamSpec kParams[] = {
    {"fc.weight", 2, {3, 4}, 12, 0, InitKind::Zeros, 0, 0, 4, 3, 192},
    {"fc.bias", 1, {3}, 3, 64, InitKind::Zeros, 0, 0, 4, 3, 320},
    {"scale", 0, {}, 1, 128, InitKind::Zeros, 0, 0, 1, 1, 352},
};

ModelSpec makeSpec() {
  ModelSpec s{};
  s.name = "ckpt";
  s.numParams = 3;
  s.params = kParams;
  s.paramBytes = 192;
  s.persistentBytes = 256;
  return s;
}

std::vector<float> filled(size_t floats, float base) {
  std::vector<float> v(floats);
  for (size_t i = 0; i < floats; ++i)
    v[i] = base + 0.25f * float(i);
  return v;
}

char *bytes(std::vector<float> &v) { return reinterpret_cast<char *>(v.data()); }

// Rewrites the safetensors header of path (keeping the data) with f applied
// to its JSON.
void rewriteHeader(const std::string &path, const std::function<void(nlohmann::json &)> &f) {
  std::string file = readFile(path);
  uint64_t n;
  std::memcpy(&n, file.data(), 8);
  nlohmann::json h = nlohmann::json::parse(file.substr(8, n));
  f(h);
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t len = text.size();
  writeFile(path, std::string(reinterpret_cast<char *>(&len), 8) + text + file.substr(8 + n));
}

template <class Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  }
  return "<no error>";
}

class Checkpoint : public ::testing::Test {
protected:
  void SetUp() override {
    saved = filled(64, 1.0f);
    saveCheckpoint(path, spec, bytes(saved));
  }
  // Loads into a fresh buffer; on error the buffer must be untouched.
  std::string loadError() {
    std::vector<float> target(64, -7.0f);
    std::string err = errorOf([&] { loadCheckpoint(path, spec, bytes(target)); });
    EXPECT_EQ(target, std::vector<float>(64, -7.0f)) << "a failed load modified parameters";
    return err;
  }
  // Rewrites the header (keeping the data) with f applied to its JSON.
  void editHeader(const std::function<void(nlohmann::json &)> &f) { rewriteHeader(path, f); }

  TempDir dir;
  std::string path = dir.file("model.safetensors");
  ModelSpec spec = makeSpec();
  std::vector<float> saved;
};

TEST_F(Checkpoint, RoundTripCopiesExactlyTheParameters) {
  std::vector<float> loaded(64, -1.0f);
  loadCheckpoint(path, spec, bytes(loaded));
  for (size_t i = 0; i < 64; ++i) {
    bool isParam = i < 12 || (i >= 16 && i < 19) || i == 32;
    EXPECT_EQ(loaded[i], isParam ? saved[i] : -1.0f) << "float " << i;
  }
  EXPECT_EQ(dtc::test::listDir(dir.path()), std::vector<std::string>{"model.safetensors"})
      << "temporary file left behind";
}

TEST_F(Checkpoint, FileFollowsTheSafetensorsLayout) {
  std::string file = readFile(path);
  uint64_t n;
  std::memcpy(&n, file.data(), 8); // little-endian host
  EXPECT_EQ(n % 8, 0u);
  auto h = nlohmann::json::parse(file.substr(8, n));
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  EXPECT_EQ(h["fc.weight"]["dtype"], "F32");
  EXPECT_EQ(h["fc.weight"]["shape"], nlohmann::json({3, 4}));
  EXPECT_EQ(h["fc.weight"]["data_offsets"], nlohmann::json({0, 48}));
  EXPECT_EQ(h["fc.bias"]["data_offsets"], nlohmann::json({48, 60}));
  EXPECT_EQ(h["scale"]["shape"], nlohmann::json::array());
  EXPECT_EQ(h["scale"]["data_offsets"], nlohmann::json({60, 64}));
  ASSERT_EQ(file.size(), 8 + n + 64);
  std::vector<float> data(16);
  std::memcpy(data.data(), file.data() + 8 + n, 64);
  EXPECT_EQ(data[0], saved[0]);
  EXPECT_EQ(data[12], saved[16]);
  EXPECT_EQ(data[15], saved[32]);
}

TEST_F(Checkpoint, RejectsTruncatedAndCorruptFiles) {
  std::string good = readFile(path);
  writeFile(path, good.substr(0, good.size() - 3));
  std::string e = loadError();
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  writeFile(path, good.substr(0, 20));
  EXPECT_NE(loadError().find("exceeds the file size"), std::string::npos);
  writeFile(path, good.substr(0, 5));
  EXPECT_NE(loadError().find("not a valid safetensors file"), std::string::npos);
  std::string garbled = good;
  garbled[9] = '#';
  writeFile(path, garbled);
  EXPECT_NE(loadError().find("not a JSON object"), std::string::npos);
  writeFile(path, std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + good);
  EXPECT_NE(loadError().find("exceeds"), std::string::npos);
}

TEST_F(Checkpoint, RejectsMismatchedTensors) {
  editHeader([](nlohmann::json &h) { h["fc.bias"]["dtype"] = "F16"; });
  EXPECT_NE(loadError().find("tensor 'fc.bias' has dtype F16, expected F32"), std::string::npos);
  SetUp();
  editHeader([](nlohmann::json &h) { h["fc.weight"]["shape"] = {4, 3}; });
  EXPECT_NE(loadError().find("'fc.weight' has shape [4, 3], expected [3, 4]"), std::string::npos);
  SetUp();
  editHeader([](nlohmann::json &h) { h.erase("scale"); });
  EXPECT_NE(loadError().find("has no tensor 'scale'"), std::string::npos);
  SetUp();
  editHeader([](nlohmann::json &h) { h["extra"] = h["scale"]; });
  EXPECT_NE(loadError().find("tensor 'extra'"), std::string::npos);
  SetUp();
  editHeader([](nlohmann::json &h) { h["fc.bias"]["data_offsets"] = {48, 64}; });
  EXPECT_NE(loadError().find("data_offsets"), std::string::npos);
  SetUp();
  editHeader([](nlohmann::json &h) { h["fc.bias"]["shape"] = "three"; });
  EXPECT_NE(loadError().find("malformed entry for tensor 'fc.bias'"), std::string::npos);
}

// The data section's layout, as the reference loader (the safetensors
// crate) checks it: tensors in any order of offsets, but without overlap or
// gap, the last ending with the file. Overlapping tensors were accepted.
TEST_F(Checkpoint, RejectsOverlapsGapsAndTrailingBytesInTheData) {
  // Another order of the data is a valid file.
  editHeader([](nlohmann::json &h) {
    h["fc.bias"]["data_offsets"] = {52, 64};
    h["scale"]["data_offsets"] = {48, 52};
  });
  std::vector<float> loaded(64, -1.0f);
  EXPECT_NO_THROW(loadCheckpoint(path, spec, bytes(loaded)));
  SetUp();
  editHeader([](nlohmann::json &h) { h["fc.bias"]["data_offsets"] = {44, 56}; });
  std::string e = loadError();
  EXPECT_NE(e.find("checkpoint '" + path + "' is not a valid safetensors file: tensors "
                   "'fc.weight' (data_offsets [0, 48]) and 'fc.bias' (data_offsets [44, 56]) "
                   "overlap in the data section"),
            std::string::npos)
      << e;
  SetUp();
  editHeader([](nlohmann::json &h) { h["scale"]["data_offsets"] = {0, 4}; });
  e = loadError();
  EXPECT_NE(e.find("tensors 'scale' (data_offsets [0, 4]) and 'fc.weight' (data_offsets "
                   "[0, 48]) overlap"),
            std::string::npos)
      << e;
  SetUp();
  writeFile(path, readFile(path) + std::string(4, '\0'));
  e = loadError();
  EXPECT_NE(e.find("not a valid safetensors file: the data section has 68 bytes, but its "
                   "tensors end at byte 64 (tensor 'scale')"),
            std::string::npos)
      << e;
  editHeader([](nlohmann::json &h) { h["scale"]["data_offsets"] = {64, 68}; });
  e = loadError();
  EXPECT_NE(e.find("bytes [60, 64) of the data section, before tensor 'scale', belong to no "
                   "tensor"),
            std::string::npos)
      << e;
}

TEST_F(Checkpoint, MissingFilesAndUnwritableTargets) {
  path = dir.file("absent.safetensors");
  EXPECT_NE(loadError().find("cannot open checkpoint '" + path + "': No such file"),
            std::string::npos);
  std::string bad = dir.file("no/such/dir/x.safetensors");
  std::string e = errorOf([&] { saveCheckpoint(bad, spec, bytes(saved)); });
  EXPECT_NE(e.find("cannot write checkpoint '" + bad + "'"), std::string::npos) << e;
}

// Buffers (batch normalization's running statistics and its int64 counter)
// are saved after the parameters under their names, with their dtypes, and
// loaded back; a file without them, or with the counter as F32, is refused
// (torch's strict load_state_dict) and changes nothing.
TEST(CheckpointBuffers, SavedAndLoadedWithTheirDtypes) {
  const BufferSpec buffers[] = {
      {"n.running_mean", ElementType::F32, 1, {3}, 3, 192, 0.0},
      {"n.num_batches_tracked", ElementType::I64, 0, {}, 1, 208, 0.0},
  };
  ModelSpec spec = makeSpec();
  spec.numBuffers = 2;
  spec.buffers = buffers;
  spec.bufferBytes = 32;
  spec.persistentBytes = 256;
  std::vector<float> saved = filled(64, 1.0f);
  const int64_t counter = (int64_t(1) << 40) + 3; // beyond a float's integers
  std::memcpy(bytes(saved) + 208, &counter, 8);
  TempDir dir;
  const std::string path = dir.file("bn.safetensors");
  saveCheckpoint(path, spec, bytes(saved));
  const std::string file = readFile(path);
  uint64_t n;
  std::memcpy(&n, file.data(), 8);
  auto h = nlohmann::json::parse(file.substr(8, n));
  EXPECT_EQ(h["n.running_mean"]["dtype"], "F32");
  EXPECT_EQ(h["n.num_batches_tracked"]["dtype"], "I64");
  EXPECT_EQ(h["n.num_batches_tracked"]["shape"], nlohmann::json::array());
  EXPECT_EQ(h["n.num_batches_tracked"]["data_offsets"], nlohmann::json({76, 84}));

  std::vector<float> loaded(64, -1.0f);
  loadCheckpoint(path, spec, bytes(loaded));
  for (size_t i = 48; i < 51; ++i)
    EXPECT_EQ(loaded[i], saved[i]) << "running_mean " << i - 48;
  int64_t got = 0;
  std::memcpy(&got, bytes(loaded) + 208, 8);
  EXPECT_EQ(got, counter);

  auto refused = [&](const std::function<void(nlohmann::json &)> &edit, const std::string &why) {
    const std::string bad = dir.file("bad.safetensors");
    writeFile(bad, file);
    rewriteHeader(bad, edit);
    std::vector<float> target(64, -7.0f);
    const std::string e = errorOf([&] { loadCheckpoint(bad, spec, bytes(target)); });
    EXPECT_NE(e.find(why), std::string::npos) << e;
    EXPECT_EQ(target, std::vector<float>(64, -7.0f)) << "a failed load modified the block";
  };
  refused([](nlohmann::json &j) { j.erase("n.running_mean"); },
          "has no tensor 'n.running_mean'");
  refused([](nlohmann::json &j) { j["n.num_batches_tracked"]["dtype"] = "F32"; },
          "tensor 'n.num_batches_tracked' has dtype F32, expected I64");
  refused([](nlohmann::json &j) { j["n.other"] = j["n.running_mean"]; },
          "tensor 'n.other', which is not a parameter or buffer");
}

// PyTorch compatibility: torch (manual safetensors parsing, as the
// `safetensors` package would) loads our file into nn.Linear(4, 3) with a
// strict state_dict, doubles it and writes it back in the same format.
TEST_F(Checkpoint, PyTorchRoundTrip) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  const std::string script = dir.file("rt.py");
  writeFile(script, R"PY(
import json, struct, sys, torch
src, dst = sys.argv[1], sys.argv[2]
raw = open(src, 'rb').read()
n, = struct.unpack('<Q', raw[:8])
assert n % 8 == 0
header = json.loads(raw[8:8 + n])
assert header.pop('__metadata__')['format'] == 'pt'
data = raw[8 + n:]
sd = {}
for name, e in header.items():
    b, end = e['data_offsets']
    assert e['dtype'] == 'F32'
    sd[name] = torch.frombuffer(bytearray(data[b:end]), dtype=torch.float32).reshape(e['shape'])
m = torch.nn.Module()
m.fc = torch.nn.Linear(4, 3)
m.register_buffer('scale', torch.zeros(()))
m.load_state_dict(sd, strict=True)
assert torch.equal(m.fc.weight, torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.25 + 1)
out, offs, blobs = {}, 0, []
for name, t in m.state_dict().items():
    b = (t * 2).contiguous().numpy().tobytes()
    out[name] = {'dtype': 'F32', 'shape': list(t.shape), 'data_offsets': [offs, offs + len(b)]}
    offs += len(b); blobs.append(b)
h = json.dumps(out).encode()
h += b' ' * ((8 - len(h) % 8) % 8)
open(dst, 'wb').write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
)PY");
  const std::string back = dir.file("back.safetensors");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + path + " " + back).c_str()), 0);
  std::vector<float> loaded(64, 0.0f);
  loadCheckpoint(back, spec, bytes(loaded));
  EXPECT_EQ(loaded[0], 2 * saved[0]);
  EXPECT_EQ(loaded[11], 2 * saved[11]);
  EXPECT_EQ(loaded[18], 2 * saved[18]);
  EXPECT_EQ(loaded[32], 2 * saved[32]);
}

//===--- training state (--checkpoint, --resume) -----------------------------===//

ModelSpec adamSpec() {
  ModelSpec s = makeSpec();
  s.persistentBytes = 384;
  s.numStates = 2;
  s.recipe.optimizer = OptimizerKind::Adam;
  s.fingerprint = 0x1234abcd5678ef00ULL;
  return s;
}

TrainingState someState() {
  TrainingState st;
  st.step = 37;
  st.epoch = 2;
  st.epochSamples = 640;
  st.ranks = 2;
  st.batch = 16;
  st.seed = 18446744073709551615ULL; // the largest --seed
  st.shuffle = true;
  st.lr = 0.0123f;
  st.schedule.kind = LrSchedule::Kind::Cosine;
  st.schedule.warmup = 7;
  st.schedule.decaySteps = 900;
  st.schedule.minLr = 1.0 / 3.0;
  st.schedule.stepSize = 4;
  st.schedule.gamma = 0.7;
  st.epochs = 5;
  st.maxSteps = 0;
  st.data = "synthetic";
  st.trainSamples = 1000;
  st.trainDigest = 0xfedcba9876543210ULL;
  return st;
}

class TrainingStateFile : public ::testing::Test {
protected:
  void SetUp() override {
    block = filled(96, 3.0f); // 384 bytes
    saveTrainingState(path, spec, bytes(block), someState());
  }
  std::string loadError(const ModelSpec &s) {
    return errorOf([&] { loadTrainingState(path, s); });
  }
  void editHeader(const std::function<void(nlohmann::json &)> &f) { rewriteHeader(path, f); }

  TempDir dir;
  std::string path = dir.file("ck.safetensors");
  ModelSpec spec = adamSpec();
  std::vector<float> block;
};

TEST_F(TrainingStateFile, RoundTripRestoresParametersStateAndProgress) {
  LoadedTrainingState loaded = loadTrainingState(path, spec);
  ASSERT_EQ(loaded.persistent.size(), 384u);
  const float *got = reinterpret_cast<const float *>(loaded.persistent.data());
  for (size_t i = 0; i < 96; ++i) {
    // Parameters: [0,12) [16,19) 32; state: [48,72) [80,86) [88,90).
    const bool assigned = i < 12 || (i >= 16 && i < 19) || i == 32 || (i >= 48 && i < 72) ||
                          (i >= 80 && i < 86) || (i >= 88 && i < 90);
    EXPECT_EQ(got[i], assigned ? block[i] : 0.0f) << "float " << i;
  }
  const TrainingState want = someState(), &st = loaded.state;
  EXPECT_EQ(st.step, want.step);
  EXPECT_EQ(st.epoch, want.epoch);
  EXPECT_EQ(st.epochSamples, want.epochSamples);
  EXPECT_EQ(st.ranks, want.ranks);
  EXPECT_EQ(st.batch, want.batch);
  EXPECT_EQ(st.seed, want.seed);
  EXPECT_EQ(st.shuffle, want.shuffle);
  EXPECT_EQ(st.lr, want.lr) << "the learning rate must round-trip exactly";
  EXPECT_EQ(st.schedule.kind, want.schedule.kind);
  EXPECT_EQ(st.schedule.warmup, want.schedule.warmup);
  EXPECT_EQ(st.schedule.decaySteps, want.schedule.decaySteps);
  EXPECT_EQ(st.schedule.minLr, want.schedule.minLr) << "exactly";
  EXPECT_EQ(st.schedule.stepSize, want.schedule.stepSize);
  EXPECT_EQ(st.schedule.gamma, want.schedule.gamma) << "exactly";
  EXPECT_EQ(st.epochs, want.epochs);
  EXPECT_EQ(st.data, want.data);
  EXPECT_EQ(st.trainSamples, want.trainSamples);
  EXPECT_EQ(st.trainDigest, want.trainDigest);
  // The metadata survives a broadcast.
  const TrainingState again = decodeTrainingState(encodeTrainingState(st));
  EXPECT_EQ(again.seed, want.seed);
  EXPECT_EQ(again.lr, want.lr);
  EXPECT_EQ(again.epochSamples, want.epochSamples);
}

TEST_F(TrainingStateFile, StateTensorsHaveTorchOptimNames) {
  std::string file = readFile(path);
  uint64_t n;
  std::memcpy(&n, file.data(), 8);
  auto h = nlohmann::json::parse(file.substr(8, n));
  EXPECT_EQ(h["optimizer/fc.weight/exp_avg"]["shape"], nlohmann::json({3, 4}));
  EXPECT_EQ(h["optimizer/fc.weight/exp_avg_sq"]["shape"], nlohmann::json({3, 4}));
  EXPECT_EQ(h["optimizer/scale/exp_avg_sq"]["shape"], nlohmann::json::array());
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  EXPECT_EQ(h["__metadata__"]["dtc.kind"], "training-state");
  EXPECT_EQ(h["__metadata__"]["dtc.step"], "37");
  EXPECT_EQ(h["__metadata__"]["dtc.optimizer"], "adam");
  EXPECT_EQ(h["__metadata__"]["dtc.program"], "1234abcd5678ef00");
  // exp_avg_sq of fc.weight follows its exp_avg in the persistent block.
  const auto range = h["optimizer/fc.weight/exp_avg_sq"]["data_offsets"];
  float first;
  std::memcpy(&first, file.data() + 8 + n + range[0].get<size_t>(), 4);
  EXPECT_EQ(first, block[60]);
  ModelSpec sgd = makeSpec();
  sgd.numStates = 1;
  EXPECT_EQ(stateTensorNames(sgd, kParams[1]),
            std::vector<std::string>{"optimizer/fc.bias/momentum_buffer"});
  sgd.numStates = 0;
  EXPECT_TRUE(stateTensorNames(sgd, kParams[1]).empty());
}

// A checkpoint without a schedule (older dtc) continues at a constant rate;
// a malformed one is refused with its value.
TEST_F(TrainingStateFile, ScheduleMetadataAbsentOrMalformed) {
  editHeader([](nlohmann::json &h) { h["__metadata__"].erase("dtc.lr_schedule"); });
  EXPECT_EQ(loadTrainingState(path, spec).state.schedule.kind, LrSchedule::Kind::Constant);
  editHeader([](nlohmann::json &h) { h["__metadata__"]["dtc.lr_schedule"] = "cosine 7 900"; });
  EXPECT_NE(loadError(spec).find("metadata 'dtc.lr_schedule' is 'cosine 7 900', not a "
                                 "learning-rate schedule"),
            std::string::npos)
      << loadError(spec);
}

TEST_F(TrainingStateFile, InitTakesItsParametersOnly) {
  std::vector<float> target(96, -1.0f);
  loadCheckpoint(path, spec, bytes(target));
  EXPECT_EQ(target[0], block[0]);
  EXPECT_EQ(target[32], block[32]);
  EXPECT_EQ(target[48], -1.0f) << "--init must not load optimizer state";
}

TEST_F(TrainingStateFile, RefusesWhatDoesNotFitThisProgram) {
  ModelSpec other = spec;
  other.name = "other";
  EXPECT_NE(loadError(other).find("of model 'ckpt', but this program trains model 'other'"),
            std::string::npos)
      << loadError(other);
  other = spec;
  other.fingerprint ^= 1;
  EXPECT_NE(loadError(other).find("another compiled program (fingerprint 1234abcd5678ef00"),
            std::string::npos)
      << loadError(other);
  // The same model compiled otherwise (its digest): resumed.
  other = spec;
  other.modelDigest = 0x77;
  saveTrainingState(path, other, bytes(block), someState());
  other.fingerprint ^= 1;
  EXPECT_EQ(loadError(other), "<no error>");
  other.modelDigest = 0x78;
  EXPECT_NE(loadError(other).find("of another model digest (0000000000000077, this one "
                                  "0000000000000078)"),
            std::string::npos)
      << loadError(other);
  saveTrainingState(path, spec, bytes(block), someState());
  other = spec;
  other.recipe.optimizer = OptimizerKind::AdamW;
  EXPECT_NE(loadError(other).find("trained with optimizer adam, but this program uses adamw"),
            std::string::npos);
  other.recipe.optimizer = OptimizerKind::SGD;
  other.numStates = 1;
  EXPECT_NE(loadError(other).find("optimizer adam"), std::string::npos);
  static const ParamSpec wider[] = {
      {"fc.weight", 2, {3, 5}, 15, 0, InitKind::Zeros, 0, 0, 5, 3, 192},
      {"fc.bias", 1, {3}, 3, 64, InitKind::Zeros, 0, 0, 4, 3, 320},
      {"scale", 0, {}, 1, 128, InitKind::Zeros, 0, 0, 1, 1, 352},
  };
  other = spec;
  other.params = wider;
  EXPECT_NE(loadError(other).find("tensor 'fc.weight' has shape [3, 4], expected [3, 5]"),
            std::string::npos)
      << loadError(other);
  other = spec;
  other.numParams = 2; // no "scale" in this program
  EXPECT_NE(loadError(other).find("tensor 'scale', which is not a parameter"), std::string::npos);
}

TEST_F(TrainingStateFile, RefusesOverlappingTensors) {
  const nlohmann::json weight = [&] {
    const std::string file = readFile(path);
    uint64_t n;
    std::memcpy(&n, file.data(), 8);
    return nlohmann::json::parse(file.substr(8, n))["fc.weight"]["data_offsets"];
  }();
  // The moment over the parameter's own bytes: the same size, the CRC of the
  // data unchanged.
  editHeader([&](nlohmann::json &h) { h["optimizer/fc.weight/exp_avg"]["data_offsets"] = weight; });
  const std::string e = loadError(spec);
  EXPECT_NE(e.find("is not a valid safetensors file: tensors "), std::string::npos) << e;
  EXPECT_NE(e.find("'optimizer/fc.weight/exp_avg' (data_offsets [0, 48])"), std::string::npos)
      << e;
  EXPECT_NE(e.find("overlap in the data section"), std::string::npos) << e;
}

TEST_F(TrainingStateFile, RefusesDamagedAndIncompleteFiles) {
  std::string good = readFile(path);
  std::string flipped = good;
  flipped[flipped.size() - 5] ^= 0x10;
  writeFile(path, flipped);
  EXPECT_NE(loadError(spec).find("is damaged: its tensor data has CRC-32"), std::string::npos)
      << loadError(spec);
  writeFile(path, good);
  editHeader([](nlohmann::json &h) { h.erase("optimizer/fc.bias/exp_avg"); });
  EXPECT_NE(loadError(spec).find("no optimizer state tensor 'optimizer/fc.bias/exp_avg'"),
            std::string::npos);
  writeFile(path, good);
  editHeader([](nlohmann::json &h) { h["__metadata__"]["dtc.step"] = "-3"; });
  EXPECT_NE(loadError(spec).find("out of range"), std::string::npos) << loadError(spec);
  writeFile(path, good);
  editHeader([](nlohmann::json &h) { h["__metadata__"].erase("dtc.epoch_samples"); });
  EXPECT_NE(loadError(spec).find("no 'dtc.epoch_samples' in its metadata"), std::string::npos);
  writeFile(path, good);
  editHeader([](nlohmann::json &h) { h["__metadata__"]["dtc.lr"] = "inf"; });
  EXPECT_NE(loadError(spec).find("not a learning rate"), std::string::npos);
  // A parameters file is not a training state.
  saveCheckpoint(path, spec, bytes(block));
  EXPECT_NE(loadError(spec).find("holds parameters only"), std::string::npos);
}

//===--- files written safely --------------------------------------------------===//

TEST(AtomicFileTest, APlantedSymlinkIsNeverWrittenThrough) {
  TempDir dir;
  const std::string victim = dir.file("victim"), target = dir.file("ck.safetensors");
  writeFile(victim, "precious");
  // Where the old writer put its temporary file, and the target itself.
  ASSERT_EQ(::symlink(victim.c_str(), (target + ".tmp").c_str()), 0);
  ModelSpec spec = makeSpec();
  std::vector<float> params = filled(64, 1.0f);
  saveCheckpoint(target, spec, bytes(params));
  EXPECT_EQ(readFile(victim), "precious");
  // A symlink at the target itself: the file it names is replaced (files.h;
  // files_test.cpp refuses a link of another user), never written through.
  const std::string link = dir.file("link.safetensors");
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  struct stat before;
  ASSERT_EQ(::stat(victim.c_str(), &before), 0);
  saveCheckpoint(link, spec, bytes(params));
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the symlink should stay";
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_NE(st.st_ino, before.st_ino) << "the file should be replaced, not written through";
  EXPECT_EQ(readFile(victim), readFile(target));
}

TEST(AtomicFileTest, UncommittedLeavesTheTargetAndNoTemporary) {
  TempDir dir;
  const std::string target = dir.file("out.csv");
  writeFile(target, "old");
  {
    AtomicFile f(target, "metrics file");
    f.write("new");
  } // an error: never committed
  EXPECT_EQ(readFile(target), "old");
  EXPECT_EQ(dtc::test::listDir(dir.path()), std::vector<std::string>{"out.csv"});
  {
    AtomicFile f(target, "metrics file");
    f.write("new");
    f.commit(dir.file("also.csv"));
  }
  EXPECT_EQ(readFile(target), "new");
  EXPECT_EQ(readFile(dir.file("also.csv")), "new");
  EXPECT_EQ(dtc::test::listDir(dir.path()), (std::vector<std::string>{"also.csv", "out.csv"}));
}

TEST(AtomicFileTest, CheckWritableNamesTheProblemBeforeAnyWork) {
  TempDir dir;
  std::string e = errorOf([&] { checkWritable(dir.file("no/such/x.st"), "checkpoint"); });
  EXPECT_NE(e.find("cannot write checkpoint '" + dir.file("no/such/x.st") +
                   "': No such file or directory"),
            std::string::npos)
      << e;
  e = errorOf([&] { checkWritable(dir.path(), "metrics file"); });
  EXPECT_NE(e.find("Is a directory"), std::string::npos) << e;
  EXPECT_EQ(errorOf([&] { checkWritable(dir.file("fine.st"), "checkpoint"); }), "<no error>");
  EXPECT_TRUE(dtc::test::listDir(dir.path()).empty()) << "the probe must leave nothing behind";
}

TEST(AtomicFileTest, NonRegularFilesAreRefusedNotRead) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ModelSpec spec = makeSpec();
  std::vector<float> target(64, 0.0f);
  // Without the check this would block forever on the FIFO.
  std::string e = errorOf([&] { loadCheckpoint(fifo, spec, bytes(target)); });
  EXPECT_NE(e.find("is not a regular file"), std::string::npos) << e;
  e = errorOf([&] { loadCheckpoint("/dev/zero", spec, bytes(target)); });
  EXPECT_NE(e.find("is not a regular file"), std::string::npos) << e;
}

} // namespace
