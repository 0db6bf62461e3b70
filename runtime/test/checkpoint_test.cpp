//===- checkpoint_test.cpp - safetensors save/load and rejection ---------===//
#include "checkpoint.h"
#include "error.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <functional>
#include <vector>

using namespace dtc::rt;
using dtc::test::readFile;
using dtc::test::TempDir;
using dtc::test::writeFile;

namespace {

// fc.weight [3,4] at 0, fc.bias [3] at 64 (a gap), scale [] at 128; the
// persistent block also holds 64 bytes of "optimizer state" after 192.
const ParamSpec kParams[] = {
    {"fc.weight", 2, {3, 4}, 12, 0, InitKind::Zeros, 0, 0, 4, 3},
    {"fc.bias", 1, {3}, 3, 64, InitKind::Zeros, 0, 0, 4, 3},
    {"scale", 0, {}, 1, 128, InitKind::Zeros, 0, 0, 1, 1},
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
  void editHeader(const std::function<void(nlohmann::json &)> &f) {
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
  EXPECT_FALSE(std::ifstream(path + ".tmp").good()) << "temporary file left behind";
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

TEST_F(Checkpoint, MissingFilesAndUnwritableTargets) {
  path = dir.file("absent.safetensors");
  EXPECT_NE(loadError().find("cannot open checkpoint '" + path + "': No such file"),
            std::string::npos);
  std::string bad = dir.file("no/such/dir/x.safetensors");
  std::string e = errorOf([&] { saveCheckpoint(bad, spec, bytes(saved)); });
  EXPECT_NE(e.find("cannot write checkpoint '" + bad + "'"), std::string::npos) << e;
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
assert header.pop('__metadata__') == {'format': 'pt'}
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

} // namespace
