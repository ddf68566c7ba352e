"""Filling a TPU compile cache on a machine without a TPU.

    python -m torchtpu.aot --topology v5e:2x2 --fill-cache DIR SCRIPT [ARGS...]

    with torchtpu.aot.fill.recording() as programs:
        train_step()
    result = torchtpu.aot.fill.fill_cache(programs, "v5e:2x2", DIR)

The script runs here, on the execution plugin, with the persistent cache
off so that every program it needs is lowered; the engine hands each
disk-cacheable program (one op, a fused window, a torch.compile graph) to a
recorder: its signature key, StableHLO text, result plans and compile
options. Each is then compiled for the topology with libtpu, with the options
the runtime compiles it with (one replica, one partition for a single-device
program), serialized, and written into DIR under the namespace a libtpu
client for that chip computes, with the same key. A run on the TPU host with
``TORCHTPU_CACHE_DIR=DIR`` (and this same torchtpu build: the namespace
includes the engine's build) then loads those programs instead of compiling
them.
"""
import contextlib
import os
import time
from dataclasses import dataclass, field

from .. import _C

__all__ = ["recording", "fill_cache", "FillReport", "namespace"]


@contextlib.contextmanager
def recording():
    """Records the programs the engine lowers inside the block into the
    yielded list (dicts: what, key, text, results, n_results, options). The
    runtime's disk cache is off meanwhile, so nothing is skipped for being
    cached here; a program already in the memory cache is not lowered again
    and is recorded only the first time."""
    _C._init()
    saved = _C._cache_dir()
    programs = []
    _C._set_cache_dir("", 0)
    _C._aot_fill_begin()
    try:
        yield programs
    finally:
        import torch

        torch.tpu.synchronize()
        programs.extend(_C._aot_fill_end())
        if saved:
            _C._set_cache_dir(saved, 0)


def namespace(topology, directory):
    """The namespace directory name (16 hex digits) under ``directory`` that
    a libtpu client for ``topology`` looks up."""
    from . import _compiler

    _compiler()
    return _C._aot_fill_namespace(topology, os.fspath(directory))


@dataclass
class FillReport:
    topology: str
    directory: str
    namespace: str
    outcomes: list = field(default_factory=list)  # (what, "compiled"|"cached"|"failed", bytes, error)
    seconds: float = 0.0

    def count(self, outcome):
        return sum(1 for o in self.outcomes if o[1] == outcome)

    @property
    def bytes_written(self):
        return sum(o[2] for o in self.outcomes)

    @property
    def failures(self):
        return [o for o in self.outcomes if o[1] == "failed"]

    def format(self, verbose=True):
        lines = []
        if verbose:
            for what, outcome, nbytes, err in self.outcomes:
                tail = f"  {nbytes / 1024:.1f} KiB" if nbytes else ""
                if err:
                    tail = f"  {err.splitlines()[0][:160]}"
                lines.append(f"  {outcome:<15} {what}{tail}")
        lines.append(
            f"torchtpu.aot --fill-cache: {len(self.outcomes)} programs for {self.topology}: "
            f"{self.count('compiled')} compiled, {self.count('cached')} already cached, "
            f"{self.count('failed')} failed; {self.bytes_written / 2**20:.2f} MiB written "
            f"in {self.seconds:.1f} s to {os.path.join(self.directory, self.namespace)}"
        )
        return "\n".join(lines)

    def __str__(self):
        return self.format()


def fill_cache(programs, topology, directory):
    """Compiles each recorded program for ``topology`` and writes it into the
    cache ``directory``; returns a FillReport (a program libtpu rejects is
    reported as failed, not raised). JAX functions the programs call are
    compiled as lowered for TPU (torchtpu.kernels.retarget)."""
    from ..kernels import retarget
    from . import _compiler

    _compiler()
    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)
    report = FillReport(topology, directory, _C._aot_fill_namespace(topology, directory))
    t0 = time.perf_counter()
    seen = set()
    for p in programs:
        key = tuple(p["key"])
        if key in seen:
            continue
        seen.add(key)
        try:
            outcome, nbytes = _C._aot_fill_one(
                topology, directory, list(key), retarget(p["text"], "tpu"), p["results"], p["n_results"], p["options"]
            )
            report.outcomes.append((p["what"], outcome, nbytes, ""))
        except Exception as e:  # libtpu's message, per program
            report.outcomes.append((p["what"], "failed", 0, str(e)))
    report.seconds = time.perf_counter() - t0
    return report
