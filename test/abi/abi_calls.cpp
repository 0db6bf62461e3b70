// One call of every runtime entry point (abi_calls.inc, generated from the
// dtcrt ops), for the CPU and, in calls_cuda, for CUDA: this program builds
// only where every declaration the generated code calls has its definition
// in the runtime libraries, with the same parameters. It never calls them.
#include "abi_calls.inc"

#include <cstdio>

int main(int argc, char **) {
  if (argc > 1000) // never: the calls are here to be compiled and linked
    dtc::abi::callEveryEntryPoint();
  std::puts("abi: every entry point declared and defined");
  return 0;
}
