"""The demo: what the device is for, on a small GPT-style model.

    python -m torchtpu.demo [--steps N] [--no-cpu-check] [--no-coldstart]

A character-level decoder-only transformer learns the short story that ships
in torchtpu/data. It shows:

1. the same training (same initial weights, same batches) in the three ways
   to run on `tpu`: strict eager (a program per op), fused eager (ops
   recorded and run as one program per step) and torch.compile, with their
   first-step time, steady step time and compile counts; the CPU trains
   the same model as the correctness check: every loss curve must agree;
2. a cold start and a warm start, each in a fresh process sharing one disk
   cache: the second compiles nothing;
3. where libtpu is installed, the training step compiled for a TPU v5e
   (2x2) on this machine, with the HBM it needs and its flops.
"""
import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torchtpu

DATA = os.path.join(os.path.dirname(__file__), "data", "lighthouse.txt")


class Block(nn.Module):
    def __init__(self, d, heads, block):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, d=64, layers=2, heads=4, block=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads, block) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def load_text():
    with open(DATA, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    return text, chars, data


def batches(data, steps, batch, block, seed=0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ix = torch.randint(len(data) - block - 1, (batch,), generator=g)
        x = torch.stack([data[i : i + block] for i in ix])
        y = torch.stack([data[i + 1 : i + block + 1] for i in ix])
        yield x, y


def train(model, device, data, steps, batch, block, step_fn=None):
    """Trains `steps` steps; returns (losses, steady seconds per step, seconds
    to the first loss)."""
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def one(x, y):
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    step_fn = step_fn(one) if step_fn else one
    losses = []
    t0 = time.perf_counter()
    t_first, t1 = None, t0
    for step, (x, y) in enumerate(batches(data, steps, batch, block), 1):
        x, y = x.to(device), y.to(device)
        losses.append(step_fn(x, y).detach())
        if step == 1:
            losses[-1].item()  # the first step compiles: time it apart
            t_first = time.perf_counter() - t0
            t1 = time.perf_counter()
    values = [float(v) for v in torch.stack([l.cpu() for l in losses])]
    steady = (time.perf_counter() - t1) / (steps - 1) if steps > 1 else 0.0
    return values, steady, t_first


def _mode(name):
    """(context, step wrapper) for running a step in one of the three ways."""
    if name == "compiled":
        return contextlib.nullcontext(), lambda f: torch.compile(f, backend="tpu")
    return torchtpu.set_eager_mode(name), None


def _coldstart_child():
    """One fresh process: the first training step in strict mode, with the
    disk cache its parent chose (TORCHTPU_CACHE_DIR); prints a JSON line of
    what it cost."""
    text, chars, data = load_text()
    torch.manual_seed(0)
    model = GPT(len(chars), block=64)
    t0 = time.perf_counter()
    losses, _, _ = train(model, "tpu", data, 1, 16, 64)
    m = torchtpu.debug.metrics()
    print(json.dumps({"seconds": time.perf_counter() - t0, "compiles": m["compiles"],
                      "disk_hits": m["disk_hits"], "loss": losses[0]}))


def _coldstart():
    with tempfile.TemporaryDirectory(prefix="torchtpu-demo-cache-") as cache:
        env = dict(os.environ, TORCHTPU_CACHE_DIR=cache, TORCHTPU_DISK_CACHE="1")
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-m", "torchtpu.demo", "--coldstart-child", cache],
                                 env=env, capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs


def _v5e_report(vocab, block):
    """The training step compiled for v5e:2x2 by libtpu, or None without it."""
    from . import aot
    if not aot.available():
        return None
    code = (
        "import json, torch, torchtpu.aot as aot\n"
        "from torchtpu.demo import GPT\n"
        f"m = GPT({vocab}, block={block})\n"
        f"x = torch.randint({vocab}, (16, {block})); y = torch.randint({vocab}, (16, {block}))\n"
        "r = aot.compile_for(m, (x, y), 'v5e:2x2')\n"
        "print(json.dumps({'programs': len(r.programs), 'hbm': r.step_hbm_bytes, 'device_hbm': r.hbm_bytes,"
        " 'flops': r.step_flops, 'seconds': r.step_seconds}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--coldstart-child"]:
        _coldstart_child()
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--no-cpu-check", action="store_true")
    p.add_argument("--no-coldstart", action="store_true", help="skip the cold/warm start and the v5e compile")
    args = p.parse_args(argv)

    text, chars, data = load_text()
    print(f"torchtpu demo: GPT on '{os.path.basename(DATA)}' ({len(text)} chars, vocab {len(chars)})")
    print(f"device tpu -> {torchtpu.platform()}")
    torch.manual_seed(0)
    init = GPT(len(chars), block=args.block).state_dict()
    nparams = sum(v.numel() for v in init.values())
    print(f"model: {nparams / 1e3:.1f}k parameters, batch {args.batch} x {args.block} tokens, {args.steps} steps")

    def fresh():
        m = GPT(len(chars), block=args.block)
        m.load_state_dict(init)
        return m

    print("\n1) the same training three ways on tpu, and on the CPU as the check:")
    rows = {}
    for name in ("strict", "fused", "compiled"):
        before = torchtpu.debug.metrics()
        ctx, wrap = _mode(name)
        model = fresh()
        with ctx:
            losses, steady, first = train(model, "tpu", data, args.steps, args.batch, args.block,
                                          step_fn=wrap)
        after = torchtpu.debug.metrics()
        rows[name] = (losses, steady, first, after["compiles"] - before["compiles"])
    cpu = None
    if not args.no_cpu_check:
        cpu = train(fresh(), "cpu", data, args.steps, args.batch, args.block)
    print(f"   {'mode':<9} {'first step':>10} {'steady step':>12} {'compiled':>9} {'loss':>17}")
    ok = True
    for name, (losses, steady, first, compiles) in rows.items():
        worst = max(abs(a - b) for a, b in zip(losses, cpu[0])) if cpu else 0.0
        good = worst < 2e-2 and losses[-1] < losses[0]
        ok &= good
        check = f"  vs cpu {worst:.1e} {'MATCH' if good else 'MISMATCH'}" if cpu else ""
        print(f"   {name:<9} {first:>9.2f}s {steady * 1e3:>10.1f}ms {compiles:>9d} "
              f"{losses[0]:.3f} -> {losses[-1]:.3f}{check}")
    if cpu:
        print(f"   {'cpu':<9} {cpu[2]:>9.2f}s {cpu[1] * 1e3:>10.1f}ms {'-':>9} {cpu[0][0]:.3f} -> {cpu[0][-1]:.3f}")
    print("   (on the XLA CPU plugin the device is this machine's CPU: the figures show\n"
          "    what each mode costs, not what a TPU does)")

    if not args.no_coldstart:
        print("\n2) cold start, then warm start (fresh processes, one disk cache):")
        cold, warm = _coldstart()
        for name, r in (("cold", cold), ("warm", warm)):
            print(f"   {name}: first loss after {r['seconds']:.2f} s, {r['compiles']} programs compiled, "
                  f"{r['disk_hits']} loaded from the disk cache")
        ok &= warm["compiles"] == 0 and abs(cold["loss"] - warm["loss"]) < 1e-6
        rep = _v5e_report(len(chars), args.block)
        print("\n3) the training step compiled for TPU v5e (2x2) by libtpu, on this machine:")
        if rep is None:
            print("   libtpu is not installed (pip install 'torchtpu[tpu]')")
        elif "error" in rep:
            print(f"   could not compile: {rep['error']}")
        else:
            print(f"   {rep['programs']} programs; HBM per device {rep['hbm'] / 2**20:.1f} MiB of "
                  f"{rep['device_hbm'] / 2**30:.0f} GiB; {rep['flops'] / 1e9:.2f} GFLOP per step; "
                  f"roofline {rep['seconds'] * 1e3:.2f} ms per step")

    model.eval()  # trained with torch.compile above
    with torch.no_grad():
        # A fixed-size context window keeps every shape, so nothing recompiles.
        ctx = torch.full((1, args.block), chars.index(" "), dtype=torch.long, device="tpu")
        ctx[0, -1] = chars.index("T")
        out = ["T"]
        for _ in range(40):
            nxt = torch.argmax(model(ctx)[:, -1, :], dim=-1, keepdim=True)
            ctx = torch.cat([ctx[:, 1:], nxt], dim=1)
            out.append(chars[nxt.item()])
    print(f"\nsample: {''.join(out)!r}")
    print("result:", "all modes MATCH the CPU" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
