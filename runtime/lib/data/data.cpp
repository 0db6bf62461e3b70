//===- data.cpp - IDX, CSV and synthetic data set readers ----------------===//
#include "data/data.h"

#include "data/data_cache.h"

#include "support/error.h"
#include "support/files.h"
#include "support/rng.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <libdeflate.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <new>
#include <filesystem>
#include <optional>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

namespace dtc::rt {

void *allocateLarge(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  void *p = nullptr;
  if (bytes >= 2 * kHuge) {
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    p = std::aligned_alloc(kHuge, rounded);
    if (p)
      ::madvise(p, rounded, MADV_HUGEPAGE); // a hint: failure changes nothing
  } else {
    p = std::malloc(bytes ? bytes : 1);
  }
  if (!p)
    throw std::bad_alloc();
  return p;
}

void freeLarge(void *p) noexcept { std::free(p); }

namespace {

[[noreturn]] void cannotOpen(const std::string &path, int err) {
  throw Error(fmt::format("cannot open dataset file '{}': {}", path, std::strerror(err)));
}

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

//===--- IDX ---------------------------------------------------------------===//

// A gzip (or raw) file, decoded whole into memory with libdeflate (the
// training images of Fashion-MNIST in 0.08 s, zlib's inflate 0.19 s), then
// read sequentially; errors name the file.
class GzReader {
public:
  explicit GzReader(const std::string &path) : path_(path) {
    std::string file = readWholeFile(path, "dataset file");
    const auto *in = reinterpret_cast<const unsigned char *>(file.data());
    if (file.size() < 2 || in[0] != 0x1f || in[1] != 0x8b) {
      data_ = std::move(file); // not gzip: the raw file
      return;
    }
    // One or more gzip members, each ending with its size mod 2^32.
    libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d)
      throw std::bad_alloc();
    size_t at = 0;
    while (at < file.size()) {
      const size_t left = file.size() - at;
      if (left < 18) { // the smallest gzip member
        libdeflate_free_decompressor(d);
        throw Error(fmt::format("dataset file '{}' is truncated (while reading the gzip "
                                "stream)",
                                path_));
      }
      // The member's size from the file's last 4 bytes (exact for a file of
      // one member, as IDX files are); more is found by growing.
      const unsigned char *t = in + file.size() - 4;
      size_t guess = size_t(t[0]) | size_t(t[1]) << 8 | size_t(t[2]) << 16 | size_t(t[3]) << 24;
      // Deflate expands at most ~1032x: a larger claim is a corrupt trailer.
      guess = std::min(guess + 1, left * 1032 + 64);
      const size_t base = data_.size();
      for (;;) {
        data_.resize(base + guess);
        size_t used = 0, out = 0;
        const libdeflate_result r = libdeflate_gzip_decompress_ex(
            d, in + at, left, data_.data() + base, guess, &used, &out);
        if (r == LIBDEFLATE_SUCCESS) {
          data_.resize(base + out);
          at += used;
          break;
        }
        if (r != LIBDEFLATE_INSUFFICIENT_SPACE || guess >= left * 1032 + 64) {
          libdeflate_free_decompressor(d);
          throw Error(fmt::format("dataset file '{}' is {}", path_,
                                  r == LIBDEFLATE_INSUFFICIENT_SPACE
                                      ? "corrupt: it claims more data than gzip can hold"
                                      : "corrupt or truncated: not a valid gzip stream"));
        }
        guess = std::min(guess * 2, left * 1032 + 64);
      }
    }
    libdeflate_free_decompressor(d);
  }
  GzReader(const GzReader &) = delete;
  GzReader &operator=(const GzReader &) = delete;

  // Reads exactly n bytes; `what` describes them for the truncation message.
  void read(void *dst, size_t n, const char *what) {
    std::memcpy(dst, view(n, what), n);
  }
  // The next n bytes, in place.
  const unsigned char *view(size_t n, const char *what) {
    if (n > data_.size() - pos_)
      throw Error(fmt::format("dataset file '{}' is truncated (while reading {})", path_,
                              what));
    const auto *p = reinterpret_cast<const unsigned char *>(data_.data()) + pos_;
    pos_ += n;
    return p;
  }

private:
  std::string path_, data_;
  size_t pos_ = 0;
};

uint32_t readBigEndian32(GzReader &r, const char *what) {
  unsigned char b[4];
  r.read(b, 4, what);
  return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
}

// The element types of IDX files (the third byte of the magic).
const char *idxTypeName(unsigned type) {
  switch (type) {
  case 0x08:
    return "unsigned byte";
  case 0x09:
    return "signed byte";
  case 0x0B:
    return "int16";
  case 0x0C:
    return "int32";
  case 0x0D:
    return "float32";
  case 0x0E:
    return "float64";
  }
  return nullptr;
}

// Reads an IDX header; returns the dimensions. Only unsigned-byte data.
std::vector<int64_t> readIdxHeader(GzReader &r, const std::string &path) {
  uint32_t magic = readBigEndian32(r, "the header");
  uint32_t rank = magic & 0xff, type = (magic >> 8) & 0xff;
  if ((magic >> 16) != 0 || rank == 0 || rank > 4)
    throw Error(fmt::format("dataset file '{}' is not an IDX file (bad magic 0x{:08x})",
                            path, magic));
  if (type != 0x08)
    throw Error(fmt::format("dataset file '{}': unsupported IDX element type 0x{:02x}{} "
                            "(only unsigned bytes, 0x08)",
                            path, type,
                            idxTypeName(type) ? fmt::format(", {}", idxTypeName(type)) : ""));
  std::vector<int64_t> dims(rank);
  for (auto &d : dims)
    d = readBigEndian32(r, "the header");
  return dims;
}

//===--- CSV ---------------------------------------------------------------===//

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A CSV cell as a float: optional surrounding double quotes, a leading '+';
// finite values only.
enum class Cell { Number, NotNumber, OutOfRange, NotFinite };
Cell parseCell(std::string_view s, float &out) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"')
    s = trim(s.substr(1, s.size() - 2));
  if (!s.empty() && s.front() == '+')
    s.remove_prefix(1);
  if (s.empty())
    return Cell::NotNumber;
  auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  if (res.ec == std::errc::result_out_of_range && res.ptr == s.data() + s.size())
    return Cell::OutOfRange;
  if (res.ec != std::errc() || res.ptr != s.data() + s.size())
    return Cell::NotNumber;
  return std::isfinite(out) ? Cell::Number : Cell::NotFinite;
}

// Splits at commas outside double quotes (RFC 4180 quoting).
void splitCsv(std::string_view line, std::vector<std::string_view> &cells) {
  cells.clear();
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i < line.size() && line[i] == '"')
      quoted = !quoted;
    else if (i == line.size() || (line[i] == ',' && !quoted)) {
      cells.push_back(line.substr(start, i - start));
      start = i + 1;
    }
  }
}

} // namespace

std::string idxFile(const std::string &dir, const std::string &name) {
  std::string gz = dir + "/" + name + ".gz", raw = dir + "/" + name;
  return fileExists(gz) || !fileExists(raw) ? gz : raw;
}

Dataset readIdx(const std::string &imagesPath, const std::string &labelsPath) {
  Dataset ds;
  ds.source = imagesPath;
  ds.labelKind = LabelKind::Class;
  ds.labelWidth = 1;

  GzReader images(imagesPath);
  std::vector<int64_t> dims = readIdxHeader(images, imagesPath);
  ds.size = dims[0];
  ds.features = 1;
  // Each dimension < 2^32 and the product checked: a corrupt header cannot
  // overflow the sizes computed from it.
  int64_t total = ds.size;
  bool overflow = false;
  for (size_t i = 1; i < dims.size(); ++i) {
    overflow |= __builtin_mul_overflow(ds.features, dims[i], &ds.features);
    overflow |= __builtin_mul_overflow(total, dims[i], &total);
  }
  if (overflow || total > (int64_t(1) << 40))
    throw Error(fmt::format("dataset file '{}' has an implausible size ({} samples of [{}])",
                            imagesPath, ds.size,
                            fmt::join(dims.begin() + 1, dims.end(), ", ")));
  if (ds.features == 0)
    throw Error(fmt::format("dataset file '{}' has samples of no pixels", imagesPath));

  std::optional<GzReader> labels;
  if (!labelsPath.empty()) {
    labels.emplace(labelsPath);
    std::vector<int64_t> ldims = readIdxHeader(*labels, labelsPath);
    if (ldims.size() != 1)
      throw Error(fmt::format("dataset file '{}' is not an IDX label file (rank {}, expected 1)",
                              labelsPath, ldims.size()));
    if (ldims[0] != ds.size)
      throw Error(fmt::format("dataset files '{}' and '{}' disagree: {} images but {} labels",
                              imagesPath, labelsPath, ds.size, ldims[0]));
  }

  // The whole file is in memory: a header that claims more than it holds
  // fails here, before anything of the claimed size is allocated.
  const size_t pixels = static_cast<size_t>(total);
  const unsigned char *src = images.view(pixels, "the pixels");
  const unsigned char *lab =
      labels ? labels->view(static_cast<size_t>(ds.size), "the labels") : nullptr;
  Features::Vector &x = ds.x.build();
  x.resize(pixels);
  float *dst = x.data();
  for (size_t i = 0; i < pixels; ++i)
    dst[i] = float(src[i]) * (1.0f / 255.0f);
  if (lab)
    ds.yClass.assign(lab, lab + ds.size);
  return ds;
}

Dataset readCsv(const std::string &path, LabelKind kind, int64_t labelWidth,
                int64_t features) {
  const int fd = openForReading(path, "dataset file");
  std::FILE *in = ::fdopen(fd, "r");
  if (!in) {
    ::close(fd);
    cannotOpen(path, errno);
  }
  Dataset ds;
  ds.source = path;
  ds.labelKind = kind;
  ds.labelWidth = kind == LabelKind::Class ? 1 : labelWidth;
  ds.features = features;
  Features::Vector &x = ds.x.build();
  const size_t columns = static_cast<size_t>(ds.labelWidth + features);
  auto fail = [&](int64_t lineNo, const std::string &what) {
    std::fclose(in);
    return Error(fmt::format("dataset file '{}' line {}: {}", path, lineNo, what));
  };

  char *buf = nullptr;
  size_t cap = 0;
  std::vector<std::string_view> cells;
  bool first = true;
  int64_t lineNo = 0;
  for (ssize_t len; (len = ::getline(&buf, &cap, in)) >= 0;) {
    ++lineNo;
    std::string_view line(buf, size_t(len));
    if (lineNo == 1 && line.substr(0, 3) == "\xEF\xBB\xBF")
      line.remove_prefix(3); // a UTF-8 byte order mark
    // A binary file is named as one, not by the numbers it lacks.
    if (lineNo == 1 && line.size() >= 4 && line[0] == 0 && line[1] == 0 &&
        idxTypeName((unsigned char)line[2]) && line[3] >= 1 && line[3] <= 4) {
      const unsigned type = (unsigned char)line[2];
      std::free(buf);
      std::fclose(in);
      throw Error(fmt::format("dataset file '{}' is an IDX file ({} elements, type 0x{:02x}), "
                              "not CSV{}",
                              path, idxTypeName(type), type,
                              type == 0x08 ? "; --data takes the directory of the IDX files"
                                           : "; IDX data are read as unsigned bytes (0x08) only"));
    }
    if (const size_t nul = line.find('\0'); nul != std::string_view::npos) {
      std::free(buf);
      throw fail(lineNo, fmt::format("a NUL byte (at byte {} of the line): a binary file, not "
                                     "CSV",
                                     nul));
    }
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
      line.remove_suffix(1);
    if (trim(line).empty())
      continue;
    splitCsv(line, cells);
    float v;
    if (first) {
      first = false;
      // A header names the columns: no cell of it is a number.
      bool anyNumber = false;
      for (std::string_view c : cells)
        anyNumber |= parseCell(c, v) != Cell::NotNumber;
      if (!anyNumber)
        continue;
    }
    if (cells.size() != columns) {
      const int64_t found = static_cast<int64_t>(cells.size()) - ds.labelWidth;
      std::free(buf);
      throw fail(lineNo, fmt::format("{} features per sample (after {} label column{}) but "
                                     "the model takes {}",
                                     std::max<int64_t>(found, 0), ds.labelWidth,
                                     ds.labelWidth == 1 ? "" : "s", features));
    }
    for (size_t c = 0; c < columns; ++c) {
      const Cell kindOf = parseCell(cells[c], v);
      if (kindOf != Cell::Number) {
        const std::string cell(trim(cells[c]));
        std::free(buf);
        throw fail(lineNo, fmt::format("column {}: '{}' is {}", c + 1, cell,
                                       kindOf == Cell::OutOfRange ? "outside the float range"
                                       : kindOf == Cell::NotFinite ? "not a finite number"
                                                                   : "not a number"));
      }
      if (c >= static_cast<size_t>(ds.labelWidth))
        x.push_back(v);
      else if (kind == LabelKind::Value)
        ds.yValue.push_back(v);
      else if (v != std::floor(v) || std::fabs(v) > 1e9f) {
        const std::string cell(trim(cells[c]));
        std::free(buf);
        throw fail(lineNo, fmt::format("class label '{}' is not an integer", cell));
      } else
        ds.yClass.push_back(static_cast<int32_t>(v));
    }
    ds.lines.push_back(lineNo);
    ++ds.size;
  }
  std::free(buf);
  const bool bad = std::ferror(in);
  const int err = errno;
  std::fclose(in);
  if (bad)
    throw Error(fmt::format("error reading dataset file '{}': {}", path, std::strerror(err)));
  return ds;
}

//===--- Text --------------------------------------------------------------===//

int64_t TokenText::windowStart(int64_t i, uint64_t draw) const {
  if (draw == 0)
    return begin + i * window;
  // One of the end - begin - window starts whose window and labels fit.
  const uint64_t starts = uint64_t(end - begin - window);
  return begin + int64_t(mixSeed(draw, uint64_t(i)) % starts);
}

std::string TokenText::where(int64_t t) const {
  const File *f = nullptr;
  for (const File &file : *files)
    if (file.begin <= t)
      f = &file;
  if (!f)
    return fmt::format("byte {}", t);
  return fmt::format("{}: byte {}", f->path, t - f->begin);
}

uint64_t windowDraw(uint64_t seed, int64_t epoch) {
  return mixSeed(mixSeed(seed, 0x77696e646f7773ULL), uint64_t(epoch)) | 1;
}

Dataset readText(const std::string &path, int64_t window, std::vector<std::string> *notes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec)
    cannotOpen(path, ec.value());
  auto bytes = std::make_shared<std::string>();
  auto files = std::make_shared<std::vector<TokenText::File>>();
  if (fs::is_directory(st)) {
    // Every regular file under it, in the order of their paths.
    std::vector<std::string> paths;
    int64_t links = 0;
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->is_symlink(ec))
        ++links;
      else if (it->is_regular_file(ec))
        paths.push_back(it->path().string());
    }
    if (ec)
      throw Error(fmt::format("cannot read the text directory '{}': {}", path, ec.message()));
    std::sort(paths.begin(), paths.end());
    std::vector<std::string> binary;
    for (const std::string &p : paths) {
      std::string data = readWholeFile(p, "text file");
      if (data.find('\0') != std::string::npos) {
        binary.push_back(fs::path(p).filename().string());
        continue;
      }
      files->push_back({p, int64_t(bytes->size())});
      bytes->append(data);
    }
    if (notes && (!binary.empty() || links > 0))
      notes->push_back(fmt::format(
          "text '{}': read {} files; skipped {} binary files (with a NUL byte{}) and {} "
          "symbolic links",
          path, files->size(), binary.size(),
          binary.empty() ? "" : fmt::format(", as {}", binary.front()), links));
    if (files->empty())
      throw Error(fmt::format("the text directory '{}' has no text files", path));
  } else {
    // The rule of a directory's files: one with a NUL byte is binary. Given
    // alone it leaves nothing to train on.
    *bytes = readWholeFile(path, "text file");
    if (const size_t nul = bytes->find('\0'); nul != std::string::npos)
      throw Error(fmt::format("text file '{}' is binary (a NUL byte at byte {}): text data are "
                              "the bytes of text files, and a directory's binary files are "
                              "skipped",
                              path, nul));
    files->push_back({path, 0});
  }
  const int64_t n = int64_t(bytes->size());
  if (n < window + 1)
    throw Error(fmt::format("text '{}' has {} bytes, fewer than one window of {} tokens and "
                            "the label after its last ({})",
                            path, n, window, window + 1));
  Dataset ds;
  ds.source = path;
  ds.labelKind = LabelKind::Class;
  ds.features = window;
  ds.labelWidth = window;
  ds.text.bytes = std::move(bytes);
  ds.text.files = std::move(files);
  ds.text.begin = 0;
  ds.text.end = n;
  ds.text.window = window;
  ds.size = ds.text.windows();
  return ds;
}

Dataset makeSynthetic(const ModelSpec &spec, int64_t size, uint64_t seed,
                      uint64_t stream) {
  const bool isClass = spec.labelKind == LabelKind::Class;
  const int64_t F = spec.inputNumel;
  const int64_t outs = isClass ? spec.numClasses : spec.labelNumel;
  if (isClass && outs < 1)
    throw Error("synthetic data needs the model's number of classes (numClasses is 0)");

  Rng teacherRng(mixSeed(seed, 0x7eac4e5ULL)); // W [F, outs], b [outs]
  std::vector<double> W(static_cast<size_t>(F * outs)), bias(static_cast<size_t>(outs));
  const double scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(F, 1)));
  for (auto &w : W)
    w = teacherRng.normal() * scale;
  for (auto &b : bias)
    b = 0.1 * teacherRng.normal();

  int64_t floats = 0;
  if (__builtin_mul_overflow(size, std::max(F, outs), &floats) || floats > (int64_t(1) << 36))
    throw Error(fmt::format("synthetic data of {} samples x {} features is too large (at most "
                            "2^36 values)",
                            size, F));
  Dataset ds;
  ds.source = "synthetic";
  ds.size = size;
  ds.features = F;
  ds.labelKind = spec.labelKind;
  ds.labelWidth = isClass ? 1 : outs;
  Features::Vector &xs = ds.x.build();
  xs.resize(static_cast<size_t>(size * F));
  if (isClass)
    ds.yClass.resize(static_cast<size_t>(size));
  else
    ds.yValue.resize(static_cast<size_t>(size * outs));

  Rng rng(mixSeed(seed, 1000 + stream));
  std::vector<double> z(static_cast<size_t>(outs));
  for (int64_t s = 0; s < size; ++s) {
    float *x = &xs[static_cast<size_t>(s * F)];
    for (int64_t f = 0; f < F; ++f)
      x[f] = static_cast<float>(rng.normal());
    for (int64_t o = 0; o < outs; ++o) {
      double acc = bias[o];
      for (int64_t f = 0; f < F; ++f)
        acc += x[f] * W[f * outs + o];
      z[o] = acc;
    }
    if (isClass) {
      int64_t best = 0;
      for (int64_t o = 1; o < outs; ++o)
        if (z[o] > z[best])
          best = o;
      ds.yClass[s] = static_cast<int32_t>(best);
    } else {
      for (int64_t o = 0; o < outs; ++o)
        ds.yValue[s * outs + o] = static_cast<float>(z[o] + 0.01 * rng.normal());
    }
  }
  return ds;
}

namespace {
// Text: the window must be the input's length, every token an id of the
// model's embeddings and a class of its loss (a label equal to the ignore
// index aside); the first token that is not names its file and offset.
void checkText(const Dataset &ds, const ModelSpec &spec) {
  if (spec.inputType != ElementType::I32 || spec.inputRank != 1)
    throw Error(fmt::format("dataset '{}' is text, token ids [B, T], but model '{}' takes "
                            "{} features{}",
                            ds.source, spec.name,
                            spec.inputType == ElementType::I32 ? "i32" : "f32",
                            spec.inputType == ElementType::I32
                                ? fmt::format(" of rank {}", spec.inputRank + 1)
                                : ""));
  if (spec.labelKind != LabelKind::Class || spec.labelNumel != ds.features)
    throw Error(fmt::format("dataset '{}' is text: its labels are the next token of each "
                            "input token, i32[B, {}], but model '{}' expects {} labels",
                            ds.source, ds.features, spec.name,
                            spec.labelKind == LabelKind::Class
                                ? fmt::format("{} class", spec.labelNumel)
                                : std::string("value")));
  const auto *bytes = reinterpret_cast<const unsigned char *>(ds.text.bytes->data());
  const int64_t idLimit = spec.inputIdLimit > 0 ? spec.inputIdLimit : 256;
  const int64_t classes = spec.numClasses > 0 ? spec.numClasses : 256;
  if (idLimit >= 256 && classes >= 256)
    return;
  for (int64_t t = ds.text.begin; t < ds.text.end; ++t) {
    const int64_t v = bytes[t];
    if (t < ds.text.end - 1 && v >= idLimit)
      throw Error(fmt::format("text {}: token {} is outside the {} rows of the model's "
                              "embedding [0, {})",
                              ds.text.where(t), v, idLimit, idLimit));
    if (t > ds.text.begin && v >= classes && v != spec.ignoreIndex)
      throw Error(fmt::format("text {}: token {} (the label of the token before it) is "
                              "outside the model's {} classes [0, {})",
                              ds.text.where(t), v, classes, classes));
  }
}
} // namespace

void checkDataset(const Dataset &ds, const ModelSpec &spec) {
  if (ds.isText())
    return checkText(ds, spec);
  if (spec.inputType == ElementType::I32)
    throw Error(fmt::format("model '{}' takes i32 token ids: its data is text (the recipe's "
                            "text(\"PATH\") or --data text:PATH), not '{}'",
                            spec.name, ds.source));
  if (ds.features != spec.inputNumel)
    throw Error(fmt::format("dataset '{}' has {} features per sample but model '{}' takes {}",
                            ds.source, ds.features, spec.name, spec.inputNumel));
  if (ds.labelKind != spec.labelKind)
    throw Error(fmt::format("dataset '{}' has {} labels but model '{}' expects {} labels",
                            ds.source, ds.labelKind == LabelKind::Class ? "class" : "value",
                            spec.name, spec.labelKind == LabelKind::Class ? "class" : "value"));
  if (ds.labelWidth != spec.labelNumel)
    throw Error(fmt::format("dataset '{}' has {} label {} per sample but model '{}' "
                            "expects {}",
                            ds.source, ds.labelWidth,
                            spec.labelKind == LabelKind::Class ? "classes" : "values",
                            spec.name, spec.labelNumel));
  if (spec.labelKind == LabelKind::Class)
    for (int64_t i = 0; i < ds.size; ++i)
      if ((ds.yClass[i] < 0 || ds.yClass[i] >= spec.numClasses) &&
          ds.yClass[i] != spec.ignoreIndex)
        throw Error(fmt::format("dataset '{}' {}: label {} is outside the model's {} classes "
                                "[0, {})",
                                ds.source, ds.where(i), ds.yClass[i], spec.numClasses,
                                spec.numClasses));
}

std::string Dataset::where(int64_t i) const {
  if (isText())
    return fmt::format("window {} ({})", i, text.where(text.windowStart(i, 0)));
  if (size_t(i) < lines.size())
    return fmt::format("line {}", lines[size_t(i)]);
  return fmt::format("sample {}", i);
}

std::string DataSource::describe() const {
  switch (kind) {
  case DatasetKind::IDX:
    return dir;
  case DatasetKind::CSV:
    return testPath.empty() ? trainPath : trainPath + "," + testPath;
  case DatasetKind::Synthetic:
    return "synthetic";
  case DatasetKind::Text:
    return "text:" + trainPath;
  case DatasetKind::None:
    break;
  }
  return "none";
}

DataSplits loadData(const DataSource &src, const ModelSpec &spec) {
  DataSplits d;
  switch (src.kind) {
  case DatasetKind::IDX: {
    if (spec.labelKind != LabelKind::Class)
      throw Error(fmt::format("IDX dataset '{}' has class labels but model '{}' expects "
                              "value labels",
                              src.dir, spec.name));
    std::string note;
    d.train = readIdxCached(idxFile(src.dir, "train-images-idx3-ubyte"),
                            idxFile(src.dir, "train-labels-idx1-ubyte"), src.cacheDir, nullptr,
                            &note);
    if (!note.empty())
      d.notes.push_back(note);
    d.test = readIdxCached(idxFile(src.dir, "t10k-images-idx3-ubyte"),
                           idxFile(src.dir, "t10k-labels-idx1-ubyte"), src.cacheDir, nullptr,
                           &note);
    if (!note.empty() && (d.notes.empty() || d.notes.back() != note))
      d.notes.push_back(note);
    break;
  }
  case DatasetKind::CSV:
    d.train = readCsv(src.trainPath, spec.labelKind, spec.labelNumel, spec.inputNumel);
    if (!src.testPath.empty())
      d.test = readCsv(src.testPath, spec.labelKind, spec.labelNumel, spec.inputNumel);
    break;
  case DatasetKind::Synthetic:
    d.train = makeSynthetic(spec, src.trainSize, src.seed, 0);
    d.test = makeSynthetic(spec, src.testSize, src.seed, 1);
    break;
  case DatasetKind::Text:
    d.train = readText(src.trainPath, spec.inputNumel, &d.notes);
    break;
  case DatasetKind::None:
    throw Error(fmt::format("model '{}' has no dataset in its recipe; pass --data PATH",
                            spec.name));
  }
  if (d.train.size == 0)
    throw Error(fmt::format("dataset '{}' has no training samples", d.train.source));
  checkDataset(d.train, spec);
  if (d.test.size > 0)
    checkDataset(d.test, spec);
  if (src.validation > 0) {
    // The training set's last samples, as Keras' validation_split takes
    // them: the same whatever the seed, so a resumed run holds out the same.
    if (d.train.isText()) {
      // The end of the text; each part holds a window at least.
      const TokenText &t = d.train.text;
      const int64_t tokens = t.end - t.begin, w = t.window;
      const int64_t count = int64_t(std::floor(src.validation * double(tokens)));
      if (count < w + 1 || tokens - count < w + 1)
        throw Error(fmt::format("validation {} of the {} tokens of text '{}' holds out {} of "
                                "them; training and validation need one window of {} tokens "
                                "and its last label ({}) each",
                                src.validation, tokens, d.train.source, count, w, w + 1));
      d.validation = splitOffTail(
          d.train, count, fmt::format("the last {} tokens of {}", count, d.train.source));
      return d;
    }
    const int64_t count = int64_t(std::floor(src.validation * double(d.train.size)));
    if (count < 1 || count >= d.train.size)
      throw Error(fmt::format("validation {} of the {} training samples of '{}' holds out {} "
                              "of them; it must leave at least one for each of training "
                              "and validation",
                              src.validation, d.train.size, d.train.source, count));
    d.validation = splitOffTail(
        d.train, count, fmt::format("the last {} samples of {}", count, d.train.source));
  }
  return d;
}

Dataset splitOffTail(Dataset &ds, int64_t count, const std::string &source) {
  Dataset v;
  v.source = source;
  v.labelKind = ds.labelKind;
  v.labelWidth = ds.labelWidth;
  v.features = ds.features;
  if (ds.isText()) { // count tokens
    v.text = ds.text;
    v.text.begin = ds.text.end = ds.text.end - count;
    v.size = v.text.windows();
    ds.size = ds.text.windows();
    return v;
  }
  v.size = count;
  const int64_t keep = ds.size - count;
  v.x = ds.x.slice(size_t(keep * ds.features), size_t(ds.size * ds.features));
  ds.x.truncate(size_t(keep * ds.features));
  if (!ds.yClass.empty()) {
    v.yClass.assign(ds.yClass.begin() + keep, ds.yClass.end());
    ds.yClass.resize(size_t(keep));
  }
  if (!ds.yValue.empty()) {
    v.yValue.assign(ds.yValue.begin() + keep * ds.labelWidth, ds.yValue.end());
    ds.yValue.resize(size_t(keep * ds.labelWidth));
  }
  if (size_t(ds.size) == ds.lines.size()) {
    v.lines.assign(ds.lines.begin() + keep, ds.lines.end());
    ds.lines.resize(size_t(keep));
  }
  ds.size = keep;
  return v;
}

uint64_t fnv1a(const void *data, size_t n, uint64_t h) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

uint64_t datasetDigest(const Dataset &ds) {
  uint64_t h = fnv1a(&ds.size, sizeof ds.size);
  if (ds.isText()) {
    const TokenText &t = ds.text;
    h = fnv1a(&t.window, sizeof t.window, h);
    const int64_t samples = std::min<int64_t>(ds.size, 64);
    for (int64_t j = 0; j < samples; ++j)
      h = fnv1a(t.bytes->data() + t.windowStart(j * ds.size / samples, 0),
                size_t(t.window + 1), h);
    return h;
  }
  const int64_t samples = std::min<int64_t>(ds.size, 64);
  for (int64_t j = 0; j < samples; ++j) {
    const int64_t i = j * ds.size / samples;
    h = fnv1a(ds.x.data() + i * ds.features, size_t(ds.features) * sizeof(float), h);
    if (ds.labelKind == LabelKind::Class)
      h = fnv1a(&ds.yClass[size_t(i)], sizeof(int32_t), h);
    else
      h = fnv1a(ds.yValue.data() + i * ds.labelWidth, size_t(ds.labelWidth) * sizeof(float), h);
  }
  return h;
}

} // namespace dtc::rt
