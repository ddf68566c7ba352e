"""Host cost of the C++ glue alone, without the engine.

    .venv/bin/python benchmarks/glue_overhead.py [--iters 20000] [--repeat 5]

An op whose outputs are all empty never reaches the engine (nothing to
compute), so timing ops on 0-element tensors measures what the dispatcher,
autograd and the glue (device check, meta-result cache, output allocation,
argument packing) cost per call. CPU eager on the same empty tensors is the
reference. Reports the median of --repeat runs.
"""
import argparse
import statistics
import time

import torch

import torchtpu  # noqa: F401


def per_call(fn, iters, repeat):
    for _ in range(200):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    cases = {
        "x.add(y)": lambda x, y: x.add(y),
        "x.add(y, alpha=2)": lambda x, y: x.add(y, alpha=2),
        "x.mul(2.0)": lambda x, y: x.mul(2.0),
        "x.add_(y)": lambda x, y: x.add_(y),
        "torch.where(x > 0, x, y)": lambda x, y: torch.where(x > 0, x, y),
    }
    xc, yc = torch.empty(0), torch.empty(0)
    xt, yt = xc.to("tpu"), yc.to("tpu")
    print(f"per call on 0-element float32 tensors (engine not reached), "
          f"median of {a.repeat} x {a.iters} calls:")
    for name, fn in cases.items():
        cpu = per_call(lambda: fn(xc, yc), a.iters, a.repeat)
        tpu = per_call(lambda: fn(xt, yt), a.iters, a.repeat)
        print(f"  {name:28s} cpu {cpu * 1e6:6.2f} us   tpu {tpu * 1e6:6.2f} us"
              f"   tpu - cpu {(tpu - cpu) * 1e6:+6.2f} us")


if __name__ == "__main__":
    main()
