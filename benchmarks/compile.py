"""The demo transformer's training step (forward, backward, AdamW) five ways,
side by side in one run on this machine's CPU:

    .venv/bin/pip install --no-build-isolation -e ".[bench]"   # JAX, for the comparison
    .venv/bin/python benchmarks/compile.py [--quick] [--d 64 --layers 2]
    .venv/bin/python benchmarks/compile.py --graph-times   # each compiled graph, synchronized

  tpu strict      eager, one program per op (XLA CPU plugin)
  tpu fused       eager, fused windows
  tpu compiled    torch.compile(step, backend="tpu"): the whole step
  cpu inductor    torch.compile(step) with PyTorch's default backend on CPU
  jax jit         the same model written in JAX, jax.jit on JAX's CPU backend

Rounds alternate between the five and the median round counts, so load on
the machine hits them alike. Compile times (first call) are reported too.
The JAX model has the same architecture, sizes, optimizer and data; its
initial weights differ (its own PRNG), which does not change the work.
"""
import argparse
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F

import torchtpu
import torchtpu.dynamo
from torchtpu.demo import GPT, batches, load_text


def torch_step(model, opt):
    def step(x, y):
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def make_torch(device, mode, compiled, args, vocab, x, y):
    torch.manual_seed(0)
    model = GPT(vocab, d=args.d, layers=args.layers, heads=args.heads, block=args.block).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    step = torch_step(model, opt)
    if compiled:
        step = torch.compile(step, backend=compiled)
    x, y = x.to(device), y.to(device)

    def run():
        if mode:
            with torchtpu.set_eager_mode(mode):
                return step(x, y).item()
        return step(x, y).item()
    return run


def make_jax(args, vocab, x, y):
    # JAX's CPU backend (not a libtpu that happens to be installed)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import numpy as np

    d, L, H, T = args.d, args.layers, args.heads, args.block
    key = jax.random.PRNGKey(0)

    def dense(k, i, o, bias=True):
        w = jax.random.uniform(k, (i, o), minval=-1, maxval=1) / math.sqrt(i)
        return {"w": w, "b": jnp.zeros(o)} if bias else {"w": w}

    keys = iter(jax.random.split(key, 4 + 4 * L))
    params = {"tok": jax.random.normal(next(keys), (vocab, d)),
              "pos": jax.random.normal(next(keys), (T, d)),
              "ln": {"g": jnp.ones(d), "b": jnp.zeros(d)},
              "head": dense(next(keys), d, vocab, bias=False), "blocks": []}
    for _ in range(L):
        params["blocks"].append({
            "ln1": {"g": jnp.ones(d), "b": jnp.zeros(d)}, "ln2": {"g": jnp.ones(d), "b": jnp.zeros(d)},
            "qkv": dense(next(keys), d, 3 * d), "proj": dense(next(keys), d, d),
            "fc": dense(next(keys), d, 4 * d), "out": dense(next(keys), 4 * d, d)})

    def ln(p, v):
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]

    def lin(p, v):
        return v @ p["w"] + p["b"] if "b" in p else v @ p["w"]

    mask = jnp.tril(jnp.ones((T, T), dtype=bool))

    def loss_fn(p, idx, tgt):
        B, t = idx.shape
        h = p["tok"][idx] + p["pos"][:t]
        for b in p["blocks"]:
            q, k, v = jnp.split(lin(b["qkv"], ln(b["ln1"], h)), 3, axis=-1)
            q, k, v = (a.reshape(B, t, H, d // H).transpose(0, 2, 1, 3) for a in (q, k, v))
            att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(d // H)
            att = jnp.where(mask[:t, :t], att, -jnp.inf)
            att = jax.nn.softmax(att, axis=-1)
            yv = (att @ v).transpose(0, 2, 1, 3).reshape(B, t, d)
            h = h + lin(b["proj"], yv)
            h = h + lin(b["out"], jax.nn.gelu(lin(b["fc"], ln(b["ln2"], h)), approximate=False))
        logits = lin(p["head"], ln(p["ln"], h))
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, tgt[..., None], axis=-1).mean()

    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01

    @jax.jit
    def step(p, m, v, t, idx, tgt):
        loss, g = jax.value_and_grad(loss_fn)(p, idx, tgt)
        t = t + 1
        m = jax.tree_util.tree_map(lambda a, gg: b1 * a + (1 - b1) * gg, m, g)
        v = jax.tree_util.tree_map(lambda a, gg: b2 * a + (1 - b2) * gg * gg, v, g)
        def upd(pp, mm, vv):
            pp = pp * (1 - lr * wd)
            mhat = mm / (1 - b1 ** t)
            vhat = vv / (1 - b2 ** t)
            return pp - lr * mhat / (jnp.sqrt(vhat) + eps)
        p = jax.tree_util.tree_map(upd, p, m, v)
        return p, m, v, t, loss

    state = [params, jax.tree_util.tree_map(jnp.zeros_like, params),
             jax.tree_util.tree_map(jnp.zeros_like, params), jnp.zeros((), jnp.float32)]
    xi, yi = jnp.asarray(np.asarray(x)), jnp.asarray(np.asarray(y))

    def run():
        p, m, v, t, loss = step(*state, xi, yi)
        state[:] = [p, m, v, t]
        return float(loss)
    return run, jax.__version__


def graph_times(args, vocab, x, y, steps=20):
    """Where the compiled step's time goes: each graph's call timed with the
    device synchronized before and after (medians), and the whole step."""
    import collections
    times = collections.defaultdict(list)
    compiler = torchtpu.dynamo._graph_compiler

    def timed_compiler(kind, why=None):
        inner = compiler(kind, why)

        def compile_graph(gm, example_inputs):
            boxed = inner(gm, example_inputs)

            def run(graph_args):
                torch.tpu.synchronize()
                t0 = time.perf_counter()
                out = boxed(graph_args)
                torch.tpu.synchronize()
                times[kind].append(time.perf_counter() - t0)
                return out
            run._boxed_call = True
            return run
        return compile_graph

    torchtpu.dynamo._graph_compiler = timed_compiler
    try:
        run = make_torch("tpu", None, "tpu", args, vocab, x, y)
        for _ in range(3):
            run()
        times.clear()
        t0 = time.perf_counter()
        for _ in range(steps):
            run()
        step = (time.perf_counter() - t0) / steps
    finally:
        torchtpu.dynamo._graph_compiler = compiler
    print(f"compiled step {step * 1e3:.2f} ms (unsynchronized loop); per graph, synchronized:")
    for kind, v in times.items():
        print(f"  {kind:10s} {statistics.median(v) * 1e3:7.2f} ms  ({len(v)} calls)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--graph-times", action="store_true",
                    help="only time each compiled graph (forward, backward, optimizer)")
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    rounds, steps = (2, 5) if args.quick else (5, 10)
    torchtpu.dynamo.register()
    _, chars, data = load_text()
    x, y = next(iter(batches(data, 1, args.batch, args.block)))
    if args.graph_times:
        graph_times(args, len(chars), x, y)
        return
    runs = {
        "tpu strict": make_torch("tpu", "strict", None, args, len(chars), x, y),
        "tpu fused": make_torch("tpu", "fused", None, args, len(chars), x, y),
        "tpu compiled": make_torch("tpu", None, "tpu", args, len(chars), x, y),
        "cpu inductor": make_torch("cpu", None, "inductor", args, len(chars), x, y),
    }
    try:
        runs["jax jit"], jax_version = make_jax(args, len(chars), x, y)
    except ImportError:
        jax_version = None
        print("(JAX not installed: .venv/bin/pip install --no-build-isolation -e \".[bench]\")")
    first = {}
    for name, fn in runs.items():
        t0 = time.perf_counter()
        fn()
        first[name] = time.perf_counter() - t0
        for _ in range(2):
            fn()
    rates = {n: [] for n in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            rates[name].append(steps / (time.perf_counter() - t0))
    med = {n: statistics.median(r) for n, r in rates.items()}
    print(f"platform: {torchtpu.platform()}; torch {torch.__version__}"
          + (f"; jax {jax_version}" if jax_version else ""))
    print(f"model: demo GPT d={args.d} layers={args.layers} heads={args.heads}, "
          f"batch {args.batch}x{args.block} tokens, AdamW; median of {rounds} rounds of {steps} steps")
    print(f"  {'':14s} {'steps/s':>9s} {'vs strict':>10s} {'first call':>11s}")
    for n, v in med.items():
        print(f"  {n:14s} {v:9.1f} {v / med['tpu strict']:9.2f}x {first[n]:10.2f}s")
    c = med["tpu compiled"]
    print(f"  compiled / fused = {c / med['tpu fused']:.2f}x, compiled / inductor = "
          f"{c / med['cpu inductor']:.2f}x" + (f", compiled / jax = {c / med['jax jit']:.2f}x"
                                                if "jax jit" in med else ""))


if __name__ == "__main__":
    main()
