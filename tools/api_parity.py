"""torch.tpu against torch.cuda: which of torch.cuda's public names torch.tpu
has, and why each of the others is missing or does not apply.

    .venv/bin/python tools/api_parity.py           # writes docs/api.md
    .venv/bin/python tools/api_parity.py --check   # exit 1 if docs/api.md is stale

Both sides are read from the live modules: the names from torch.cuda as
this torch has it, presence from torch.tpu (torchtpu.device_module). What
is written by hand here is only the reason a name is absent (and a note for
a few present ones); a reason for a name torch.tpu has is an error, so the
reasons cannot go stale.

Which names count as torch.cuda's public API:

  1. every name in dir(torch.cuda) that does not start with "_";
  2. a module counts only if it is a submodule of torch.cuda (its __name__
     starts with "torch.cuda."; e.g. torch.cuda.nvtx): other modules are
     imports (os, threading, torch);
  3. typing and standard-library helpers are imports, not API: objects
     defined outside torch (typing.Any, Optional, cast, functools.lru_cache,
     the Device type alias, ...);
  4. helpers from torch's private modules (a component of their module
     path starts with "_", e.g. torch._utils.classproperty) are dropped
     unless torch.cuda.__all__ lists them;
  5. plain data (not a class, function or module) is dropped unless
     torch.cuda.__all__ lists it (drops TYPE_CHECKING and internal tables,
     keeps has_half and has_magma).

A name is "present" when torch.tpu has an attribute of that name; the
tests (tests/project/test_api_parity.py) use every present name.
"""
import argparse
import inspect
import os
import sys
import types

import torch

import torchtpu  # noqa: F401  (registers torch.tpu)
from torchtpu import device_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "api.md")

PRESENT, MISSING, NOT_APPLICABLE = "present", "missing", "not applicable"

# Categories of names that have no meaning on tpu.
_TYPED = ("legacy typed tensors",
          "per-dtype tensor/storage classes; use dtype= and device='tpu'")
_GRAPHS = ("CUDA graphs",
           "CUDA stream capture and replay; torch.compile(backend='tpu') "
           "runs a whole graph as one program and replays it")
_ALLOC = ("CUDA caching allocator",
          "configures or inspects PyTorch's caching allocator; tpu caches "
          "nothing (each storage is one device buffer, freed with it)")
_HOST = ("pinned host memory",
         "CUDA's pinned host-memory allocator; tpu has no pinned memory")
_SMI = ("NVML / AMD SMI",
        "a device-management-library query; PJRT has no counterpart")
_RUNTIME = ("CUDA runtime", "the CUDA runtime API")
_NAMESPACE = ("namespace module",
              "holds functions torch.cuda also exports at its top level "
              "(counted there)")

NOT_APPLICABLE_REASONS = {
    **{name: _TYPED for name in (
        "BFloat16Storage", "BFloat16Tensor", "BoolStorage", "BoolTensor",
        "ByteStorage", "ByteTensor", "CharStorage", "CharTensor",
        "ComplexDoubleStorage", "ComplexFloatStorage", "DoubleStorage",
        "DoubleTensor", "FloatStorage", "FloatTensor", "HalfStorage",
        "HalfTensor", "IntStorage", "IntTensor", "LongStorage", "LongTensor",
        "ShortStorage", "ShortTensor")},
    "sparse": (_TYPED[0], "legacy per-dtype sparse tensor classes"),
    **{name: _GRAPHS for name in (
        "CUDAGraph", "graph", "graph_pool_handle", "graphs",
        "make_graphed_callables", "is_current_stream_capturing")},
    **{name: _ALLOC for name in (
        "CUDAPluggableAllocator", "change_current_allocator", "MemPool",
        "use_mem_pool", "caching_allocator_alloc", "caching_allocator_delete",
        "caching_allocator_enable", "caching_allocator_disabled",
        "get_allocator_backend",
        "memory_snapshot", "set_per_process_memory_fraction",
        "get_per_process_memory_fraction")},
    **{name: _HOST for name in (
        "host_memory_stats", "host_memory_stats_as_nested_dict",
        "reset_accumulated_host_memory_stats",
        "reset_peak_host_memory_stats")},
    **{name: _SMI for name in (
        "list_gpu_processes", "utilization", "temperature", "power_draw",
        "clock_rate", "device_memory_used", "memory_usage")},
    **{name: _NAMESPACE for name in ("memory", "random", "streams")},
    "cudart": _RUNTIME,
    "cudaStatus": _RUNTIME,
    "check_error": _RUNTIME,
    "CudaError": (_RUNTIME[0], "a CUDA runtime error code; engine errors "
                  "are RuntimeError, OutOfMemoryError, NotImplementedError"),
    "DeferredCudaCallError": (_RUNTIME[0], "CUDA's lazy-initialization "
                              "error; tpu raises RuntimeError at the call"),
    "ExternalStream": (_RUNTIME[0], "wraps a cudaStream_t"),
    "get_stream_from_external": (_RUNTIME[0], "wraps a cudaStream_t"),
    "GreenContext": (_RUNTIME[0], "CUDA green contexts (SM partitions)"),
    "green_contexts": (_RUNTIME[0], "CUDA green contexts (SM partitions)"),
    "gds": (_RUNTIME[0], "NVIDIA GPUDirect Storage"),
    "ipc_collect": (_RUNTIME[0], "CUDA IPC memory handles; tpu tensors are "
                    "not shared between processes"),
    "can_device_access_peer": (_RUNTIME[0], "CUDA peer-to-peer access; "
                               "copies between tpu devices go through the "
                               "plugin"),
    "nccl": ("CUDA libraries", "NCCL; distributed tpu uses the c10d "
             "backend 'tpu'"),
    "current_blas_handle": ("CUDA libraries", "a cuBLAS handle"),
    "current_solver_handle": ("CUDA libraries", "a cuSOLVER handle"),
    "has_magma": ("CUDA libraries", "MAGMA (GPU linear algebra)"),
    "jiterator": ("CUDA kernels", "compiles CUDA C++ elementwise kernels"),
    "tunable": ("CUDA kernels", "TunableOp: picks among cuBLAS/hipBLASLt "
                "kernels; XLA chooses kernels itself"),
    "nvtx": ("NVIDIA tools", "NVTX ranges for Nsight"),
    "profiler": ("NVIDIA tools", "cudaProfilerStart/Stop for NVIDIA's "
                 "profilers"),
    "get_arch_list": ("CUDA build", "the CUDA architectures torch was built "
                      "for; tpu programs are compiled for the device at "
                      "run time"),
    "get_gencode_flags": ("CUDA build", "nvcc flags torch was built with"),
    "get_device_capability": ("CUDA build", "the CUDA compute capability "
                              "(major, minor); "
                              "torch.accelerator.get_device_capability() "
                              "gives tpu's supported dtypes"),
    "is_tf32_supported": ("CUDA build", "TF32 is an NVIDIA format; float32 "
                          "matmul precision is "
                          "torch.set_float32_matmul_precision"),
    "has_half": ("CUDA build", "a legacy constant; tpu supports float16 "
                 "(torch.accelerator.get_device_capability())"),
}

MISSING_REASONS = {
    "memory_summary": "not implemented: memory_stats() holds its figures",
    "get_sync_debug_mode": "not implemented: no hook on the host waits "
                           "(reads, synchronize) to warn or fail at",
    "set_sync_debug_mode": "not implemented: no hook on the host waits "
                           "(reads, synchronize) to warn or fail at",
    "AcceleratorError": "not raised: device errors are RuntimeError (with "
                        "the plugin's message)",
}

PRESENT_NOTES = {
    "Stream": "streams of a device share its ordered queue: one priority "
              "level, priority_range() (0, 0)",
    "Event": "query() never waits; elapsed_time from the device's "
             "completion times",
    "empty_cache": "no cache of buffers; on the CPU plugin, returns the freed memory the heap keeps",
    "memory_reserved": "equals memory_allocated: nothing is cached",
    "max_memory_reserved": "equals max_memory_allocated: nothing is cached",
    "memory_cached": "deprecated alias of memory_reserved, as in torch.cuda",
    "max_memory_cached": "deprecated alias of max_memory_reserved",
    "reset_max_memory_allocated": "deprecated; resets every peak",
    "reset_max_memory_cached": "deprecated; resets every peak",
    "memory_stats": "torch.cuda's keys (pool 'all' only), then the engine's "
                    "counters",
    "mem_get_info": "the plugin's figures; host memory on the CPU plugin",
    "get_device_properties": "name (device kind), total_memory, platform, "
                             "index, id",
    "amp": "torch.tpu.amp",
    "OutOfMemoryError": "torch.OutOfMemoryError, raised when tpu memory "
                        "runs out",
}


def _module_of(obj):
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str) and not inspect.isclass(obj):
        module = type(obj).__module__
    return module or ""


def cuda_public_names():
    """(name, kind) of torch.cuda's public API, by the rule above."""
    cuda = torch.cuda
    listed = set(getattr(cuda, "__all__", ()))
    out = []
    for name in sorted(dir(cuda)):
        if name.startswith("_"):
            continue
        obj = getattr(cuda, name)
        if isinstance(obj, types.ModuleType):
            if obj.__name__.startswith("torch.cuda."):
                out.append((name, "module"))
            continue
        if not inspect.isclass(obj) and not callable(obj):
            if name in listed:  # data: only what __all__ lists
                out.append((name, "constant" if isinstance(
                    obj, (bool, int, float, str)) else "object"))
            continue
        module = _module_of(obj)
        if module.split(".")[0] != "torch":
            continue  # typing / standard-library helper
        if any(part.startswith("_") for part in module.split(".")) and \
                name not in listed:
            continue  # helper from a private torch module
        out.append((name, "class" if inspect.isclass(obj) else "function"))
    return out


def classify():
    """Rows (name, kind, status, category, note) and the totals."""
    rows = []
    stale = []
    for name, kind in cuda_public_names():
        if hasattr(device_module, name):
            if name in NOT_APPLICABLE_REASONS or name in MISSING_REASONS:
                stale.append(name)
            rows.append((name, kind, PRESENT, "", PRESENT_NOTES.get(name, "")))
        elif name in NOT_APPLICABLE_REASONS:
            category, reason = NOT_APPLICABLE_REASONS[name]
            rows.append((name, kind, NOT_APPLICABLE, category, reason))
        else:
            rows.append((name, kind, MISSING, "",
                         MISSING_REASONS.get(name, "not implemented")))
    if stale:
        raise SystemExit(
            "tools/api_parity.py: torch.tpu has " + ", ".join(stale) +
            ", listed here as absent: remove the reason")
    totals = {status: sum(1 for row in rows if row[2] == status)
              for status in (PRESENT, MISSING, NOT_APPLICABLE)}
    return rows, totals


def render():
    rows, totals = classify()
    lines = [
        "# `torch.tpu` and `torch.cuda`",
        "",
        "Generated by `.venv/bin/python tools/api_parity.py` from the live "
        f"modules (torch {torch.__version__}); do not edit by hand. "
        "`tools/api_parity.py --check` fails when this file is stale.",
        "",
        "Every public name of `torch.cuda` (the rule is in the script: "
        "names without a leading underscore, its own submodules, no "
        "imported modules or typing helpers) and whether `torch.tpu` has "
        "it. *missing*: could exist on tpu, does not yet; *not applicable*: "
        "a CUDA concept without a tpu counterpart.",
        "",
        "## Totals",
        "",
        "| status | names |",
        "|---|---|",
    ]
    for status in (PRESENT, MISSING, NOT_APPLICABLE):
        lines.append(f"| {status} | {totals[status]} |")
    lines.append(f"| total | {sum(totals.values())} |")
    lines += ["", "## Names", "",
              "| name | kind | torch.tpu | category | note / reason |",
              "|---|---|---|---|---|"]
    for name, kind, status, category, note in rows:
        lines.append(f"| `{name}` | {kind} | {status} | {category} | {note} |")
    lines.append("")
    return "\n".join(lines)


def doc_torch_version(text):
    marker = "live modules (torch "
    start = text.find(marker)
    if start < 0:
        return None
    start += len(marker)
    return text[start:text.find(")", start)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/api.md differs from the output")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        try:
            with open(DOC, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        if current != text:
            version = doc_torch_version(current)
            why = ""
            if version and version != torch.__version__:
                why = (f" (it was written with torch {version}, this is "
                       f"torch {torch.__version__})")
            print(f"docs/api.md is out of date{why}: run "
                  "tools/api_parity.py", file=sys.stderr)
            return 1
        return 0
    os.makedirs(os.path.dirname(DOC), exist_ok=True)
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(text)
    _, totals = classify()
    print(f"docs/api.md: {totals[PRESENT]} present, {totals[MISSING]} missing, "
          f"{totals[NOT_APPLICABLE]} not applicable")
    return 0


if __name__ == "__main__":
    sys.exit(main())
