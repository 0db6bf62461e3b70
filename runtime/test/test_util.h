//===- test_util.h - Temporary directories and file helpers for tests ----===//
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
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

// The names in a directory (without . and ..), sorted.
inline std::vector<std::string> listDir(const std::string &path) {
  std::vector<std::string> names;
  if (DIR *d = opendir(path.c_str())) {
    while (dirent *e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
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
