"""Compile time against run time for the XLA CPU plugin's code generators.

XLA's CPU compiler emits a fusion's loops with its newer fusion emitters
(the plugin's default) or its older loop emitters (XLA_FLAGS
--xla_cpu_use_fusion_emitters=false). Run this once each way, in fresh
processes, and compare:

    .venv/bin/python benchmarks/cpu_emitters.py
    XLA_FLAGS=--xla_cpu_use_fusion_emitters=false .venv/bin/python benchmarks/cpu_emitters.py

It prints the compile seconds of small linear-algebra programs (LU, solve,
lu_solve, SVD over a few small shapes: while loops of many small fusions)
and of small one-op programs, then the run time of a few ops over square
float32 matrices of growing size (median-free mean of 200 runs after a
warm-up; the machine's noise applies). Strict mode, disk cache off.
"""
import collections
import os
import time

os.environ.setdefault("TORCHTPU_DISK_CACHE", "0")
import torch  # noqa: E402

import torchtpu  # noqa: E402,F401
import torchtpu.debug as debug  # noqa: E402


def compile_seconds():
    torch.manual_seed(0)
    for n in (3, 4, 5):
        for b in ((), (2,), (3, 5)):
            a = torch.randn(*b, n, n, dtype=torch.float64).to("tpu")
            r = torch.randn(*b, n, 3, dtype=torch.float64).to("tpu")
            lu, piv = torch.linalg.lu_factor(a)
            torch.linalg.lu_solve(lu, piv, r).cpu()
            torch.linalg.solve(a, r).cpu()
            torch.linalg.svd(a)[1].cpu()
            x = torch.randn(*b, n, 7).to("tpu")
            (x.softmax(-1) * 2 + x.abs().sqrt()).sum(0).cpu()
            x.argmax(-1).cpu()
    secs, count = collections.Counter(), collections.Counter()
    for c in debug.compiles():
        kind = "linear algebra" if "linalg" in c["what"] else "one-op"
        secs[kind] += c["seconds"]
        count[kind] += 1
    for kind in ("linear algebra", "one-op"):
        print(f"compile, {kind:15s} {count[kind]:4d} programs {secs[kind]:6.2f} s "
              f"({1e3 * secs[kind] / max(count[kind], 1):.0f} ms each)")


def run_us(f, n=200):
    f().cpu()
    t = time.perf_counter()
    for _ in range(n):
        y = f()
    y.cpu()
    return (time.perf_counter() - t) / n * 1e6


def run_times():
    print(f"{'elements':>9s} {'sum(0)':>9s} {'argmax':>9s} {'softmax(0)':>10s} {'x+1':>9s}   (us per op)")
    for s in (64, 128, 256, 512, 2048):
        x = torch.randn(s, s).to("tpu")
        r = [run_us(lambda: x.sum(0)), run_us(lambda: x.argmax(-1)),
             run_us(lambda: x.softmax(0)), run_us(lambda: x + 1)]
        print(f"{s * s:9d} " + " ".join(f"{v:9.1f}" for v in r))


if __name__ == "__main__":
    print("XLA_FLAGS:", os.environ.get("XLA_FLAGS", ""), "| load average", os.getloadavg())
    compile_seconds()
    run_times()
