"""Builds torchtpu: the C engine (make) and the torchtpu._C glue extension.

The package's metadata is in pyproject.toml; this file adds what depends on
the build: the extension, and the dependency on the exact torch release the
extension is compiled against (its C++ ABI is that torch's).
"""

import glob
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

# torchtpu is a torch.backends autoload entry point: importing torch below
# must not import a torchtpu whose extension is what we are about to build.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
import torch
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths

ROOT = os.path.dirname(os.path.abspath(__file__))
CORE_LIB = os.path.join(ROOT, "build", "libttpu_core.a")


class BuildWithCore(BuildExtension):
    """Builds build/libttpu_core.a with the root Makefile before linking _C."""

    def finalize_options(self):
        super().finalize_options()
        # A fixed build directory keeps ninja's state between pip runs, so
        # only changed files recompile (pip would use a fresh temp dir).
        # One per torch version: builds for several torches coexist.
        self.build_temp = os.path.join(ROOT, "build", f"torch-{TORCH_FULL_VERSION}")

    def run(self):
        # TORCHTPU_SKIP_CORE_BUILD=1 links the existing library as is (for
        # glue work while the engine tree is mid-change).
        if os.environ.get("TORCHTPU_SKIP_CORE_BUILD", "0") in ("", "0"):
            subprocess.check_call(["make", "-j2", "core"], cwd=ROOT)
        if not os.path.exists(CORE_LIB):
            raise RuntimeError(f"{CORE_LIB} is missing: run `make -j2 core`")
        super().run()


def torch_release():
    """The installed torch as "X.Y.Z" and its full version string."""
    import torch

    full = torch.__version__
    return full.split("+")[0], full


def build_info_text(release, full):
    """torchtpu/_build_info.py: what the extension was built against, read
    by `import torchtpu` before it loads the extension."""
    return (
        '"""Written by setup.py when the extension is built."""\n'
        f"TORCH_VERSION = {full!r}\n"
        f"TORCH_RELEASE = {release!r}\n"
    )


class BuildPyWithInfo(build_py):
    """Adds torchtpu/_build_info.py: into the source tree for an editable
    install (the package is imported from there), else into the build
    directory only, so a wheel built for another torch leaves the source
    tree's editable install as it was."""

    def run(self):
        super().run()
        base = ROOT if self.editable_mode else self.build_lib
        path = os.path.join(base, "torchtpu", "_build_info.py")
        text = build_info_text(TORCH_RELEASE, TORCH_FULL_VERSION)
        old = None
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
        if old != text:
            with open(path, "w") as f:
                f.write(text)


TORCH_RELEASE, TORCH_FULL_VERSION = torch_release()
TORCH_MINOR = ".".join(TORCH_RELEASE.split(".")[:2])

# The glue's sources: runtime/, aten/, distributed/ and python/ under
# csrc/torch, each including the others' headers by that relative path.
glue_sources = sorted(
    os.path.relpath(path, ROOT)
    for path in glob.glob(os.path.join(ROOT, "csrc", "torch", "**", "*.cpp"), recursive=True)
)

# Torch's headers are system headers for us: -Wall -Wextra then report our
# code only (GCC ignores -I for a directory also given with -isystem).
torch_system_includes = []
for include_dir in include_paths():
    torch_system_includes += ["-isystem", include_dir]

# File names that reach users (PyTorch's "Triggered internally at FILE:LINE"
# in warnings, its internal-assert messages) are relative: ours to the
# source tree, torch's headers to site-packages, not the build machine's
# directories. Where two maps match, the compiler applies the last.
file_prefix_maps = [
    f"-ffile-prefix-map={ROOT}/=",
    f"-ffile-prefix-map={os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))}/=",
]

glue_debug_flag = "-g" if os.environ.get("TORCHTPU_GLUE_DEBUG_INFO") == "1" else "-g0"

extension = CppExtension(
    name="torchtpu._C",
    sources=glue_sources,
    include_dirs=[
        os.path.join(ROOT, "csrc", "core", "include"),
        os.path.join(ROOT, "csrc", "torch"),
    ],
    # The glue is written in C++17; the language mode is the one the
    # installed torch's headers require (BuildExtension adds it).
    # No debug info (-g0 after Python's own -g): with torch's headers it
    # made each file compile 1.6x slower and its object 40x larger, for a
    # glue whose frames are thin (TORCHTPU_GLUE_DEBUG_INFO=1 builds with
    # -g). The C engine keeps its debug info.
    extra_compile_args={"cxx": ["-O2", "-Wall", "-Wextra", glue_debug_flag] + file_prefix_maps + torch_system_includes},
    extra_objects=[CORE_LIB],
    extra_link_args=["-ldl", "-lpthread"],
    # Relinks _C when the engine library changes.
    depends=[CORE_LIB],
)

setup(
    # The runtime needs a torch of the minor release built against (its
    # patch releases keep the C++ ABI the extension links to; another minor
    # release does not) and a PJRT plugin: the XLA CPU plugin, the embedded
    # default platform. NumPy: torch warns at import without it, and tensors'
    # .numpy() / torch.from_numpy need it.
    install_requires=[f"torch=={TORCH_MINOR}.*", "xla-cpu-pjrt==0.0.1", "numpy"],
    ext_modules=[extension],
    cmdclass={
        "build_ext": BuildWithCore.with_options(use_ninja=True),
        "build_py": BuildPyWithInfo,
    },
    zip_safe=False,
)
