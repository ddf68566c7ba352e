"""The training soak's run and its judgement: the demo model
(torchtpu.demo.GPT) trained on tpu and on the CPU side by side, with
varying sequence lengths and checkpoint round trips, memory, mappings and
compiles sampled over time. benchmarks/soak.py is the command (its
docstring states the rules judge() applies); tests/runtime/test_soak.py runs a
short version and checks judge() itself.
"""
import io
import random
import time

import torch

import torchtpu
from torchtpu.demo import GPT, load_text

MiB = 1 << 20


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def sample(step):
    torch.tpu.synchronize()
    m = torchtpu.debug.metrics()
    return {"step": step, "device_bytes": torch.tpu.memory_allocated(), "rss": rss_bytes(),
            "mappings": mappings(), "compiles": m["compiles"], "disk_loads": m["disk_hits"]}


class Side:
    """One device's model and optimizer, rebuilt from a checkpoint on demand."""

    def __init__(self, device, vocab, block, state=None):
        self.device, self.vocab, self.block = device, vocab, block
        self.model = GPT(vocab, block=block)
        if state is not None:
            self.model.load_state_dict(state)
        self.model.to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.01)

    def step(self, x, y):
        loss = self.model(x.to(self.device), y.to(self.device))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.item()

    def save(self):
        """The model and optimizer state, as torch.save writes them."""
        buffer = io.BytesIO()
        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict()}, buffer)
        return buffer.getvalue()

    def load(self, checkpoint):
        """Continues from fresh objects loaded from a save() result."""
        del self.model, self.opt
        state = torch.load(io.BytesIO(checkpoint), map_location=self.device)
        self.model = GPT(self.vocab, block=self.block).to(self.device)
        self.model.load_state_dict(state["model"])
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.01)
        self.opt.load_state_dict(state["opt"])


def run(steps=2000, every=100, checkpoint_every=200, lengths=(8, 16, 24, 32, 40, 48, 56, 64),
        batch=16, seed=0, anchor=True, log=None):
    """Trains both sides; at each checkpoint the CPU side continues from the
    tpu side's checkpoint when `anchor` (so loss differences measure the
    drift over one checkpoint interval), else from its own. Returns a dict:
    samples (list of sample() dicts),
    losses (tpu, cpu) per step, max_rel (largest relative loss difference)
    and its step, all_lengths_at (the step by which every length was drawn),
    checkpoints (count), seconds."""
    _, chars, data = load_text()
    block = max(lengths)
    torch.manual_seed(seed)
    tpu = Side("tpu", len(chars), block)
    cpu = Side("cpu", len(chars), block, state=tpu.model.state_dict())
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    seen, all_seen_at = set(), None
    losses, samples = [], [sample(0)]
    max_rel, max_rel_step, checkpoints = 0.0, 0, 0
    if log:
        log(row(samples[0]))
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        T = rng.choice(lengths)
        seen.add(T)
        if all_seen_at is None and len(seen) == len(set(lengths)):
            all_seen_at = step
        ix = torch.randint(len(data) - T - 1, (batch,), generator=g)
        x = torch.stack([data[i: i + T] for i in ix])
        y = torch.stack([data[i + 1: i + T + 1] for i in ix])
        a, b = tpu.step(x, y), cpu.step(x, y)
        losses.append((a, b))
        rel = abs(a - b) / max(abs(b), 1e-12)
        if rel > max_rel:
            max_rel, max_rel_step = rel, step
        if step % every == 0 or step == steps:  # before a reload: gradients exist
            samples.append(sample(step))
            if log:
                log(row(samples[-1], losses[-1]))
        if checkpoint_every and step % checkpoint_every == 0:
            saved = tpu.save()
            tpu.load(saved)
            cpu.load(saved if anchor else cpu.save())
            checkpoints += 1
    return {"samples": samples, "losses": losses, "max_rel": max_rel, "max_rel_step": max_rel_step,
            "all_lengths_at": all_seen_at or steps, "checkpoints": checkpoints,
            "seconds": time.perf_counter() - t0}


HEADER = (f"{'step':>6} {'device MiB':>11} {'RSS MiB':>9} {'mappings':>9} {'compiles':>9} "
          f"{'disk loads':>10}   loss tpu / cpu")


def row(s, loss=None):
    text = (f"{s['step']:>6} {s['device_bytes'] / MiB:>11.2f} {s['rss'] / MiB:>9.1f} "
            f"{s['mappings']:>9} {s['compiles']:>9} {s['disk_loads']:>10}")
    if loss:
        text += f"   {loss[0]:.6f} / {loss[1]:.6f}"
    return text


LIMITS = {  # allowed growth after warm-up: (bytes or lines, fraction of base)
    "device_bytes": (1 * MiB, 0.0),
    "rss": (32 * MiB, 0.05),
    "mappings": (50, 0.02),
}


def judge(result, tolerance=1e-4, warmup=200):
    """The failures of a run() result, as sentences (empty: it passed), and
    the growth figures: {metric: (base, peak)}."""
    failures = []
    if result["max_rel"] > tolerance:
        failures.append(f"losses diverge: relative difference {result['max_rel']:.2e} at step "
                        f"{result['max_rel_step']} > {tolerance:.0e}")
    start = max(warmup, result["all_lengths_at"])
    after = [s for s in result["samples"] if s["step"] > start]
    growth = {}
    if len(after) < 3:
        failures.append(f"too few samples after warm-up (step {start}) to judge growth")
        return failures, growth
    base, second_half = after[0], after[len(after) // 2:]
    for key, (absolute, fraction) in LIMITS.items():
        peak = max(s[key] for s in second_half)
        growth[key] = (base[key], peak)
        allowed = absolute + fraction * base[key]
        if peak - base[key] > allowed:
            failures.append(f"{key} grows after warm-up: {base[key]} at step {base['step']} -> "
                            f"{peak} (allowed +{allowed:.0f})")
    return failures, growth
