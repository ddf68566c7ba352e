"""einsum in strict mode: one program per call (the ops of PyTorch's
composite form grouped into one window) against the composite form run op
by op (aten's einsum and its decomposition, with no contraction path: the
composite then contracts left to right, tpu in its own order), side by
side in one process.

    .venv/bin/python benchmarks/einsum_strict.py [--calls 200]

Per equation: programs launched per call, and microseconds per call once
both are compiled (a host read at the end of each timed block), median of
five alternating blocks.
"""
import argparse
import os
import statistics
import time

import torch

import torchtpu
import torchtpu.debug as debug

CASES = [
    ("bhqd,bhkd->bhqk", [(4, 8, 64, 32), (4, 8, 64, 32)]),
    ("bij,bjk->bik", [(16, 32, 48), (16, 48, 24)]),
    ("ij,jk,k->i", [(64, 256), (256, 128), (128,)]),
    ("...ii->...i", [(8, 32, 32)]),
]


def launches(fn):
    torch.tpu.synchronize()
    before = debug.metrics()["executions"]
    fn()
    torch.tpu.synchronize()
    return debug.metrics()["executions"] - before


def timed(fn, calls):
    torch.tpu.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        r = fn()
    r.cpu()
    return (time.perf_counter() - t) / calls * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    print(f"strict mode, load average {os.getloadavg()[0]:.2f}")
    print("| equation | programs per call: one program / op by op | us per call: one program / op by op |")
    print("|---|---|---|")
    composite = torch.ops.aten.einsum.default.decompose
    for eq, shapes in CASES:
        g = torch.Generator().manual_seed(0)
        ops = [torch.randn(s, generator=g).to("tpu") for s in shapes]
        # aten's einsum on both sides: torch.einsum adds opt_einsum's path
        # search in Python (about 150 us for three operands), on every device
        grouped = lambda: torch.ops.aten.einsum.default(eq, ops)  # noqa: E731
        by_op = lambda: composite(eq, ops)  # noqa: E731
        # three operands: tpu's contraction order against the left-to-right one
        torch.testing.assert_close(grouped().cpu(), by_op().cpu(), rtol=1e-4, atol=1e-4)
        n_g, n_o = launches(grouped), launches(by_op)
        tg, to = [], []
        for _ in range(5):
            tg.append(timed(grouped, args.calls))
            to.append(timed(by_op, args.calls))
        print(f"| `{eq}` | {n_g} / {n_o} | {statistics.median(tg):.1f} / {statistics.median(to):.1f} |")


if __name__ == "__main__":
    main()
