"""Per-op latency in strict mode (compile cache hit) vs PyTorch CPU eager.

    .venv/bin/python benchmarks/op_latency.py [--n 1000] [--iters 2000]

Times x.add(y) on 1k-element float32 tensors, side by side in one run:
CPU eager, tpu with a host read every call (round trip), and tpu enqueue
only (asynchronous, synchronised once at the end). `make engine-op-latency`
measures the engine's share alone (benchmarks/engine_op_latency.c: the same
add through ttpu_op_run, no PyTorch) and counts its host allocations.
"""
import argparse
import time

import torch

import torchtpu


def bench(fn, iters, sync=lambda: None):
    for _ in range(20):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t0) / iters


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--iters", type=int, default=2000)
    a = p.parse_args()
    xc, yc = torch.randn(a.n), torch.randn(a.n)
    xt, yt = xc.to("tpu"), yc.to("tpu")
    cpu = bench(lambda: xc.add(yc), a.iters)
    tpu_async = bench(lambda: xt.add(yt), a.iters, torch.tpu.synchronize)
    tpu_sync = bench(lambda: xt.add(yt).cpu(), a.iters // 4)
    print(f"add of {a.n} float32 elements, mean per call over {a.iters} calls:")
    print(f"  cpu eager                 {cpu * 1e6:8.1f} us")
    print(f"  tpu strict (enqueue)      {tpu_async * 1e6:8.1f} us   {tpu_async / cpu:6.1f}x cpu")
    print(f"  tpu strict + .cpu() read  {tpu_sync * 1e6:8.1f} us   {tpu_sync / cpu:6.1f}x cpu")
    print(f"platform: {torchtpu.platform()}")


if __name__ == "__main__":
    main()
