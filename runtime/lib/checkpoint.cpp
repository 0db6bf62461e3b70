//===- checkpoint.cpp - Parameters to and from safetensors files ---------===//
#include "checkpoint.h"

#include "atomic_file.h"
#include "error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace dtc::rt {
namespace {

std::vector<int64_t> shapeOf(const ParamSpec &p) {
  return std::vector<int64_t>(p.shape, p.shape + p.rank);
}

std::string readWholeFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(fmt::format("cannot open checkpoint '{}': {}", path, std::strerror(errno)));
  std::string data;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error(fmt::format("cannot read checkpoint '{}': {}", path, std::strerror(err)));
    }
    if (n == 0)
      break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
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

} // namespace

void saveCheckpoint(const std::string &path, const ModelSpec &spec,
                    const char *persistent) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  int64_t offset = 0;
  for (int32_t i = 0; i < spec.numParams; ++i) {
    const ParamSpec &p = spec.params[i];
    if (header.contains(p.name) || std::string(p.name) == "__metadata__")
      throw Error(fmt::format("cannot save checkpoint '{}': duplicate tensor name '{}'",
                              path, p.name));
    const int64_t bytes = p.numel * int64_t(sizeof(float));
    header[p.name] = {{"dtype", "F32"},
                      {"shape", shapeOf(p)},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));

  AtomicFile out(path, "checkpoint");
  out.write(len, sizeof len);
  out.write(text.data(), text.size());
  for (int32_t i = 0; i < spec.numParams; ++i) {
    const ParamSpec &p = spec.params[i];
    out.write(persistent + p.offset, static_cast<size_t>(p.numel) * sizeof(float));
  }
  out.commit();
}

void loadCheckpoint(const std::string &path, const ModelSpec &spec, char *persistent) {
  const std::string file = readWholeFile(path);
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
  const uint64_t dataSize = file.size() - 8 - headerLen;
  const char *data = file.data() + 8 + headerLen;
  nlohmann::json header =
      nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + headerLen, nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    throw corrupt("the header is not a JSON object");

  std::unordered_map<std::string, int32_t> byName;
  for (int32_t i = 0; i < spec.numParams; ++i)
    byName.emplace(spec.params[i].name, i);

  // Validate everything first, then copy: all or nothing.
  std::vector<const char *> sources(static_cast<size_t>(spec.numParams), nullptr);
  for (const auto &[name, entry] : header.items()) {
    if (name == "__metadata__")
      continue;
    auto it = byName.find(name);
    if (it == byName.end())
      throw Error(fmt::format("checkpoint '{}' has tensor '{}', which is not a parameter "
                              "of model '{}'",
                              path, name, spec.name));
    const ParamSpec &p = spec.params[it->second];
    std::vector<int64_t> shape, range;
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !toIndices(entry["shape"], shape) ||
        !entry.contains("data_offsets") || !toIndices(entry["data_offsets"], range) ||
        range.size() != 2)
      throw corrupt(fmt::format("malformed entry for tensor '{}'", name));
    const std::string dtype = entry["dtype"].get<std::string>();
    if (dtype != "F32")
      throw Error(fmt::format("checkpoint '{}': tensor '{}' has dtype {}, expected F32",
                              path, name, dtype));
    if (shape != shapeOf(p))
      throw Error(fmt::format("checkpoint '{}': tensor '{}' has shape [{}], expected [{}]",
                              path, name, fmt::join(shape, ", "),
                              fmt::join(shapeOf(p), ", ")));
    const uint64_t begin = static_cast<uint64_t>(range[0]), end = static_cast<uint64_t>(range[1]);
    if (begin > end || end > dataSize ||
        end - begin != static_cast<uint64_t>(p.numel) * sizeof(float))
      throw corrupt(fmt::format("data_offsets [{}, {}] of tensor '{}' do not fit {} bytes "
                                "of data (truncated?)",
                                begin, end, name, dataSize));
    sources[static_cast<size_t>(it->second)] = data + begin;
  }
  for (int32_t i = 0; i < spec.numParams; ++i)
    if (!sources[static_cast<size_t>(i)])
      throw Error(fmt::format("checkpoint '{}' has no tensor '{}'", path, spec.params[i].name));
  for (int32_t i = 0; i < spec.numParams; ++i) {
    const ParamSpec &p = spec.params[i];
    std::memcpy(persistent + p.offset, sources[static_cast<size_t>(i)],
                static_cast<size_t>(p.numel) * sizeof(float));
  }
}

} // namespace dtc::rt
