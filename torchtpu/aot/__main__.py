"""python -m torchtpu.aot: compile what a script runs on tpu for a TPU topology.

    python -m torchtpu.aot --topology v6e:2x2 SCRIPT [ARGS...]
    python -m torchtpu.aot --topology v5e:2x2 -m torchtpu.demo --steps 2 --no-cpu-check
    python -m torchtpu.aot --topology v5e:2x2 --dump-dir DIR
    python -m torchtpu.aot --topology v5e:2x2 --fill-cache DIR SCRIPT [ARGS...]

Runs the script here (on the execution plugin) with program dumps on, then
compiles every program it ran for the topology with libtpu and prints the
report: per program the HBM it needs per device against the chip's, its
flops and bytes, and a roofline estimate; "runs" counts executions over the
whole script. Exit status 1 if a program does not compile or does not fit.

With --fill-cache DIR it instead writes every program the script compiles,
compiled for the topology, into the persistent compile cache DIR, under the
namespace a libtpu client for that chip reads: a first run on the TPU host
with TORCHTPU_CACHE_DIR=DIR (and this torchtpu build) compiles nothing. It
prints per program compiled / already cached / failed, and a summary. Exit
status 1 if a program failed.
"""
import argparse
import os
import runpy
import sys

import torch

import torchtpu  # noqa: F401  (device tpu)
import torchtpu.aot

from . import AotCompileError, DoesNotFitError, _captured, _check, _compiling_everything, _read_dir, _record
from . import compile_programs


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m torchtpu.aot", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--topology", default="v5e:2x2", help="e.g. v5e:2x2, v6e:2x2, v4:2x2x1, v5p:2x2x1")
    p.add_argument("--replicas", type=int, default=None, help="devices each program spans (default: all)")
    p.add_argument("--all", action="store_true", help="list every program (default: the 25 costliest)")
    p.add_argument("--dump-dir", help="compile the programs already in DIR instead of running a script")
    p.add_argument("--fill-cache", metavar="DIR", help="write the script's programs, compiled for the topology, into the compile cache DIR")
    p.add_argument("-m", dest="module", help="run a module as a script, like python -m")
    p.add_argument("script", nargs="?", help="script to run, then its arguments")
    # Everything after the script or -m MODULE belongs to it, as with python.
    cut = len(argv)
    for i, a in enumerate(argv):
        if a == "-m":
            cut = i + 2
            break
        if not a.startswith("-") and (i == 0 or argv[i - 1] not in ("--topology", "--replicas", "--dump-dir", "--fill-cache")):
            cut = i + 1
            break
    ns = p.parse_args(argv[:cut])
    ns.args = argv[cut:]
    if ns.fill_cache and (ns.dump_dir or not (ns.module or ns.script)):
        p.error("--fill-cache DIR needs a SCRIPT or -m MODULE to run (not --dump-dir)")
    if not (ns.dump_dir or ns.module or ns.script):
        p.error("give a SCRIPT, -m MODULE or --dump-dir DIR")
    return ns


def _run_script(ns):
    """Runs the script while recording its programs; returns (program
    triples, unattributed runs, peak bytes)."""
    with _compiling_everything():
        counter = _record(lambda counter: _run_main(ns))
    return _captured(counter), counter.unattributed, torch.tpu.max_memory_allocated()


def _run_main(ns):
    """Runs the script or module as __main__ with its own argv."""
    saved = sys.argv
    try:
        if ns.module:
            sys.argv = [ns.module] + ns.args
            runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [ns.script] + ns.args
            runpy.run_path(ns.script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        sys.argv = saved


def _fill(ns):
    from .fill import fill_cache, recording

    torchtpu.aot.target(ns.topology)  # a bad topology fails before the script runs
    with recording() as programs:
        _run_main(ns)
    report = fill_cache(programs, ns.topology, ns.fill_cache)
    print(report.format())
    return 1 if report.failures else 0


def main(argv=None):
    ns = _parse(sys.argv[1:] if argv is None else argv)
    ok, why = torchtpu.aot.available()
    if not ok:
        print(f"torchtpu.aot: {why}", file=sys.stderr)
        return 2
    if ns.fill_cache:
        return _fill(ns)
    if ns.dump_dir:
        programs, unattributed, live_peak = _read_dir(ns.dump_dir), 0, 0
        capture = f"programs in {ns.dump_dir} (each counted once)"
    else:
        programs, unattributed, live_peak = _run_script(ns)
        what = f"-m {ns.module}" if ns.module else os.path.basename(ns.script)
        capture = f"per-op eager programs of `{what}` (runs: whole script)"
    report = compile_programs(programs, ns.topology, replicas=ns.replicas, capture=capture)
    report.unattributed = unattributed
    report.live_peak_bytes = live_peak
    report.scope = "script run" if not ns.dump_dir else "directory"
    print(report.format(limit=0 if ns.all else 25))
    try:
        _check(report)
    except (AotCompileError, DoesNotFitError) as e:
        print(f"torchtpu.aot: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
