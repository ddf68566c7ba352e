"""A bf16 N x N x N matmul through torchtpu, JAX and torch on the same device.

    python benchmarks/gpu_matmul.py [--n 8192] [--iters 20] [--json FILE]

On the machine with an NVIDIA GPU, torchtpu runs on the XLA CUDA plugin
(torch.tpu is the GPU); JAX (if installed) runs the same matmul on its own
CUDA backend, and torch.cuda (if available) on cuBLAS. Elsewhere it measures
whatever plugin is behind tpu (the XLA CPU plugin: use a small --n). Each
side: one warm-up call (compiles), then --iters calls timed until the result
is on the device (synchronize / block_until_ready). Prints TFLOP/s per side.
"""
import argparse
import json
import time

import torch


def timed(fn, sync, iters):
    out = fn()
    sync(out)
    start = time.perf_counter()
    for _ in range(iters):
        out = fn()
    sync(out)
    return (time.perf_counter() - start) / iters, out


def torchtpu_side(n, iters):
    import torchtpu  # noqa: F401

    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(torch.bfloat16).to("tpu")
    b = torch.randn(n, n, generator=g).to(torch.bfloat16).to("tpu")
    seconds, out = timed(lambda: a @ b, lambda _: torch.tpu.synchronize(), iters)
    # Spot-check one row against float32 on the CPU (bf16 inputs, f32 math).
    ref = a[:1].cpu().float() @ b.cpu().float()
    err = (out[:1].cpu().float() - ref).abs().max().item() / ref.abs().max().item()
    return {"seconds": seconds, "platform": torchtpu.platform(), "rel_err_row0": err}


def jax_side(n, iters):
    import jax
    import jax.numpy as jnp

    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(ka, (n, n), dtype=jnp.bfloat16)
    b = jax.random.normal(kb, (n, n), dtype=jnp.bfloat16)
    mm = jax.jit(lambda x, y: x @ y)
    seconds, _ = timed(lambda: mm(a, b), lambda o: o.block_until_ready(), iters)
    return {"seconds": seconds, "platform": str(jax.devices()[0].platform)}


def cuda_side(n, iters):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    seconds, _ = timed(lambda: a @ b, lambda _: torch.cuda.synchronize(), iters)
    return {"seconds": seconds, "platform": torch.cuda.get_device_name()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    flops = 2.0 * args.n ** 3
    results = {"n": args.n, "iters": args.iters}
    sides = [("torchtpu", torchtpu_side), ("jax", jax_side)]
    if torch.cuda.is_available():
        sides.append(("torch.cuda", cuda_side))
    for name, side in sides:
        try:
            r = side(args.n, args.iters)
            r["tflops"] = flops / r["seconds"] / 1e12
            print(f"{name:10s} {r['tflops']:8.1f} TFLOP/s  ({r['seconds'] * 1e3:.2f} ms/matmul, {r['platform']})")
        except Exception as e:  # one side missing must not hide the others
            r = {"error": f"{type(e).__name__}: {e}"}
            print(f"{name:10s} not measured: {r['error']}")
        results[name] = r
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
