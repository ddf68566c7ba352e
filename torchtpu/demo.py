"""The demo: train a small GPT-style model on device `tpu`, check it against CPU.

    python -m torchtpu.demo [--steps N] [--no-cpu-check]

A character-level decoder-only transformer learns the short story that ships
in torchtpu/data. The same model (same initial weights, same batches) trains
on `tpu` and on the CPU; the two loss curves must agree.
"""
import argparse
import math
import os
import sys
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


def bar(step, steps, loss, tps, width=30):
    done = int(width * step / steps)
    sys.stdout.write(
        f"\r  [{'#' * done}{'.' * (width - done)}] {step:4d}/{steps}  loss {loss:.4f}  {tps:8.0f} tok/s"
    )
    sys.stdout.flush()


def train(model, device, data, steps, batch, block, log_every):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    t0 = time.perf_counter()
    t_first = None
    for step, (x, y) in enumerate(batches(data, steps, batch, block), 1):
        x, y = x.to(device), y.to(device)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if step == 1:
            losses[-1].item()  # the first step compiles: time it apart
            t_first = time.perf_counter() - t0
            t1 = time.perf_counter()
        if step % log_every == 0 or step == steps:
            value = losses[-1].item()
            elapsed = time.perf_counter() - t1
            tps = (step - 1) * batch * block / elapsed if step > 1 and elapsed > 0 else 0.0
            bar(step, steps, value, tps)
    sys.stdout.write("\n")
    total = time.perf_counter() - t1
    steady_tps = (steps - 1) * batch * block / total if steps > 1 else 0.0
    return [float(v) for v in torch.stack([l.cpu() for l in losses])], steady_tps, t_first


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--no-cpu-check", action="store_true")
    args = p.parse_args(argv)

    text, chars, data = load_text()
    print(f"torchtpu demo: GPT on '{os.path.basename(DATA)}' ({len(text)} chars, vocab {len(chars)})")
    print(f"device tpu -> {torchtpu.platform()}")
    torch.manual_seed(0)
    model = GPT(len(chars), block=args.block)
    cpu_model = GPT(len(chars), block=args.block)
    cpu_model.load_state_dict(model.state_dict())
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: {nparams / 1e3:.1f}k parameters, batch {args.batch} x {args.block} tokens, {args.steps} steps")

    before = torchtpu.debug.metrics()
    print("training on tpu:")
    tpu_losses, tpu_tps, first = train(model, "tpu", data, args.steps, args.batch, args.block, 5)
    after = torchtpu.debug.metrics()
    print(
        f"  first step {first:.2f} s ({after['compiles'] - before['compiles']} programs compiled in "
        f"{after['compile_seconds'] - before['compile_seconds']:.2f} s); steady {tpu_tps:.0f} tokens/s"
    )
    ok = True
    if not args.no_cpu_check:
        print("training on cpu (reference):")
        cpu_losses, cpu_tps, _ = train(cpu_model, "cpu", data, args.steps, args.batch, args.block, 5)
        worst = max(abs(a - b) for a, b in zip(tpu_losses, cpu_losses))
        ok = worst < 2e-2 and tpu_losses[-1] < tpu_losses[0]
        print(f"  steady {cpu_tps:.0f} tokens/s; tpu/cpu speed {tpu_tps / cpu_tps:.2f}x")
        print(
            f"loss {tpu_losses[0]:.4f} -> {tpu_losses[-1]:.4f} on tpu, {cpu_losses[0]:.4f} -> {cpu_losses[-1]:.4f} "
            f"on cpu; largest difference {worst:.2e}: {'MATCH' if ok else 'MISMATCH'}"
        )
    model.eval()
    with torch.no_grad():
        # A fixed-size context window keeps every shape, so nothing recompiles.
        ctx = torch.full((1, args.block), chars.index(" "), dtype=torch.long, device="tpu")
        ctx[0, -1] = chars.index("T")
        out = ["T"]
        for _ in range(60):
            nxt = torch.argmax(model(ctx)[:, -1, :], dim=-1, keepdim=True)
            ctx = torch.cat([ctx[:, 1:], nxt], dim=1)
            out.append(chars[nxt.item()])
        sample = "".join(out)
    print(f"sample: {sample!r}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
