"""QR and LU on tpu, size by size: the compile time of each op's program,
its run time, its error against the CPU's LAPACK, and the size of the
program's text (which must not grow with the matrix: the factorizations
loop at run time, one column per trip of a stablehlo.while).

    .venv/bin/python benchmarks/linalg/factorizations.py                  # 16, 64, 256
    .venv/bin/python benchmarks/linalg/factorizations.py --sizes 64:c64,300
    .venv/bin/python benchmarks/linalg/factorizations.py --sizes 8x616 --ops inv

A size is n (an n x n matrix), or bxn (a batch of b of them), with an
optional dtype: f32 (the default), f64, c64 or c128. Every compile is a real one (the persistent cache is
off); each size runs in a process of its own.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

SIZES = ["16", "64", "256", "16:c64", "64:c64", "256:c64"]
DTYPES = {"f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128"}


def one(spec):
    os.environ["TORCHTPU_DISK_CACHE"] = "0"
    dump = tempfile.mkdtemp()
    os.environ["TORCHTPU_DUMP_DIR"] = dump
    import torch
    import torchtpu  # noqa: F401
    import torchtpu.debug as dbg

    size, _, dt = spec.partition(":")
    batch, _, n = size.rpartition("x")
    n = int(n)
    lead = (int(batch),) if batch else ()
    dtype = getattr(torch, DTYPES[dt or "f32"])
    a = torch.randn(*lead, n, n, generator=torch.Generator().manual_seed(0), dtype=dtype)
    a = a + n ** 0.5 * torch.eye(n, dtype=dtype)
    b = torch.randn(*lead, n, 2, generator=torch.Generator().manual_seed(1), dtype=dtype)
    x, y = a.to("tpu"), b.to("tpu")
    cases = [
        ("qr", "linalg_qr", lambda t, _: torch.linalg.qr(t), lambda t, _: torch.linalg.qr(t)),
        ("lu", "linalg_lu_factor_ex", lambda t, _: torch.linalg.lu_factor_ex(t)[:2],
         lambda t, _: torch.linalg.lu_factor_ex(t)[:2]),
        ("solve", "_linalg_solve_ex", lambda t, r: torch.linalg.solve(t, r), lambda t, r: torch.linalg.solve(t, r)),
        ("inv", "linalg_inv_ex", lambda t, _: [torch.linalg.inv(t)], lambda t, _: [torch.linalg.inv(t)]),
    ]
    ops = os.environ.get("TTPU_BENCH_OPS")
    cases = [c[1:] for c in cases if not ops or c[0] in ops.split(",")]
    dbg.compiles(clear=True)
    for key, fn, ref in cases:
        t0 = time.perf_counter()
        got = [o.cpu() for o in fn(x, y)]
        first = time.perf_counter() - t0
        comp = dbg.compiles(clear=True)
        compile_s = sum(c["seconds"] for c in comp if key in c["what"])
        t0 = time.perf_counter()
        [o.cpu() for o in fn(x, y)]
        run = time.perf_counter() - t0
        want = ref(a, b)
        err = max(((g - w).abs().max() / w.abs().max().clamp_min(1e-30)).item() for g, w in zip(got, want))
        size = max((os.path.getsize(os.path.join(dump, f)) for f in os.listdir(dump) if key in f), default=0)
        print(f"{spec:>8}  {key:<20} compile {compile_s:6.2f} s  run {run:7.3f} s "
              f"(first call {first:6.2f} s)  max rel err vs cpu {err:.1e}  program {size} B", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=",".join(SIZES), help="e.g. 16,64:c64,300:f64,8x616")
    ap.add_argument("--ops", help="some of qr,lu,solve,inv (default: all)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one)
        return
    env = dict(os.environ)
    if args.ops:
        env["TTPU_BENCH_OPS"] = args.ops
    for spec in args.sizes.split(","):
        subprocess.run([sys.executable, __file__, "--one", spec], check=True, env=env)


if __name__ == "__main__":
    main()
