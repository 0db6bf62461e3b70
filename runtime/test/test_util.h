//===- test_util.h - Temporary directories and file helpers for tests ----===//
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace dtc::test {

// A fresh directory under the gtest temp dir, removed with its contents.
class TempDir {
public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "dtcrt-XXXXXX";
    if (!mkdtemp(tmpl.data()))
      ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() { [[maybe_unused]] int rc = std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void writeGz(const std::string &path, const std::string &bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  gzclose(f);
}

// An IDX file: magic 0x0000 08 <rank>, big-endian dims, then bytes.
inline std::string idxBytes(const std::vector<uint32_t> &dims, const std::vector<uint8_t> &data) {
  std::string s = {0, 0, 8, char(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      s += char((d >> shift) & 0xff);
  s.append(data.begin(), data.end());
  return s;
}

} // namespace dtc::test
