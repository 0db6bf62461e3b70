# lit configuration of the dtc tests.
import os
import platform
import shutil

import lit.formats
from lit.llvm import llvm_config

config.name = "dtc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".dsl", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "gradcheck", "e2e", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dtc_obj_root, "test")

llvm_config.use_default_substitutions()
tool_dirs = [os.path.join(config.dtc_obj_root, "bin"), config.llvm_tools_dir]
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["dtc-opt", "dtc"], tool_dirs)
# The CPU GEMM engines dtc can link (runtime/lib/gemm): features gemm-onednn, gemm-openblas.
for engine in config.dtc_gemm_engines:
    config.available_features.add("gemm-" + engine)
# glibc's libmvec found, and this is x86-64 (dtc/vector_math.h's condition;
# Debian 12's glibc is 2.36).
if config.dtc_vector_math and platform.machine() == "x86_64":
    config.available_features.add("vector-math")
# Another host compiler than the one dtc was built with, where installed.
if shutil.which("clang++"):
    config.available_features.add("clang")
config.substitutions.append(("%examples", os.path.join(config.dtc_src_root, "examples")))
