"""Builds torchtpu: the C engine (make) and the torchtpu._C glue extension."""

import glob
import os
import subprocess

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
CORE_LIB = os.path.join(ROOT, "build", "libttpu_core.a")


class BuildWithCore(BuildExtension):
    """Builds build/libttpu_core.a with the root Makefile before linking _C."""

    def run(self):
        subprocess.check_call(["make", "-j2", "core"], cwd=ROOT)
        super().run()


glue_sources = sorted(
    os.path.relpath(path, ROOT)
    for path in glob.glob(os.path.join(ROOT, "csrc", "torch", "*.cpp"))
)

extension = CppExtension(
    name="torchtpu._C",
    sources=glue_sources,
    include_dirs=[os.path.join(ROOT, "csrc", "core", "include")],
    extra_compile_args={"cxx": ["-std=c++17", "-O2", "-Wall", "-Wextra"]},
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
    python_requires=">=3.9",
    install_requires=["torch>=2.11,<2.15", "numpy"],
    ext_modules=[extension],
    cmdclass={"build_ext": BuildWithCore.with_options(use_ninja=True)},
    entry_points={"torch.backends": ["torchtpu = torchtpu:_autoload"]},
    zip_safe=False,
)
