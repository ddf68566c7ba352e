"""A hand-written decode loop over a preallocated key/value cache (as the
reference LLaMA implementation writes one): each step writes one position,
cache[:, pos:pos + 1] = new, and attends over cache[:, :pos + 1]. Prints
the programs compiled in all, in steps 11-128 (one bucket) and after, and
checks every step's output against the CPU's.

    .venv/bin/python benchmarks/shapes/preallocated_cache.py [--steps 150]

Run it with TORCHTPU_EAGER_MODE=strict or fused and TORCHTPU_DISK_CACHE=0
for a fresh process's counts.
"""
import argparse

import torch

import torchtpu
from torchtpu import debug


def decode(dev, steps, batch=2, heads=4, dim=16, max_len=200):
    g = torch.Generator().manual_seed(1)
    ck = torch.zeros(batch, max_len, heads, dim, device=dev)
    cv = torch.zeros(batch, max_len, heads, dim, device=dev)
    outs, counts = [], []
    for pos in range(steps):
        xk, xv, q = (torch.randn(batch, 1, heads, dim, generator=g).to(dev) for _ in range(3))
        ck[:, pos:pos + 1] = xk
        cv[:, pos:pos + 1] = xv
        keys, vals = ck[:, :pos + 1], cv[:, :pos + 1]
        s = (q.transpose(1, 2) @ keys.permute(0, 2, 3, 1)) * dim ** -0.5
        outs.append((s.softmax(-1) @ vals.transpose(1, 2)).cpu())
        if dev != "cpu":
            counts.append(debug.metrics()["compiles"])
    return outs, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=150)
    a = ap.parse_args()
    want, _ = decode("cpu", a.steps)
    got, counts = decode("tpu", a.steps)
    same = all(torch.allclose(x, y, rtol=1e-5, atol=1e-5) for x, y in zip(got, want))
    ten, bucket = min(10, a.steps - 1), min(127, a.steps - 1)
    print(f"{torchtpu.get_eager_mode()}: {a.steps} steps, {counts[-1]} programs compiled, "
          f"{counts[bucket] - counts[ten]} in steps 11-128, {counts[-1] - counts[bucket]} after; "
          f"outputs {'equal' if same else 'DIFFER from'} the CPU's")


if __name__ == "__main__":
    main()
