//===- standalone_main.cpp - Run fuzz inputs without libFuzzer ------------===//
//
// For builds without clang's libFuzzer (the default GCC build): each
// argument is a file or a directory of files, each file one input to
// LLVMFuzzerTestOneInput. ctest runs the seed corpora and every recorded
// crash (test/fuzz/regressions) this way in every build.
//
//===----------------------------------------------------------------------===//
#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {
int runPath(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 1;
  }
  if (S_ISDIR(st.st_mode)) {
    int n = 0;
    if (DIR *d = ::opendir(path.c_str())) {
      while (dirent *e = ::readdir(d))
        if (e->d_name[0] != '.')
          n += runPath(path + "/" + e->d_name) == 0 ? 0 : 1;
      ::closedir(d);
    }
    return n;
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  int failures = 0;
  for (int i = 1; i < argc; ++i)
    failures += runPath(argv[i]);
  std::printf("ran the inputs of %d path(s)\n", argc - 1);
  return failures ? 1 : 0;
}
