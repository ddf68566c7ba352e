"""Cold start: how long a fresh process takes to its first training losses,
torchtpu (strict, fused, torch.compile) against the same model in JAX, and
how long libtpu takes to compile those programs for TPU topologies.

    .venv/bin/python benchmarks/coldstart.py [--quick] [--json FILE]
        [--models gpt,llama] [--modes strict,fused,compiled]
        [--topologies v5e:2x2,v6e:2x2 | none] [--analyze] [--no-jax] [--keep DIR]
        [--pytorch-floor]

Per model (the demo GPT at its default sizes; the LLaMA-style decoder of
benchmarks/llama.py at d=256, 4 layers, 4 heads, batch 8x128, vocab 512)
and mode, one training step (forward, backward, AdamW) runs twice in a
fresh process with empty caches (TORCHTPU_CACHE_DIR and
TORCHINDUCTOR_CACHE_DIR, where PyTorch keeps its AOTAutograd cache: new
directories; the programs are dumped by a second, untimed process, since
dumping makes strict mode compile at the op). Reported: import +
setup seconds (process start to model, optimizer and batch on tpu), then
seconds from the start of the step loop to the first and the second loss
on the host (.item()), the engine's compiles and compile seconds. Every
program dumped during the two steps is then compiled by libtpu for each
topology (torchtpu.aot.compile_programs, one replica: the programs as a
single chip runs them), in a fresh process per topology: the sum of the
per-program compile seconds and the wall time of the whole set.

The same model written in JAX (benchmarks/jax_models.py) runs as one
jitted step on JAX's XLA CPU backend (JAX_PLATFORMS=cpu, no persistent
cache), and its lowered StableHLO goes through the same libtpu compile.
Ratios are torchtpu / JAX. Every timing is its own fresh process; the
processes run one after another.

--pytorch-floor adds two rows that run no program of ours: the same step
on CPU tensors under torch.compile with PyTorch's own backends, "eager"
(Dynamo's tracing only, the graph run by ATen) and "aot_eager" (Dynamo and
AOTAutograd's tracing, no compiler). They are the time PyTorch's
front end alone takes to the 2nd loss, which no torch.compile backend can
go under.

--analyze adds where the compile time goes: StableHLO ops by kind in our
fused windows and compiled graphs vs JAX's lowered step, and a compile
matrix (program x compiler: the XLA CPU plugin torchtpu runs on, jaxlib's
XLA CPU compiler, libtpu) that separates bigger programs from a slower
compiler. --keep DIR keeps every program and child result there.
"""
import argparse
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("strict", "fused", "compiled")
# The same step on CPU tensors under torch.compile with PyTorch's own
# backends (--pytorch-floor): row name -> backend.
FLOOR = {"cpu-dynamo": "eager", "cpu-aot": "aot_eager"}
MODELS = ("gpt", "llama")
TOPOLOGIES = ("v5e:2x2", "v6e:2x2")

# Sizes: the demo GPT's defaults (see benchmarks/compile.py) and the
# LLaMA-style decoder's; --quick shrinks both to seconds.
SIZES = {
    "gpt": dict(d=64, layers=2, heads=4, block=64, batch=16),
    "llama": dict(d=256, layers=4, heads=4, block=128, batch=8, vocab=512),
}
QUICK = {
    "gpt": dict(d=32, layers=1, heads=2, block=16, batch=4),
    "llama": dict(d=32, layers=1, heads=2, block=16, batch=2, vocab=64),
}


def demo_vocab():
    """The demo's character vocabulary size, read without importing torch."""
    path = os.path.join(HERE, os.pardir, "torchtpu", "data", "lighthouse.txt")
    with open(path, encoding="utf-8") as f:
        return len(set(f.read()))


def sizes_for(model, quick):
    s = dict((QUICK if quick else SIZES)[model])
    s.setdefault("vocab", demo_vocab())
    return s


# ------------------------------------------------------------- op counts

_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"?((?:stablehlo|chlo|mhlo|func|sdy)\.[a-z_]+)\b')


def op_counts(text):
    """StableHLO (and chlo/func) operations by kind in MLIR text, one per
    line that starts an operation. JAX's private helper functions are
    counted once however often they are called."""
    c = Counter()
    for line in text.splitlines():
        m = _OP.match(line)
        if m:
            c[m.group(1)] += 1
    return c


def program_stats(programs):
    """Total ops, ops by kind and text bytes over (name, text) pairs."""
    kinds = Counter()
    size = 0
    for _, text in programs:
        kinds += op_counts(text)
        size += len(text)
    return {"programs": len(programs), "ops": sum(kinds.values()), "bytes": size,
            "kinds": dict(kinds.most_common())}


def read_programs(d):
    out = []
    if d is None:  # a row that runs no program of ours
        return out
    for f in sorted(os.listdir(d)):
        if f.endswith(".mlir"):
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                out.append((f[:-len(".mlir")], fh.read()))
    return out


# ---------------------------------------------------------------- children
# Each runs in its own fresh process and writes one JSON object to --out.


# torch.set_float32_matmul_precision -> the same XLA precision in JAX
JAX_PRECISION = {"highest": "highest", "high": "high", "medium": "bfloat16"}


def child_torch(a):
    sys.path.insert(0, HERE)
    import numpy as np
    import torch
    import torchtpu
    import torchtpu.debug
    from torchtpu.demo import GPT
    from llama import Llama

    s = sizes_for(a.model, a.quick)
    torch.set_float32_matmul_precision(a.precision)
    torch.manual_seed(0)
    if a.model == "gpt":
        model = GPT(s["vocab"], d=s["d"], layers=s["layers"], heads=s["heads"], block=s["block"])
    else:
        model = Llama(s["vocab"], d=s["d"], layers=s["layers"], heads=s["heads"], block=s["block"])
    dev = "cpu" if a.mode in FLOOR else "tpu"
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(0)  # the data of jax_models.tokens
    seq = torch.from_numpy(rng.integers(0, s["vocab"], size=(s["batch"], s["block"] + 1), dtype=np.int64))
    x, y = seq[:, :-1].contiguous().to(dev), seq[:, 1:].contiguous().to(dev)

    def step(x, y):
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if a.mode == "compiled":
        import torchtpu.dynamo
        torchtpu.dynamo.register()
        step = torch.compile(step, backend="tpu")
        mode = None
    elif a.mode in FLOOR:
        step = torch.compile(step, backend=FLOOR[a.mode])
        mode = None
    else:
        mode = a.mode
    torch.tpu.synchronize()
    dump = os.environ.get("TORCHTPU_DUMP_DIR")
    before_files = set(os.listdir(dump)) if dump else set()
    m0 = torchtpu.debug.metrics()
    log0 = len(torchtpu.debug.compiles())
    setup = time.time() - a.t0

    t0 = time.perf_counter()
    losses, marks = [], []
    for _ in range(2):
        if mode:
            with torchtpu.set_eager_mode(mode):
                losses.append(step(x, y).item())
        else:
            losses.append(step(x, y).item())
        marks.append(time.perf_counter() - t0)
    m1 = torchtpu.debug.metrics()
    log = torchtpu.debug.compiles()[log0:]
    step_dir = None
    if dump:
        new = sorted(f for f in set(os.listdir(dump)) - before_files if f.endswith(".mlir"))
        step_dir = os.path.join(a.work, "programs")
        os.makedirs(step_dir, exist_ok=True)
        for f in new:
            shutil.copy(os.path.join(dump, f), step_dir)
    return {
        "model": a.model, "mode": a.mode, "sizes": s,
        "setup_s": setup, "first_loss_s": marks[0], "second_loss_s": marks[1],
        "losses": losses,
        "compiles": m1["compiles"] - m0["compiles"],
        "compile_s": m1["compile_seconds"] - m0["compile_seconds"],
        "setup_compiles": m0["compiles"],
        "disk_hits": m1["disk_hits"],
        "fused_windows": m1["fused_windows"] - m0["fused_windows"],
        "log_compiles": len(log),
        "log_compile_s": sum(c["seconds"] for c in log),
        "programs_dir": step_dir,
        "platform": torchtpu.platform(),
    }


def child_jax(a):
    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, HERE)
    import jax
    import jax_models

    jax.config.update("jax_default_matmul_precision", JAX_PRECISION[a.precision])
    s = sizes_for(a.model, a.quick)
    step, state, (x, y) = jax_models.build(a.model, s["vocab"], s["d"], s["layers"], s["heads"],
                                           s["block"], s["batch"])
    jax.block_until_ready((state, x, y))
    setup = time.time() - a.t0
    t0 = time.perf_counter()
    losses, marks = [], []
    for _ in range(2):
        state, loss = step(*state, x, y)
        losses.append(float(loss))
        marks.append(time.perf_counter() - t0)
    cache_size = getattr(step, "_cache_size", None)
    compiles = cache_size() if cache_size else None  # jit's traced-and-compiled entries
    text = step.lower(*state, x, y).as_text()
    d = os.path.join(a.work, "programs")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"jax_{a.model}_step.mlir"), "w", encoding="utf-8") as f:
        f.write(text)
    return {"model": a.model, "mode": "jax", "sizes": s, "setup_s": setup,
            "first_loss_s": marks[0], "second_loss_s": marks[1], "losses": losses,
            "compiles": compiles, "compile_s": None, "programs_dir": d,
            "jax": jax.__version__, "platform": jax.devices()[0].platform}


def child_aot(a):
    import torchtpu.aot as aot

    t0 = time.perf_counter()
    aot.target(a.topology)  # loads libtpu and makes the topology
    load = time.perf_counter() - t0
    programs = [(n, t, 1) for n, t in read_programs(a.dir)]
    t0 = time.perf_counter()
    report = aot.compile_programs(programs, a.topology, replicas=1)
    wall = time.perf_counter() - t0
    failures = report.failures + report.hbm_failures
    per = {p.name: p.compile_seconds for p in report.programs}
    return {"topology": a.topology, "load_s": load, "programs": len(programs),
            "compiled": len(report.programs), "failures": [(n, m[:300]) for n, m in failures],
            "sum_s": sum(per.values()), "wall_s": wall, "per_program": per,
            "libtpu": report.libtpu}


class _Plugin:
    """The XLA PJRT plugin torchtpu runs on, loaded through the engine's own
    C layer (the ttpu_pjrt_* entry points torchtpu._C exports), compiling
    StableHLO text with the engine's default compile options."""

    def __init__(self):
        import torch  # noqa: F401  (the extension needs libtorch loaded)
        from torchtpu import _C
        lib = ctypes.CDLL(_C.__file__)
        vp, P = ctypes.c_void_p, ctypes.POINTER
        for name, res, args in [
                ("ttpu_plugin_find", vp, [P(ctypes.c_char_p), P(vp)]),
                ("ttpu_pjrt_plugin_load", vp, [ctypes.c_char_p, P(vp)]),
                ("ttpu_pjrt_client_create", vp, [vp, ctypes.c_int, P(vp)]),
                ("ttpu_pjrt_compile", vp, [vp, ctypes.c_char_p, ctypes.c_size_t, vp, ctypes.c_size_t, P(vp)]),
                ("ttpu_pjrt_exec_destroy", None, [vp, vp]),
                ("ttpu_status_message", ctypes.c_char_p, [vp]),
                ("ttpu_status_free", None, [vp])]:
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        self.lib = lib
        dirs = [p.encode() for p in sys.path if p and os.path.isdir(p)]
        arr = (ctypes.c_char_p * (len(dirs) + 1))(*dirs, None)
        out = vp()
        self._check(lib.ttpu_plugin_find(arr, ctypes.byref(out)))
        self.path = ctypes.cast(out, ctypes.c_char_p).value.decode()
        self.plugin, self.client = vp(), vp()
        self._check(lib.ttpu_pjrt_plugin_load(self.path.encode(), ctypes.byref(self.plugin)))
        self._check(lib.ttpu_pjrt_client_create(self.plugin, 0, ctypes.byref(self.client)))

    def _check(self, s):
        if s:
            msg = self.lib.ttpu_status_message(s).decode(errors="replace")
            self.lib.ttpu_status_free(s)
            raise RuntimeError(msg)

    _I1_HEX = re.compile(r'dense<"0x([0-9A-Fa-f]+)">(\s*:\s*tensor<((?:\d+x)+)i1>)')

    @classmethod
    def _i1_literals(cls, text):
        """Newer MLIR prints an i1 tensor constant as hex with one byte per
        element, which the plugin's older parser reads as packed bits:
        spell such constants out as true/false literals instead."""
        def spell(m):
            data = bytes.fromhex(m.group(1))
            dims = [int(x) for x in m.group(3).rstrip("x").split("x")]
            n = 1
            for x in dims:
                n *= x
            if len(data) != n:
                return m.group(0)

            def nest(flat, dims):
                if not dims:
                    return "true" if flat[0] else "false"
                step = len(flat) // dims[0]
                return "[" + ", ".join(nest(flat[i * step:(i + 1) * step], dims[1:])
                                       for i in range(dims[0])) + "]"
            return f"dense<{nest(data, dims)}>{m.group(2)}"
        return cls._I1_HEX.sub(spell, text)

    def compile(self, text):
        b = self._i1_literals(text).encode()
        e = ctypes.c_void_p()
        self._check(self.lib.ttpu_pjrt_compile(self.client, b, len(b), None, 0, ctypes.byref(e)))
        self.lib.ttpu_pjrt_exec_destroy(self.client, e)


def _jax_compiler():
    os.environ["JAX_PLATFORMS"] = "cpu"
    from jax.extend import backend
    client = backend.get_backend()
    devices = client.devices()[:1]
    return lambda text: client.compile_and_load(text, devices)


_WARMUP = """module @warmup {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""


def child_compile(a):
    """Compiles each program of a.files with one compiler, after one tiny
    warm-up compile (so one-time initialisation is not charged to the
    first program)."""
    t0 = time.perf_counter()
    if a.compiler == "ours":
        compile_one = _Plugin().compile
    elif a.compiler == "jax":
        compile_one = _jax_compiler()
    else:
        import torchtpu.aot as aot
        from torchtpu import _C
        aot.target(a.compiler)

        def compile_one(text):
            _C._aot_compile(a.compiler, text, 1, 1)
    compile_one(_WARMUP)
    load = time.perf_counter() - t0
    out = {}
    for path in a.files.split(os.pathsep):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        t0 = time.perf_counter()
        try:
            compile_one(text)
            out[path] = time.perf_counter() - t0
        except Exception as e:  # a compiler that rejects a program: say so
            out[path] = f"error: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
    return {"compiler": a.compiler, "load_s": load, "seconds": out}


CHILDREN = {"torch": child_torch, "jax": child_jax, "aot": child_aot, "compile": child_compile}


# ------------------------------------------------------------------ parent


def run_child(kind, work, env_extra=None, timeout=1800, **kw):
    """Runs one child in a fresh process (never two at a time); its JSON."""
    out = os.path.join(work, f"result-{kind}.json")
    args = [sys.executable, os.path.abspath(__file__), "--child", kind, "--work", work, "--out", out]
    for k, v in kw.items():
        if v is True:
            args.append(f"--{k}")
        elif v not in (None, False):
            args += [f"--{k}", str(v)]
    env = dict(os.environ)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    env.update(env_extra or {})
    args += ["--t0", repr(time.time())]
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"coldstart child {kind} {kw} failed (exit {p.returncode}):\n{tail}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def jax_available():
    try:
        import importlib.util
        return importlib.util.find_spec("jax") is not None
    except (ImportError, ValueError):
        return False


def libtpu_available():
    try:
        import torchtpu.aot as aot
        return aot.available()[0]
    except ImportError:
        return False


def measure(model, mode, root, quick, topologies, log, precision="highest"):
    """One row: a torchtpu mode ("strict", "fused", "compiled"), "jax", or
    a PyTorch floor row (FLOOR)."""
    work = tempfile.mkdtemp(prefix=f"{model}-{mode}-", dir=root)
    if mode == "jax":
        row = run_child("jax", work, {"JAX_PLATFORMS": "cpu"}, model=model, quick=quick,
                        precision=precision)
    elif mode in FLOOR:
        row = run_child("torch", work, {"TORCHINDUCTOR_CACHE_DIR": os.path.join(work, "inductor")},
                        model=model, mode=mode, quick=quick, precision=precision)
        row["compiles"] = row["compile_s"] = None
    else:
        # The timed process does not dump: while programs are dumped, strict
        # mode compiles at the op instead of on its compile threads. A
        # second process, untimed, with a cache of its own, dumps the same
        # programs (a program's signature does not depend on where it
        # compiled).
        # Both caches start empty: the engine's (TORCHTPU_CACHE_DIR) and
        # PyTorch's (TORCHINDUCTOR_CACHE_DIR: the AOTAutograd cache that
        # torch.compile's warm start reads).
        cache, dump = os.path.join(work, "cache"), os.path.join(work, "dump")
        os.makedirs(cache)
        os.makedirs(dump)
        row = run_child("torch", work, {"TORCHTPU_CACHE_DIR": cache,
                                        "TORCHINDUCTOR_CACHE_DIR": os.path.join(work, "inductor")},
                        model=model, mode=mode, quick=quick, precision=precision)
        dumped = run_child("torch", work, {"TORCHTPU_CACHE_DIR": os.path.join(work, "cache-dump"),
                                           "TORCHINDUCTOR_CACHE_DIR": os.path.join(work, "inductor-dump"),
                                           "TORCHTPU_DUMP_DIR": dump},
                           model=model, mode=mode, quick=quick, precision=precision)
        row["programs_dir"] = dumped["programs_dir"]
    progs = read_programs(row["programs_dir"])
    row["program_stats"] = program_stats(progs)
    row["libtpu"] = {}
    log(f"  {model:6s} {mode:10s} setup {row['setup_s']:6.2f} s, 1st loss {row['first_loss_s']:6.2f} s, "
        f"2nd loss {row['second_loss_s']:6.2f} s, {len(progs)} programs, {row['program_stats']['ops']} ops")
    for topo in (topologies if progs else []):
        r = run_child("aot", work, {"TORCHTPU_CACHE_DIR": os.path.join(work, "aot-cache")},
                      dir=row["programs_dir"], topology=topo)
        row["libtpu"][topo] = r
        log(f"    libtpu {topo}: {r['compiled']}/{r['programs']} programs, sum {r['sum_s']:.2f} s, "
            f"wall {r['wall_s']:.2f} s (load {r['load_s']:.2f} s)"
            + (f", {len(r['failures'])} FAILED: {r['failures'][0][1][:120]}" if r["failures"] else ""))
    return row


def load_average():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def _ratio(a, b):
    return a / b if a is not None and b else None


def fmt_table(result):
    rows, topos = result["rows"], result["topologies"]
    jax = {r["model"]: r for r in rows if r["mode"] == "jax"}
    head = (f"{'model':6s} {'mode':10s} {'setup':>6s} {'1st':>6s} {'2nd':>6s} {'x jax':>6s} "
            f"{'comp':>5s} {'comp s':>6s} {'progs':>5s} {'ops':>6s}")
    for t in topos:
        head += f" | {t + ' sum':>12s} {'wall':>6s} {'x jax':>6s}"
    lines = [f"cold start (seconds; fresh process each, empty caches; float32 matmul precision "
             f"{result.get('precision', 'highest')}; libtpu 'x jax' compares wall times; load average "
             f"{' '.join(f'{x:.2f}' for x in result['load_average_before'] or [])} before, "
             f"{' '.join(f'{x:.2f}' for x in result['load_average_after'] or [])} after)", head]
    for r in rows:
        j = jax.get(r["model"])
        ratio = _ratio(r["second_loss_s"], j["second_loss_s"]) if j and r is not j else None
        comp = "-" if r["compiles"] is None else str(r["compiles"])
        comp_s = "-" if r["compile_s"] is None else f"{r['compile_s']:.2f}"
        line = (f"{r['model']:6s} {r['mode']:10s} {r['setup_s']:6.2f} {r['first_loss_s']:6.2f} "
                f"{r['second_loss_s']:6.2f} {(f'{ratio:.2f}' if ratio else '-'):>6s} {comp:>5s} {comp_s:>6s} "
                f"{r['program_stats']['programs']:5d} {r['program_stats']['ops']:6d}")
        for t in topos:
            a = r["libtpu"].get(t)
            if not a:
                line += f" | {'-':>12s} {'-':>6s} {'-':>6s}"
                continue
            ja = j["libtpu"].get(t) if j else None
            x = _ratio(a["wall_s"], ja["wall_s"]) if ja and r is not j else None
            fail = "!" if a["failures"] else ""
            line += f" | {a['sum_s']:11.2f}{fail or ' '} {a['wall_s']:6.2f} {(f'{x:.2f}' if x else '-'):>6s}"
        lines.append(line)
    lines.append("setup: process start to model, optimizer and batch on the device; 1st/2nd: from the "
                 "step loop's start to each loss on the host; x jax: torchtpu / JAX (2nd loss; libtpu "
                 "compile sum); comp: engine compiles in the two steps; ops: StableHLO ops in the "
                 "programs of the two steps; libtpu sum: per-program compile seconds added up, wall: "
                 "the whole set (one replica; ! = some programs failed)"
                 + ("; cpu-dynamo / cpu-aot: the step on CPU tensors under torch.compile with "
                    "PyTorch's eager / aot_eager backend (no program of ours: PyTorch's tracing "
                    "alone)" if any(r["mode"] in FLOOR for r in rows) else ""))
    return "\n".join(lines)


# ---------------------------------------------------------------- analysis

KEY_KINDS = ("stablehlo.reshape", "stablehlo.slice", "stablehlo.convert", "stablehlo.pad",
             "stablehlo.scatter", "stablehlo.gather", "stablehlo.dot_general",
             "stablehlo.broadcast_in_dim", "stablehlo.constant", "stablehlo.transpose",
             "stablehlo.concatenate", "stablehlo.select", "stablehlo.compare",
             "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice", "stablehlo.reduce",
             "stablehlo.iota", "func.call")


def analyze(result, root, topologies, log):
    """Op counts by kind, and the compile matrix (program x compiler)."""
    rows = result["rows"]
    analysis = {"models": {}}
    compilers = ["ours"] + (["jax"] if jax_available() else []) + list(topologies[:1])
    for model in sorted({r["model"] for r in rows}):
        by_mode = {r["mode"]: r for r in rows if r["model"] == model}
        sets = {}
        for mode in ("fused", "compiled", "jax"):
            if mode in by_mode:
                d = by_mode[mode]["programs_dir"]
                sets[mode] = [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".mlir")]
        counts = {m: by_mode[m]["program_stats"] for m in sets}
        files = [f for fs in sets.values() for f in fs]
        matrix = {}
        work = tempfile.mkdtemp(prefix=f"analyze-{model}-", dir=root)
        for comp in compilers:
            if comp in topologies:  # libtpu per-program seconds: measured in the benchmark already
                for m, fs in sets.items():
                    per = by_mode[m]["libtpu"].get(comp, {}).get("per_program", {})
                    for f in fs:
                        name = os.path.basename(f)[:-len(".mlir")]
                        if name in per:
                            matrix.setdefault(f, {})[f"libtpu {comp}"] = per[name]
                continue
            try:
                r = run_child("compile", work, {"TORCHTPU_CACHE_DIR": os.path.join(work, "cache")},
                              compiler=comp, files=os.pathsep.join(files))
            except RuntimeError as e:
                log(f"  compiler {comp}: {e}")
                continue
            for f, s in r["seconds"].items():
                matrix.setdefault(f, {})[{"ours": "xla_cpu_pjrt (ours)", "jax": "jaxlib XLA CPU"}[comp]] = s
        programs = []
        for m, fs in sets.items():
            for f in fs:
                with open(f, encoding="utf-8") as fh:
                    text = fh.read()
                c = op_counts(text)
                programs.append({"set": m, "name": os.path.basename(f)[:-len(".mlir")],
                                 "ops": sum(c.values()), "bytes": len(text),
                                 "compile_s": matrix.get(f, {})})
        excess = {}
        if sets.get("fused") and "jax" in counts:
            # one fused window holds about one whole step: compare the
            # largest with JAX's step, kind by kind
            with open(max(sets["fused"], key=os.path.getsize), encoding="utf-8") as fh:
                fk = op_counts(fh.read())
            jk = counts["jax"]["kinds"]
            excess = {k: [fk[k], jk.get(k, 0)] for k in sorted(
                (k for k in fk if fk[k] > jk.get(k, 0)), key=lambda k: jk.get(k, 0) - fk[k])}
        analysis["models"][model] = {"counts": counts, "programs": programs,
                                     "largest_window_over_jax": excess}
    return analysis


def fmt_analysis(analysis):
    lines = []
    for model, a in analysis["models"].items():
        counts = a["counts"]
        sets = list(counts)
        lines.append(f"{model}: StableHLO ops by kind (all programs of the two steps; jax: its one step)")
        lines.append(f"  {'kind':30s}" + "".join(f" {s:>9s}" for s in sets))
        kinds = set(KEY_KINDS)
        for s in sets:
            kinds |= set(list(counts[s]["kinds"])[:12])
        order = sorted(kinds, key=lambda k: -max(counts[s]["kinds"].get(k, 0) for s in sets))
        for k in order:
            if any(counts[s]["kinds"].get(k, 0) for s in sets):
                lines.append(f"  {k:30s}" + "".join(f" {counts[s]['kinds'].get(k, 0):9d}" for s in sets))
        lines.append(f"  {'total ops':30s}" + "".join(f" {counts[s]['ops']:9d}" for s in sets))
        lines.append(f"  {'text KiB':30s}" + "".join(f" {counts[s]['bytes'] / 1024:9.0f}" for s in sets))
        lines.append(f"  {'programs':30s}" + "".join(f" {counts[s]['programs']:9d}" for s in sets))
        if a["largest_window_over_jax"]:
            top = list(a["largest_window_over_jax"].items())[:10]
            lines.append("  largest fused window vs JAX's step, kinds it has more of: "
                         + ", ".join(f"{k.split('.')[-1]} {f} vs {j}" for k, (f, j) in top))
        comps = []
        for p in a["programs"]:
            for c in p["compile_s"]:
                if c not in comps:
                    comps.append(c)
        lines.append(f"{model}: compile seconds, program x compiler")
        lines.append(f"  {'program':38s} {'ops':>6s} {'KiB':>6s}" + "".join(f" {c:>20s}" for c in comps))
        for p in a["programs"]:
            cells = []
            for c in comps:
                v = p["compile_s"].get(c)
                cells.append(f" {v:20.2f}" if isinstance(v, float) else f" {(v or '-')[:20]:>20s}")
            lines.append(f"  {(p['set'] + ' ' + p['name'])[:38]:38s} {p['ops']:6d} {p['bytes'] / 1024:6.0f}"
                         + "".join(cells))
    return "\n".join(lines)


# -------------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny model sizes")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--topologies", default=",".join(TOPOLOGIES),
                    help="libtpu targets, comma separated; 'none' skips libtpu")
    ap.add_argument("--no-jax", action="store_true", help="skip the JAX rows")
    ap.add_argument("--pytorch-floor", action="store_true",
                    help="add the step on CPU tensors under torch.compile with PyTorch's eager and "
                         "aot_eager backends: its tracing alone")
    ap.add_argument("--analyze", action="store_true", help="op counts and the compile matrix too")
    ap.add_argument("--precision", default="highest", choices=sorted(JAX_PRECISION),
                    help="float32 matmul precision of both sides (torch.set_float32_matmul_precision "
                         "and JAX's default_matmul_precision; default: PyTorch's, highest)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--keep", help="keep programs and results in this directory")
    # a child process (internal)
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    for k in ("work", "out", "model", "mode", "dir", "topology", "compiler", "files"):
        ap.add_argument(f"--{k}", help=argparse.SUPPRESS)
    ap.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.child:
        res = CHILDREN[a.child](a)
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(res, f)
        return 0

    models = [m for m in a.models.split(",") if m]
    modes = [m for m in a.modes.split(",") if m]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r} (choose from {', '.join(MODELS)})")
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r} (choose from {', '.join(MODES)})")
    topologies = [] if a.topologies in ("", "none") else a.topologies.split(",")
    if topologies and not libtpu_available():
        print("(libtpu not installed: no TPU compile figures; pip install \"torchtpu[tpu]\")")
        topologies = []
    use_jax = not a.no_jax and jax_available()
    if not use_jax and not a.no_jax:
        print("(JAX not installed: no JAX rows; .venv/bin/pip install --no-build-isolation -e \".[bench]\")")

    root = a.keep or tempfile.mkdtemp(prefix="coldstart-")
    os.makedirs(root, exist_ok=True)
    result = {"quick": a.quick, "topologies": topologies, "precision": a.precision, "load_average_before": load_average(),
              "python": sys.version.split()[0], "rows": []}
    try:
        print(f"cold start: models {','.join(models)}, modes {','.join(modes)}"
              f"{', jax' if use_jax else ''}; libtpu {','.join(topologies) or 'off'}; "
              f"load average {' '.join(f'{x:.2f}' for x in result['load_average_before'] or [])}", flush=True)
        for model in models:
            floor = list(FLOOR) if a.pytorch_floor else []
            for mode in modes + floor + (["jax"] if use_jax else []):
                result["rows"].append(measure(model, mode, root, a.quick, topologies,
                                              lambda s: print(s, flush=True), a.precision))
        result["load_average_after"] = load_average()
        print()
        print(fmt_table(result))
        if a.analyze:
            result["analysis"] = analyze(result, root, topologies, lambda s: print(s, flush=True))
            print()
            print(fmt_analysis(result["analysis"]))
        if a.json:
            with open(a.json, "w", encoding="utf-8") as f:
                json.dump(result, f, indent=1)
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
