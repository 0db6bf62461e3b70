# lit configuration of the dtc tests.
import os
import platform
import shutil

import lit.formats
from lit.llvm import llvm_config

config.name = "dtc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".dsl", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "gradcheck", "e2e", "Inputs", "fuzz", "layout"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dtc_obj_root, "test")

llvm_config.use_default_substitutions()
tool_dirs = [os.path.join(config.dtc_obj_root, "bin"), config.llvm_tools_dir]
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# The sanitizer build's settings reach the programs the tests run.
# So does the decoded-data cache the suite uses (DTC_CACHE_DIR, set by ctest).
for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "DTC_CACHE_DIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
llvm_config.add_tool_substitutions(["dtc-opt", "dtc"], tool_dirs)
# The CPU GEMM engines dtc can link (runtime/lib/kernels/gemm): features gemm-onednn, gemm-openblas.
for engine in config.dtc_gemm_engines:
    config.available_features.add("gemm-" + engine)
# Host compilers: g++ and clang++ where installed (the driver passes GCC-only
# flags to GCC alone).
# In a sanitizer build (DTC_SANITIZE, clang-22's ASan runtime in libdtcrt.a)
# only the compiler it was built with can link train programs: feature
# "sanitize", and neither of these.
if config.dtc_cuda_runtime:  # libdtcrt_cuda.a was built: dtc --target=cuda links
    config.available_features.add("cuda-runtime")
if config.dtc_sanitize:
    config.available_features.add("sanitize")
else:
    if shutil.which("g++"):
        config.available_features.add("gcc")
    if shutil.which("clang++"):
        config.available_features.add("clang")
# Generated code uses glibc's vector math: libmvec found, x86-64, glibc >=
# 2.35, and dtc's default compiler is GCC (dtc/vector_math.h's condition).
libc, libc_version = platform.libc_ver()
if (config.dtc_vector_math and platform.machine() == "x86_64" and libc == "glibc"
        and tuple(int(v) for v in libc_version.split(".")[:2]) >= (2, 35)
        and config.dtc_cxx_id == "GNU"):
    config.available_features.add("vector-math")
config.substitutions.append(("%examples", os.path.join(config.dtc_src_root, "examples")))
# Debian's Python with numpy and torch (the reference and the comparison scripts).
config.substitutions.append(("%python", "/usr/bin/python3"))
# An AVX-512 host: dtc's default layout is blocked there when it links
# oneDNN (tools/dtc/dtc.cpp: --layout=auto).
try:
    with open("/proc/cpuinfo") as f:
        if " avx512f" in f.read():
            config.available_features.add("avx512")
except OSError:
    pass
