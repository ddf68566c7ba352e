"""Ahead-of-time compilation for real TPU topologies, without a TPU.

    report = torchtpu.aot.compile_for(model, (x, y), topology="v5e:2x2")
    print(report)

    python -m torchtpu.aot --topology v6e:2x2 SCRIPT [ARGS...]
    python -m torchtpu.aot --topology v6e:2x2 -m torchtpu.demo --steps 2 --no-cpu-check
    python -m torchtpu.aot --topology v6e:2x2 --dump-dir DIR

The programs our engine runs (StableHLO, the same text it hands the execution
plugin) are compiled by libtpu (the `tpu` extra: `pip install "torchtpu[tpu]"`)
for a named topology through the engine's C layer (PJRT_TopologyDescription_Create +
PJRT_Compile). Per program the compiler reports the HBM it needs on each
device (arguments, outputs, temporaries, peak) and its cost analysis (flops,
bytes accessed); with the chip's published peak bf16 FLOP/s and HBM bandwidth
(torchtpu/aot/chips.py) that gives a roofline estimate of the step time. A
program or step that does not fit in HBM raises DoesNotFitError.

On a multi-chip topology every program is compiled data-parallel: one
replica per device (num_replicas = device count), i.e. the example inputs are
one device's share of the batch. Our programs carry no collectives yet, so a
replica is exactly the single-device program placed on each chip.
"""
import contextlib
import copy
import os
import sys
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils import _pytree as pytree

from .. import _C
from .chips import CHIPS, chip_count, chip_for

__all__ = [
    "compile_for",
    "compile_dir",
    "compile_programs",
    "capture_programs",
    "available",
    "target",
    "Report",
    "ProgramStats",
    "DoesNotFitError",
    "AotCompileError",
    "CHIPS",
]


class DoesNotFitError(RuntimeError):
    """A program or training step needs more HBM than one device has.
    ``report`` holds the full Report."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


class AotCompileError(RuntimeError):
    """libtpu rejected one or more programs. ``report`` holds the Report
    (failures in ``report.failures``)."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


# --------------------------------------------------------------- compiler

_loaded = None  # path of the libtpu loaded into this process


def _search_dirs():
    return [p for p in sys.path if p and os.path.isdir(p)]


def available():
    """(True, path) when libtpu can be loaded, else (False, why)."""
    try:
        return True, _C._aot_find(_search_dirs())
    except ImportError as e:
        return False, str(e)


def _compiler():
    """Loads libtpu once per process (ImportError saying how to install)."""
    global _loaded
    if _loaded is None:
        _loaded = _C._aot_load(_C._aot_find(_search_dirs()))
    return _loaded


def _libtpu_version():
    try:
        from importlib import metadata

        return metadata.version("libtpu")
    except Exception:  # a TORCHTPU_LIBTPU build need not be a package
        return "?"


def target(topology):
    """What libtpu makes of a topology name: dict(name, device_kind,
    platform_version, device_count)."""
    _compiler()
    chip_count(topology)  # a malformed name gets a clear ValueError first
    return dict(_C._aot_target(topology))


# ----------------------------------------------------------------- results


@dataclass
class ProgramStats:
    name: str               # file stem: "<op>-<hash>"
    runs: int               # executions in the measured step (0: other steps only)
    argument_bytes: int = 0  # per device, as compiled for the TPU (padded)
    output_bytes: int = 0
    alias_bytes: int = 0
    temp_bytes: int = 0
    generated_code_bytes: int = 0
    peak_bytes: int = 0
    flops: float = 0.0
    bytes_accessed: float = 0.0
    transcendentals: float = 0.0
    compiler_seconds: float = 0.0  # the compiler's own estimate ("optimal_seconds")
    roofline_seconds: float = 0.0  # ours, from the chip table; 0 if untabled


@dataclass
class Report:
    topology: str
    device_kind: str
    device_count: int
    replicas: int
    libtpu: str
    chip: object               # chips.Chip or None
    devices_per_chip: int
    capture: str               # how the programs were obtained
    programs: list = field(default_factory=list)
    failures: list = field(default_factory=list)  # (name, message)
    hbm_failures: list = field(default_factory=list)  # (name, message): compiler said it does not fit
    executions: int = 0        # program executions in the measured step
    unattributed: int = 0      # executions no dumped program could be matched to
    live_peak_bytes: int = 0   # live tensors at the step's peak (engine, unpadded)
    scope: str = "step"        # what runs/executions count: one step, or a whole script

    # Per-device figures of the chip (a chip may hold several devices).
    @property
    def hbm_bytes(self):
        return self.chip.hbm_bytes // self.devices_per_chip if self.chip else 0

    @property
    def peak_flops(self):
        return self.chip.peak_bf16_flops / self.devices_per_chip if self.chip else 0.0

    @property
    def hbm_bandwidth(self):
        return self.chip.hbm_bytes_per_s / self.devices_per_chip if self.chip else 0.0

    @property
    def step_flops(self):
        return sum(p.flops * p.runs for p in self.programs)

    @property
    def step_bytes(self):
        return sum(p.bytes_accessed * p.runs for p in self.programs)

    @property
    def step_seconds(self):
        """Roofline estimate of one step on one device: every program at
        max(compute time, HBM time), no launch overhead, no overlap."""
        return sum(p.roofline_seconds * p.runs for p in self.programs)

    @property
    def step_hbm_bytes(self):
        """HBM one device needs for the step. One program (a fused step):
        its compiled peak. Several (per-op eager): the live tensors at the
        step's peak plus the largest program's temporaries, or the largest
        program's peak if that is more."""
        if not self.programs:
            return 0
        peak = max(p.peak_bytes for p in self.programs)
        if len(self.programs) == 1:
            return peak
        temps = max(p.temp_bytes for p in self.programs)
        return max(peak, self.live_peak_bytes + temps)

    @property
    def fits(self):
        if self.hbm_failures:
            return False
        if not self.chip:
            return True  # the compiler itself rejects what it cannot place
        return self.step_hbm_bytes <= self.hbm_bytes and all(
            p.peak_bytes <= self.hbm_bytes for p in self.programs
        )

    def too_big(self):
        """The programs whose own peak exceeds one device's HBM."""
        return [p for p in self.programs if self.chip and p.peak_bytes > self.hbm_bytes]

    def format(self, limit=25):
        return _format(self, limit)

    def __str__(self):
        return self.format()


# ---------------------------------------------------------------- compile


def _roofline(flops, nbytes, report):
    if not report.chip:
        return 0.0
    return max(flops / report.peak_flops, nbytes / report.hbm_bandwidth)


def _new_report(topology, replicas, capture):
    _compiler()
    info = target(topology)
    n = info["device_count"]
    if replicas is None:
        replicas = n
    per_chip = max(1, n // chip_count(topology))
    return Report(
        topology=topology,
        device_kind=info["device_kind"],
        device_count=n,
        replicas=replicas,
        libtpu=_libtpu_version(),
        chip=chip_for(topology),
        devices_per_chip=per_chip,
        capture=capture,
    )


def _compile_threads():
    """TORCHTPU_COMPILE_THREADS, else the CPUs this process may use."""
    env = os.environ.get("TORCHTPU_COMPILE_THREADS", "")
    if env.strip():
        return max(int(env), 1)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:
        return max(os.cpu_count() or 1, 1)


def compile_programs(programs, topology="v5e:2x2", *, replicas=None, capture="programs"):
    """Compiles (name, mlir_text, runs) triples for the topology, one replica
    per device unless `replicas` says otherwise, on the compile threads
    (TORCHTPU_COMPILE_THREADS). Returns a Report; compile failures are
    collected in report.failures, not raised. Each program's compile_seconds
    is its compile's wall time on its thread; report.compile_wall_seconds is
    the whole batch's."""
    report = _new_report(topology, replicas, capture)
    programs = list(programs)
    batch = {"programs": [], "wall_seconds": 0.0}
    if programs:
        from ..kernels import retarget

        # JAX functions the programs call, lowered for TPU (Pallas kernels
        # as Mosaic kernels rather than their interpret-mode loops).
        batch = _C._aot_compile_many(topology, [retarget(text, "tpu") for _, text, _ in programs],
                                     report.replicas, 1, _compile_threads())
    for (name, _text, runs), s in zip(programs, batch["programs"]):
        if "error" in s:
            failed = report.hbm_failures if s["code"] == "oom" else report.failures
            failed.append((name, s["error"]))
            continue
        p = ProgramStats(
            name=name,
            runs=runs,
            argument_bytes=s["argument_bytes"],
            output_bytes=s["output_bytes"],
            alias_bytes=s["alias_bytes"],
            temp_bytes=s["temp_bytes"],
            generated_code_bytes=s["generated_code_bytes"],
            peak_bytes=s["peak_bytes"],
            flops=max(0.0, s["flops"]),
            bytes_accessed=max(0.0, s["bytes_accessed"]),
            transcendentals=max(0.0, s["transcendentals"]),
            compiler_seconds=max(0.0, s["optimal_seconds"]),
        )
        p.compile_seconds = s["seconds"]
        p.roofline_seconds = _roofline(p.flops, p.bytes_accessed, report)
        report.programs.append(p)
    report.compile_wall_seconds = batch["wall_seconds"]
    report.executions = sum(p.runs for p in report.programs)
    return report


def _read_dir(dump_dir, counts=None):
    out = []
    for f in sorted(os.listdir(dump_dir)):
        if f.endswith(".mlir"):
            with open(os.path.join(dump_dir, f), encoding="utf-8") as fh:
                text = fh.read()
            name = f[: -len(".mlir")]
            out.append((name, text, counts.get(f, 0) if counts is not None else 1))
    return out


def compile_dir(dump_dir, topology="v5e:2x2", *, replicas=None, check=True):
    """Compiles every program a TORCHTPU_DUMP_DIR run left in dump_dir (each
    counted as run once)."""
    report = compile_programs(
        _read_dir(dump_dir), topology, replicas=replicas, capture=f"programs in {dump_dir}"
    )
    if check:
        _check(report)
    return report


# ----------------------------------------------------------------- capture


def _signature(func, args, kwargs):
    """What decides which program an op call runs: op, and each tensor's
    dtype/shape/strides/offset, and the other arguments."""

    def one(x):
        if isinstance(x, torch.Tensor):
            return ("T", str(x.device), x.dtype, tuple(x.shape), tuple(x.stride()), x.storage_offset())
        if isinstance(x, float):
            # Scalars such as a learning rate change between steps without
            # changing the program (the engine passes them at run time).
            return float
        if isinstance(x, (int, bool, str, type(None), torch.dtype, torch.device)):
            return x
        return type(x).__name__

    leaves = pytree.tree_leaves((args, kwargs))
    return (str(func), tuple(one(x) for x in leaves))


def _program_name(what, key):
    """A captured program's name: what it runs and its signature's hash (the
    name TORCHTPU_DUMP_DIR gives its file)."""
    h = 1469598103934665603
    for w in key:
        h = ((h ^ (w & 0xFFFFFFFFFFFFFFFF)) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    name = "".join("_" if c in " /()" else c for c in what)[:95]
    return f"{name}-{h:016x}"


class _ProgramCounter(TorchDispatchMode):
    """Counts how often each captured program runs. The engine hands each
    program it lowers to the capture sink (torchtpu.aot.fill's recorder); an
    op call that lowered programs learns which program(s) its signature
    runs, and later calls with that signature (cache hits) are counted
    against the same program(s). Higher-order operators (a scan: one loop
    program, torchtpu/scan.py) are counted like any op."""

    supports_higher_order_operators = True

    def __init__(self):
        super().__init__()
        self.texts = {}
        self.by_sig = {}
        self.counts = Counter()
        self.unattributed = 0

    def take(self, recorded):
        """Names of the programs just recorded (kept with their text)."""
        names = []
        for p in recorded:
            name = _program_name(p["what"], p["key"])
            self.texts.setdefault(name, p["text"].decode())
            names.append(name)
        return names

    def reset_counts(self):
        self.counts = Counter()
        self.unattributed = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        before = _C._compile_stats()["executions"]
        out = func(*args, **kwargs)
        ran = _C._compile_stats()["executions"] - before
        if ran > 0:
            new = self.take(_C._aot_fill_take())
            sig = _signature(func, args, kwargs)
            if new:
                self.by_sig[sig] = new
            progs = self.by_sig.get(sig)
            if progs:
                for p in progs[:ran]:
                    self.counts[p] += 1
                self.unattributed += max(0, ran - len(progs))
            else:
                self.unattributed += ran
        return out


@dataclass
class Capture:
    programs: list        # (name, mlir_text, runs in the measured step)
    method: str
    unattributed: int = 0
    live_peak_bytes: int = 0


def _record(run):
    """Calls run(counter) with the engine's program sink on and a
    _ProgramCounter active; the programs loaded before are unloaded first,
    so every program the work runs is seen, also those earlier work in this
    process compiled. Returns the counter (texts, counts)."""
    counter = _ProgramCounter()
    _C._aot_fill_begin(unload=True)
    try:
        with counter:
            run(counter)
            torch.tpu.synchronize()
    finally:
        counter.take(_C._aot_fill_end())
    return counter


def _captured(counter):
    """(name, text, runs) of each program a counter saw, by name."""
    return [(name, text, counter.counts.get(name, 0)) for name, text in sorted(counter.texts.items())]


def _capture_per_op(step, steps):
    """Runs `step` `steps` times in eager per-op mode while recording; the
    last run is the measured one (earlier runs compile what only a first
    step needs, e.g. optimizer state)."""

    def run(counter):
        for i in range(steps):
            if i == steps - 1:
                torch.tpu.synchronize()
                counter.reset_counts()
                torch.tpu.reset_peak_memory_stats()
            step()

    counter = _record(run)
    live_peak = torch.tpu.max_memory_allocated()
    return Capture(_captured(counter), "per-op eager programs", counter.unattributed, live_peak)


@contextlib.contextmanager
def _compiling_everything():
    """Per-op strict mode with the persistent cache off, so every program
    the step runs is compiled (and so dumped) here rather than loaded."""
    from .. import _C, set_eager_mode
    previous_dir = _C._cache_dir()
    _C._set_cache_dir("")
    try:
        with set_eager_mode("strict"):
            yield
    finally:
        if previous_dir:
            _C._set_cache_dir(previous_dir)


def capture_programs(step, steps=2):
    """The one place that decides how a training step becomes programs.
    Today: eager per-op programs (one per op, dumped as the engine compiles
    them). When the whole-step capture (torch.compile) lands, it becomes the
    preferred method here."""
    with _compiling_everything():
        return _capture_per_op(step, steps)


def _loss_of(out):
    if isinstance(out, torch.Tensor):
        t = out
    else:
        leaves = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
        if not leaves:
            raise TypeError("compile_for: the module returned no tensor to train on")
        t = leaves[0]
    return t if t.numel() == 1 else t.float().mean()


def _training_step(module, example_inputs, optimizer):
    """The step compile_for captures for a module: a training step (forward,
    backward, optimizer update) when it has trainable parameters, else its
    forward in inference mode (a module with nothing to train)."""
    model = copy.deepcopy(module).to("tpu")
    params = [p for p in model.parameters() if p.requires_grad]
    inputs = pytree.tree_map(
        lambda x: x.to("tpu") if isinstance(x, torch.Tensor) else x, tuple(example_inputs)
    )
    if not params:
        model.eval()

        def infer():
            with torch.no_grad():
                model(*inputs)

        return infer
    model.train()
    opt = optimizer(params) if optimizer is not None else None

    def step():
        loss = _loss_of(model(*inputs))
        if opt is not None:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        if opt is not None:
            opt.step()

    return step


def compile_for(
    fn_or_module,
    example_inputs=(),
    topology="v5e:2x2",
    *,
    optimizer=torch.optim.AdamW,
    replicas=None,
    steps=2,
    check=True,
):
    """Captures a training step and compiles its programs for `topology`.

    fn_or_module: an nn.Module (a copy is moved to tpu and trained: forward
    on example_inputs, the output - or its mean - as the loss, backward, and
    `optimizer(params).step()`; optimizer=None skips the update; a module
    without trainable parameters runs its forward only, in inference mode),
    or a callable that is the whole step and is called with example_inputs.
    topology: a name such as "v5e:2x2", or a list of names (one capture,
    one Report each).

    Programs are captured in this process through the engine's program
    sink: the programs loaded before are unloaded first, so every program
    the step runs is seen, whatever ran before.

    Returns a Report (print it), or a list of them for a list of
    topologies. With check=True raises AotCompileError if libtpu rejects a
    program and DoesNotFitError if a program or the step needs more HBM than
    a device of the topology has.
    """
    topologies = [topology] if isinstance(topology, str) else list(topology)
    for t in topologies:
        chip_count(t)
    _compiler()  # missing libtpu: fail before running anything
    if isinstance(fn_or_module, torch.nn.Module):
        step = _training_step(fn_or_module, example_inputs, optimizer)
    elif callable(fn_or_module):
        args = tuple(example_inputs)

        def step():
            fn_or_module(*args)

    else:
        raise TypeError(f"compile_for: expected an nn.Module or a callable, got {type(fn_or_module).__name__}")
    cap = capture_programs(step, steps)
    reports = []
    for t in topologies:
        report = compile_programs(cap.programs, t, replicas=replicas, capture=cap.method)
        report.unattributed = cap.unattributed
        report.live_peak_bytes = cap.live_peak_bytes
        if check:
            _check(report)
        reports.append(report)
    return reports[0] if isinstance(topology, str) else reports


def _check(report):
    if report.hbm_failures:
        name, msg = report.hbm_failures[0]
        raise DoesNotFitError(
            f"does not fit on {report.topology}: program {name} needs more HBM than one "
            f"{report.device_kind} device has ({_b(report.hbm_bytes) if report.chip else '?'}): {msg}",
            report,
        )
    if report.failures:
        names = ", ".join(n for n, _ in report.failures[:5])
        first = report.failures[0][1]
        raise AotCompileError(
            f"{len(report.failures)} of {len(report.failures) + len(report.programs)} programs do not "
            f"compile for {report.topology} ({names}): {first}",
            report,
        )
    if not report.fits:
        big = report.too_big()
        what = (
            f"program {big[0].name} needs {_b(big[0].peak_bytes)}"
            if big
            else f"the step needs {_b(report.step_hbm_bytes)}"
        )
        raise DoesNotFitError(
            f"does not fit on {report.topology}: {what} of HBM per device, one "
            f"{report.device_kind} device has {_b(report.hbm_bytes)}\n{report.format()}",
            report,
        )


# ------------------------------------------------------------------ format


def _b(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _t(s):
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} us"


def _format(r, limit):
    lines = []
    rep = f"{r.replicas} replica{'s' if r.replicas != 1 else ''} (one per device)" if r.replicas > 1 else "1 device"
    lines.append(
        f"torchtpu AOT report: {r.topology} = {r.device_count} x {r.device_kind} (libtpu {r.libtpu}), "
        f"each program compiled for {rep}"
    )
    if r.chip:
        lines.append(
            f"  per device: HBM {_b(r.hbm_bytes)}, peak {r.peak_flops / 1e12:.1f} TFLOP/s bf16, "
            f"HBM {r.hbm_bandwidth / 1e9:.0f} GB/s  [{r.chip.source}]"
        )
    else:
        lines.append(f"  no chip table entry for {r.topology}: no roofline, HBM fit left to the compiler")
    lines.append(
        f"  capture: {r.capture}; {len(r.programs)} programs compiled, "
        f"{len(r.failures) + len(r.hbm_failures)} failed; "
        f"{r.executions} executions in the measured {r.scope}"
        + (f" (+{r.unattributed} not matched to a program)" if r.unattributed else "")
    )
    hdr = f"  {'program':<34} {'runs':>5} {'args':>10} {'outputs':>10} {'temps':>10} {'peak':>10} {'MFLOP':>9} {'MB':>8} {'roofline':>10}"
    lines.append(hdr)
    order = sorted(r.programs, key=lambda p: (p.roofline_seconds * max(p.runs, 1), p.peak_bytes), reverse=True)
    shown = order if limit is None or limit <= 0 else order[:limit]
    for p in shown:
        lines.append(
            f"  {p.name[:34]:<34} {p.runs:>5} {_b(p.argument_bytes):>10} {_b(p.output_bytes):>10} "
            f"{_b(p.temp_bytes):>10} {_b(p.peak_bytes):>10} {p.flops / 1e6:>9.3f} {p.bytes_accessed / 1e6:>8.3f} "
            f"{_t(p.roofline_seconds):>10}"
        )
    if len(shown) < len(order):
        lines.append(f"  ... {len(order) - len(shown)} more (smaller) programs")
    for name, msg in r.hbm_failures:
        lines.append(f"  DOES NOT FIT {name}: {msg.splitlines()[0] if msg else ''}")
    for name, msg in r.failures:
        lines.append(f"  FAILED {name}: {msg.splitlines()[0] if msg else ''}")
    if r.chip and r.programs:
        compute = r.step_flops / r.peak_flops
        memory = r.step_bytes / r.hbm_bandwidth
        lines.append(
            f"  {r.scope}: {r.step_flops / 1e9:.3f} GFLOP, {r.step_bytes / 1e6:.2f} MB accessed per device -> "
            f"roofline {_t(r.step_seconds)} (all compute {_t(compute)}, all HBM traffic {_t(memory)}; "
            f"no launch overhead, f32 counted at the bf16 peak)"
        )
    if r.programs:
        need = r.step_hbm_bytes
        if len(r.programs) > 1:
            how = (
                f"live tensors at the {r.scope}'s peak {_b(r.live_peak_bytes)} + largest temporaries "
                f"{_b(max(p.temp_bytes for p in r.programs))}; largest program peak "
                f"{_b(max(p.peak_bytes for p in r.programs))}"
            )
        else:
            how = "compiled peak of the step's program"
        if r.chip:
            verdict = "fits" if r.fits else "DOES NOT FIT"
            lines.append(
                f"  HBM per device: {_b(need)} of {_b(r.hbm_bytes)} ({100.0 * need / r.hbm_bytes:.2f}%) "
                f"[{how}]: {verdict}"
            )
        else:
            lines.append(f"  HBM per device: {_b(need)} [{how}]")
    return "\n".join(lines)

from . import fill  # noqa: E402,F401  (torchtpu.aot.fill: filling a TPU compile cache)
