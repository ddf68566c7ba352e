"""Compile StableHLO files one by one and time each compile: wall and CPU
seconds (CPU time is steadier than wall time on a shared machine).

    .venv/bin/python benchmarks/compile_programs.py [--compiler libtpu|plugin]
        [--topology v5e:2x2] [--precision highest|default] [--rounds N] FILE...

FILEs are programs torchtpu dumped (TORCHTPU_DUMP_DIR, or coldstart.py
--keep) or JAX's lowered step (`jax.jit(f).lower(...).as_text()`).
--compiler libtpu compiles for a TPU topology (torchtpu.aot, one replica);
plugin compiles on the XLA CPU plugin torchtpu runs on, with the engine's
default options. --precision default rewrites every HIGHEST dot precision
to DEFAULT first (one bf16 pass on a TPU), to separate the program's size
from its precision.
"""
import argparse
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--compiler", choices=["libtpu", "plugin"], default="libtpu")
    ap.add_argument("--topology", default="v5e:2x2")
    ap.add_argument("--precision", choices=["highest", "default"], default="highest",
                    help="default: rewrite HIGHEST dot precision to DEFAULT before compiling")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args(argv)

    sys.path.insert(0, HERE)
    import coldstart

    if a.compiler == "libtpu":
        import torchtpu.aot as aot
        from torchtpu import _C
        ok, why = aot.available()
        if not ok:
            print(f"compile_programs: {why}", file=sys.stderr)
            return 2
        aot.target(a.topology)

        def compile_one(text):
            _C._aot_compile(a.topology, text, 1, 1)
    else:
        plugin = coldstart._Plugin()
        compile_one = plugin.compile

    texts = {}
    for f in a.files:
        with open(f, encoding="utf-8") as fh:
            t = fh.read()
        if a.precision == "default":
            t = t.replace("#stablehlo<precision HIGHEST>", "#stablehlo<precision DEFAULT>")
        texts[f] = t
    print(f"{a.compiler}{' ' + a.topology if a.compiler == 'libtpu' else ''}, precision "
          f"{a.precision}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(a.rounds):
        for f, t in texts.items():
            ops = sum(coldstart.op_counts(t).values())
            w0, c0 = time.perf_counter(), cpu_seconds()
            compile_one(t)
            print(f"  {os.path.basename(f)[:48]:48s} {ops:6d} ops  wall {time.perf_counter() - w0:7.2f} s"
                  f"  cpu {cpu_seconds() - c0:7.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
