"""Builds torchtpu: the C engine (make) and the torchtpu._C glue extension."""

import glob
import os
import subprocess

from setuptools import find_packages, setup

# torchtpu is a torch.backends autoload entry point: importing torch below
# must not import a torchtpu whose extension is what we are about to build.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths

ROOT = os.path.dirname(os.path.abspath(__file__))
CORE_LIB = os.path.join(ROOT, "build", "libttpu_core.a")


class BuildWithCore(BuildExtension):
    """Builds build/libttpu_core.a with the root Makefile before linking _C."""

    def finalize_options(self):
        super().finalize_options()
        # A fixed build directory keeps ninja's state between pip runs, so
        # only changed files recompile (pip would use a fresh temp dir).
        self.build_temp = os.path.join(ROOT, "build", "torch")

    def run(self):
        # TORCHTPU_SKIP_CORE_BUILD=1 links the existing library as is (for
        # glue work while the engine tree is mid-change).
        if os.environ.get("TORCHTPU_SKIP_CORE_BUILD", "0") in ("", "0"):
            subprocess.check_call(["make", "-j2", "core"], cwd=ROOT)
        if not os.path.exists(CORE_LIB):
            raise RuntimeError(f"{CORE_LIB} is missing: run `make -j2 core`")
        super().run()


glue_sources = sorted(
    os.path.relpath(path, ROOT)
    for path in glob.glob(os.path.join(ROOT, "csrc", "torch", "*.cpp"))
)

# Torch's headers are system headers for us: -Wall -Wextra then report our
# code only (GCC ignores -I for a directory also given with -isystem).
torch_system_includes = []
for include_dir in include_paths():
    torch_system_includes += ["-isystem", include_dir]

extension = CppExtension(
    name="torchtpu._C",
    sources=glue_sources,
    include_dirs=[os.path.join(ROOT, "csrc", "core", "include")],
    # The glue is written in C++17; the language mode is the one the
    # installed torch's headers require (BuildExtension adds it).
    extra_compile_args={"cxx": ["-O2", "-Wall", "-Wextra"] + torch_system_includes},
    extra_objects=[CORE_LIB],
    extra_link_args=["-ldl", "-lpthread"],
    # Relinks _C when the engine library changes.
    depends=[CORE_LIB],
)

setup(
    name="torchtpu",
    version="0.1.0",
    description="PyTorch-native TPU backend driving XLA PJRT plugins",
    packages=find_packages(include=["torchtpu", "torchtpu.*"]),
    package_data={"torchtpu": ["data/*.txt"]},
    python_requires=">=3.9",
    install_requires=["torch>=2.11,<2.15", "numpy"],
    ext_modules=[extension],
    cmdclass={"build_ext": BuildWithCore.with_options(use_ninja=True)},
    entry_points={
        "torch.backends": ["torchtpu = torchtpu:_autoload"],
        # torch.compile(backend="tpu"), found without importing torchtpu first
        "torch_dynamo_backends": ["tpu = torchtpu.dynamo:backend"],
    },
    zip_safe=False,
)
