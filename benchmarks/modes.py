"""Eager modes side by side: per-op overhead, training steps/s, cold vs warm
compile cache.

    .venv/bin/python benchmarks/modes.py [--quick]

1. Per-op overhead of x.add(y) on 1k float32 elements: PyTorch CPU eager,
   tpu strict (enqueue), tpu fused (record; windows run at the op limit).
2. Training steps/s of an MLP and of the demo transformer (AdamW, a host
   read of the loss every step): CPU eager, tpu strict, tpu fused. Rounds
   alternate between the modes and the median round counts, so load on the
   machine hits every mode alike.
3. Demo start in a fresh process: with an empty persistent compile cache
   (cold) and again with the cache the first run filled (warm).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torchtpu
from torchtpu.demo import GPT, batches, load_text


def per_op(iters):
    xc, yc = torch.randn(1000), torch.randn(1000)
    xt, yt = xc.to("tpu"), yc.to("tpu")

    def run(fn, sync):
        for _ in range(iters):  # warm-up: compiles whatever it needs
            fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        return (time.perf_counter() - t0) / iters

    cpu = run(lambda: xc.add(yc), lambda: None)
    strict = run(lambda: xt.add(yt), torch.tpu.synchronize)
    with torchtpu.set_eager_mode("fused"):
        fused = run(lambda: xt.add(yt), torch.tpu.synchronize)
    return cpu, strict, fused


def mlp_setup(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                          nn.Linear(512, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256).to(device)
    y = torch.randint(0, 10, (64,)).to(device)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def gpt_setup(device):
    _, chars, data = load_text()
    torch.manual_seed(0)
    model = GPT(len(chars), d=64, layers=2, heads=4, block=64).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = next(iter(batches(data, 1, 16, 64)))
    x, y = x.to(device), y.to(device)

    def step():
        loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def steps_per_second(setup, rounds, steps):
    """Median steps/s per configuration over alternating rounds."""
    configs = {"cpu eager": ("cpu", None), "tpu strict": ("tpu", "strict"),
               "tpu fused": ("tpu", "fused")}
    fns = {}
    for name, (device, mode) in configs.items():
        fns[name] = setup(device)
        if mode:
            with torchtpu.set_eager_mode(mode):
                for _ in range(3):  # compiles; fused learns its windows
                    fns[name]()
        else:
            fns[name]()
    rates = {name: [] for name in configs}
    for _ in range(rounds):
        for name, (device, mode) in configs.items():
            ctx = torchtpu.set_eager_mode(mode) if mode else None
            t0 = time.perf_counter()
            for _ in range(steps):
                fns[name]()
            rates[name].append(steps / (time.perf_counter() - t0))
            if ctx:
                ctx.__exit__(None, None, None)
    return {name: statistics.median(r) for name, r in rates.items()}


DEMO_START = textwrap.dedent("""
    import sys, time, runpy
    t0 = time.perf_counter()
    import torch, torchtpu
    sys.argv = ["demo", "--steps", "2", "--no-cpu-check"]
    try:
        runpy.run_module("torchtpu.demo", run_name="__main__")
    except SystemExit:
        pass
    m = torchtpu.debug.metrics()
    print(repr((time.perf_counter() - t0, m["compiles"], m["compile_seconds"],
                m["disk_hits"], m["disk_load_seconds"])))
""")


def demo_start(mode):
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHTPU_CACHE_DIR": cache, "TORCHTPU_EAGER_MODE": mode}
        out = []
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", DEMO_START], env=env, capture_output=True,
                               text=True, timeout=900)
            if r.returncode:
                raise RuntimeError(r.stderr[-2000:])
            out.append(eval(r.stdout.strip().splitlines()[-1]))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="fewer rounds and steps")
    a = p.parse_args()
    rounds, steps, iters = (2, 5, 2000) if a.quick else (5, 10, 5000)
    print(f"platform: {torchtpu.platform()}")
    cpu, strict, fused = per_op(iters)
    print(f"\n1. per-op overhead, x.add(y), 1k float32, mean of {iters} calls")
    print(f"   cpu eager   {cpu * 1e6:7.2f} us")
    print(f"   tpu strict  {strict * 1e6:7.2f} us  ({strict / cpu:.1f}x cpu)")
    print(f"   tpu fused   {fused * 1e6:7.2f} us  ({fused / cpu:.1f}x cpu)")
    for title, setup in (("MLP 256-512-512-10, batch 64, AdamW", mlp_setup),
                         ("demo transformer d=64 2 layers, 16x64 tokens, AdamW", gpt_setup)):
        r = steps_per_second(setup, rounds, steps)
        print(f"\n2. training steps/s, {title} (median of {rounds} alternating rounds of {steps})")
        for name, v in r.items():
            print(f"   {name:11s} {v:8.1f} steps/s")
        print(f"   fused / strict = {r['tpu fused'] / r['tpu strict']:.2f}x, "
              f"fused / cpu eager = {r['tpu fused'] / r['cpu eager']:.2f}x")
    print("\n3. demo start (2 steps) in a fresh process, empty vs warm compile cache")
    for mode in ("strict", "fused"):
        (t1, c1, cs1, h1, _), (t2, c2, _, h2, hs2) = demo_start(mode)
        print(f"   {mode:6s} cold {t1:6.2f} s ({c1} compiles, {cs1:.2f} s compiling)   "
              f"warm {t2:6.2f} s ({c2} compiles, {h2} loaded from disk in {hs2:.2f} s)")


if __name__ == "__main__":
    main()
