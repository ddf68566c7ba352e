"""Loops over sizes, as PyTorch's device tests write them: programs
compiled and seconds with an empty cache, buckets on against off.

    .venv/bin/python benchmarks/shapes/sweeps.py [--sizes 512] [--workloads index_put,fills]

index_put: a random walk of n steps (a float64 uniform_ fill, cumsum, a
long copy), randn of its range and of n, index_put with accumulate, each
checked against the CPU (PyTorch's test_index_put_accumulate_duplicate_indices
runs this loop for n in 1..511). fills: zeros, ones, arange and randn of
each size, summed. One fresh process per row, disk cache off; the load
average is printed. Compile counts are exact, times are not.
"""
import argparse
import os
import subprocess
import sys
import time

WORK = {
    "index_put": """
for n in range(1, N):
    delta = torch.empty(n, dtype=torch.double, device="tpu").uniform_(-1, 1)
    indices = delta.cumsum(0).long()
    inp = torch.randn(indices.abs().max() + 1, device="tpu")
    values = torch.randn(n, device="tpu")
    out = inp.index_put((indices,), values, accumulate=True)
    want = inp.cpu().index_put((indices.cpu(),), values.cpu(), accumulate=True)
    torch.testing.assert_close(out.cpu(), want)
""",
    "fills": """
for n in range(1, N):
    x = torch.zeros(n, device="tpu") + torch.ones(n, device="tpu")
    x = x + torch.arange(n, device="tpu") + torch.randn(n, device="tpu")
    assert x.sum().isfinite().item()
""",
}


def one(work, n):
    import warnings

    import torch
    import torchtpu

    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    t = time.perf_counter()
    exec(WORK[work], {"torch": torch, "N": n})
    torch.tpu.synchronize()
    print(f"{torchtpu.debug.metrics()['compiles']} {time.perf_counter() - t:.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, default=512, help="loop over 1..N-1")
    ap.add_argument("--workloads", default="index_put,fills")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        return one(a.one[0], int(a.one[1]))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| workload | buckets off | buckets on (default) |")
    print("|---|---|---|")
    for work in a.workloads.split(","):
        cells = []
        for buckets in ("off", ""):
            env = dict(os.environ, TORCHTPU_DISK_CACHE="0", TORCHTPU_BUCKETS=buckets,
                       TORCHTPU_RECOMPILE_WARN="0")
            r = subprocess.run([sys.executable, __file__, "--one", work, str(a.sizes)],
                               env=env, capture_output=True, text=True)
            if r.returncode:
                sys.exit(r.stderr[-3000:])
            compiles, secs = r.stdout.split()
            cells.append(f"{compiles} programs, {secs} s")
        print(f"| {work}, sizes 1..{a.sizes - 1} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
