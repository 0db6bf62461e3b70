//===- predict.cpp - train --predict: a trained model on new inputs -------===//
#include "train/predict.h"

#include "support/error.h"
#include "train/executor.h"
#include "support/files.h"
#include "train/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <fcntl.h>
#include <unistd.h>

namespace dtc::rt {
namespace {

bool endsWith(const std::string &s, const char *suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// A NumPy .npy file (format versions 1 to 3): C-order float32, float64 or
// uint8 (scaled by 1/255), [N, ...] with the product of the rest the
// features.
Dataset readNpy(const std::string &path, int64_t features) {
  const std::string file = readWholeFile(path, "input file");
  auto bad = [&](const std::string &why) {
    return Error(fmt::format("input file '{}' is not a NumPy array this reads: {}", path, why));
  };
  if (file.size() < 10 || file.compare(0, 6, "\x93NUMPY") != 0)
    throw bad("no .npy magic");
  const int major = (unsigned char)file[6];
  size_t at = 8, headerLen = 0;
  if (major == 1) {
    headerLen = size_t((unsigned char)file[8]) | size_t((unsigned char)file[9]) << 8;
    at = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12)
      throw bad("truncated header");
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t((unsigned char)file[8 + i]) << (8 * i);
    at = 12;
  } else {
    throw bad(fmt::format("format version {}", major));
  }
  if (at + headerLen > file.size())
    throw bad("truncated header");
  const std::string header = file.substr(at, headerLen);
  const size_t data = at + headerLen;
  auto field = [&](const char *key) -> std::string {
    const size_t k = header.find(std::string("'") + key + "'");
    if (k == std::string::npos)
      throw bad(fmt::format("no '{}' in its header", key));
    size_t v = header.find(':', k);
    if (v == std::string::npos)
      throw bad("a malformed header");
    ++v;
    while (v < header.size() && header[v] == ' ')
      ++v;
    size_t end = v;
    if (header[v] == '(') {
      end = header.find(')', v);
      if (end == std::string::npos)
        throw bad("a malformed shape");
      return header.substr(v + 1, end - v - 1);
    }
    while (end < header.size() && header[end] != ',' && header[end] != '}')
      ++end;
    return header.substr(v, end - v);
  };
  const std::string descr = field("descr"), fortran = field("fortran_order"),
                    shape = field("shape");
  if (fortran.find("False") == std::string::npos)
    throw bad("Fortran order (save it with np.ascontiguousarray)");
  int elem = 0; // bytes per element
  if (descr == "'<f4'")
    elem = 4;
  else if (descr == "'<f8'")
    elem = 8;
  else if (descr == "'|u1'" || descr == "'u1'")
    elem = 1;
  else
    throw bad(fmt::format("element type {} (float32, float64 or uint8)", descr));
  std::vector<int64_t> dims;
  for (size_t p = 0; p < shape.size();) {
    while (p < shape.size() && (shape[p] == ' ' || shape[p] == ','))
      ++p;
    if (p >= shape.size())
      break;
    char *end = nullptr;
    errno = 0;
    const long long d = std::strtoll(shape.c_str() + p, &end, 10);
    if (end == shape.c_str() + p || d < 0)
      throw bad("a malformed shape");
    if (errno == ERANGE)
      throw bad(fmt::format("an implausible shape ({}): a dimension past 2^63", shape));
    dims.push_back(d);
    p = size_t(end - shape.c_str());
  }
  if (dims.empty())
    throw bad("a scalar, not an array of samples");
  int64_t per = 1;
  for (size_t i = 1; i < dims.size(); ++i)
    if (__builtin_mul_overflow(per, dims[i], &per))
      throw bad(fmt::format("an implausible shape ({}): its size overflows 64 bits", shape));
  if (per != features)
    throw Error(fmt::format("input file '{}' has {} features per sample but the model takes {}",
                            path, per, features));
  // The byte count overflow-checked: a shape of 2^62 samples must not wrap
  // to a size the file seems to hold.
  const int64_t n = dims[0];
  int64_t values = 0, bytes = 0;
  if (__builtin_mul_overflow(n, per, &values) || __builtin_mul_overflow(values, elem, &bytes))
    throw bad(fmt::format("an implausible shape ({}): its size overflows 64 bits", shape));
  if (uint64_t(file.size() - data) < uint64_t(bytes))
    throw Error(fmt::format("input file '{}' is truncated (while reading its {} samples)", path,
                            n));
  Dataset ds;
  ds.source = path;
  ds.size = n;
  ds.features = features;
  Features::Vector &x = ds.x.build();
  x.resize(size_t(values));
  const char *src = file.data() + data;
  // Finite values only, as in CSV input: a NaN or an infinity (or a float64
  // past the float range) would come out as an ordinary-looking prediction.
  auto notFinite = [&](int64_t i, const std::string &value, const char *what) {
    return Error(fmt::format("input file '{}' sample {} feature {} (element {}, counted from "
                             "0): '{}' is {}",
                             path, i / per, i % per, i, value, what));
  };
  for (int64_t i = 0; i < values; ++i) {
    if (elem == 4) {
      float v;
      std::memcpy(&v, src + 4 * i, 4);
      if (!std::isfinite(v))
        throw notFinite(i, fmt::format("{}", v), "not a finite number");
      x[size_t(i)] = v;
    } else if (elem == 8) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      if (!std::isfinite(v))
        throw notFinite(i, fmt::format("{}", v), "not a finite number");
      if (!std::isfinite(float(v)))
        throw notFinite(i, fmt::format("{}", v), "outside the float range");
      x[size_t(i)] = float(v);
    } else {
      x[size_t(i)] = float((unsigned char)src[i]) * (1.0f / 255.0f);
    }
  }
  return ds;
}

// An IDX file (its magic 00 00 type rank), or gzipped: readIdx refuses
// the element types other than unsigned bytes (08) by name.
bool isIdx(const std::string &path) {
  if (endsWith(path, ".gz"))
    return true;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false; // the reader names the problem
  unsigned char head[4] = {1, 1, 1, 1};
  const bool read4 = ::read(fd, head, 4) == 4;
  ::close(fd);
  const bool idxType = head[2] == 0x08 || head[2] == 0x09 || (head[2] >= 0x0B && head[2] <= 0x0E);
  return read4 && head[0] == 0 && head[1] == 0 && idxType && head[3] >= 1 && head[3] <= 4;
}

} // namespace

Dataset readPredictInputs(const std::string &path, const ModelSpec &spec) {
  if (spec.inputType == ElementType::I32)
    throw Error(fmt::format("--predict reads features (IDX, .npy, CSV), but model '{}' takes "
                            "token ids",
                            spec.name));
  Dataset ds;
  if (endsWith(path, ".npy")) {
    ds = readNpy(path, spec.inputNumel);
  } else if (isIdx(path)) {
    ds = readIdx(path, "");
    if (ds.features != spec.inputNumel)
      throw Error(fmt::format("input file '{}' has {} features per sample but the model "
                              "takes {}",
                              path, ds.features, spec.inputNumel));
  } else {
    ds = readCsv(path, LabelKind::Value, 0, spec.inputNumel);
  }
  if (ds.size == 0)
    throw Error(fmt::format("input file '{}' holds no sample", path));
  ds.labelKind = spec.labelKind;
  ds.labelWidth = spec.labelKind == LabelKind::Class ? 1 : spec.labelNumel;
  ds.yClass.assign(spec.labelKind == LabelKind::Class ? size_t(ds.size) : 0, 0);
  ds.yValue.assign(spec.labelKind == LabelKind::Value ? size_t(ds.size * ds.labelWidth) : 0,
                   0.0f);
  return ds;
}

void runPredict(Session &s, Executor &exec, const std::string &output) {
  const ModelSpec &spec = s.spec;
  const int64_t k = spec.predictWidth;
  if (k <= 0)
    throw Error(fmt::format("model '{}' has no prediction to write: --predict needs a "
                            "cross_entropy or an mse over [batch, k]",
                            spec.name));
  const bool classes = spec.labelKind == LabelKind::Class;
  if (classes && spec.labelNumel != 1)
    throw Error(fmt::format("model '{}' predicts {} classes per sample, not one: --predict "
                            "writes one class per sample",
                            spec.name, spec.labelNumel));
  const Dataset &ds = s.data.train;
  AtomicFile out(output, "the predictions");
  std::string header = classes ? "class" : "";
  for (int64_t j = 0; j < k; ++j)
    header += fmt::format("{}{}{}", j || classes ? "," : "", classes ? "p" : "y", j);
  out.write(header + "\n");
  const int64_t batch = s.opts.batch;
  std::vector<float> rows(static_cast<size_t>(batch * k));
  std::vector<int64_t> idx(static_cast<size_t>(batch));
  std::vector<double> p(static_cast<size_t>(k));
  std::string text;
  for (int64_t b = 0; b < ds.size; b += batch) {
    const int64_t n = std::min(batch, ds.size - b);
    std::iota(idx.begin(), idx.begin() + n, b);
    const int staged = exec.stage(ds, idx.data(), n);
    s.args.predictions = rows.data();
    exec.eval(staged, 0);
    s.args.predictions = nullptr;
    text.clear();
    for (int64_t i = 0; i < n; ++i) {
      const float *r = rows.data() + i * k;
      if (classes) {
        // Softmax in double, shifted by the maximum (the first arg-max is
        // the class, as accuracy counts it).
        int64_t best = 0;
        for (int64_t j = 1; j < k; ++j)
          if (r[j] > r[best])
            best = j;
        double sum = 0;
        for (int64_t j = 0; j < k; ++j)
          sum += p[size_t(j)] = std::exp(double(r[j]) - double(r[best]));
        text += fmt::format("{}", best);
        for (int64_t j = 0; j < k; ++j)
          text += fmt::format(",{:.9g}", p[size_t(j)] / sum);
      } else {
        for (int64_t j = 0; j < k; ++j)
          text += fmt::format("{}{:.9g}", j ? "," : "", r[j]);
      }
      text += '\n';
    }
    out.write(text);
  }
  out.commit();
}

} // namespace dtc::rt
