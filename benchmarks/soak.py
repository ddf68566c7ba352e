"""Long training soak: the demo model (torchtpu.demo.GPT) trained on tpu and
on the CPU side by side, with varying sequence lengths and a checkpoint
save/load every few hundred steps; memory, mappings and compiles sampled
over time.

    python benchmarks/soak.py [--steps 2000] [--every 100] [--checkpoint-every 200]
                              [--lengths 8,16,24,32,40,48,56,64] [--mode strict]

Each step draws its sequence length from --lengths with a seeded RNG, and
both models train on the same batch (AdamW, the demo's settings). Every
--checkpoint-every steps each side saves its model and optimizer state
with torch.save and training continues from fresh objects loaded back with
torch.load(map_location="tpu"); the CPU side loads the same checkpoint
with map_location="cpu" (--free-running: its own), so both continue from
one state and a loss difference is the drift of one checkpoint interval.
Free-running, float rounding differences between XLA's and ATen's CPU
kernels compound over the run as training amplifies them.

Every --every steps it samples torch.tpu.memory_allocated(), the host RSS
(VmRSS), the number of memory mappings (lines of /proc/self/maps) and the
engine's compiles so far (torchtpu.debug.metrics(): compiles, disk cache
loads), and prints them as a table, then the largest loss difference.

Exit status 1 when
  * a step's tpu loss differs from the CPU's by more than --tolerance
    (relative, default 1e-4), or
  * anything keeps growing after warm-up. Warm-up is every step up to
    max(--warmup, the step by which every length has been drawn), which by
    default takes in the first checkpoint round trip (the optimizer's step
    counters come back on tpu, a few new programs). With `base` the first
    sample after warm-up and `peak` the largest value in the second half of
    the samples after warm-up (a sample is taken before its step's
    checkpoint):
      device memory: peak - base > 1 MiB
      host RSS:      peak - base > 32 MiB + 5% of base
      mappings:      peak - base > 50 + 2% of base
"""
import argparse
import io
import random
import sys
import time
import warnings

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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--every", type=int, default=100, help="sample every N steps")
    p.add_argument("--checkpoint-every", type=int, default=200)
    p.add_argument("--lengths", default="8,16,24,32,40,48,56,64")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", default=None, choices=["strict", "fused", "debug"])
    p.add_argument("--tolerance", type=float, default=1e-4, help="relative loss difference")
    p.add_argument("--free-running", action="store_true",
                   help="the CPU side resumes from its own checkpoints, not the tpu side's "
                        "(differences then compound over the whole run)")
    p.add_argument("--warmup", type=int, default=200, help="steps before growth is judged")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*recompiled")  # new lengths on purpose
    if args.mode:
        torchtpu.set_eager_mode(args.mode)
    lengths = tuple(int(v) for v in args.lengths.split(","))
    print(f"soak: demo GPT, {args.steps} steps, batch {args.batch}, lengths {lengths}, checkpoint "
          f"every {args.checkpoint_every}{' (free-running)' if args.free_running else ''}, eager mode {torchtpu.get_eager_mode()}, {torchtpu.platform()}")
    print(HEADER)
    result = run(args.steps, args.every, args.checkpoint_every, lengths, args.batch, args.seed,
                 anchor=not args.free_running, log=lambda line: print(line, flush=True))
    failures, growth = judge(result, args.tolerance, args.warmup)
    print(f"{result['checkpoints']} checkpoints, every length drawn by step {result['all_lengths_at']}, "
          f"{result['seconds']:.1f} s")
    print(f"largest loss difference tpu vs cpu: {result['max_rel']:.2e} relative "
          f"(step {result['max_rel_step']}); final loss {result['losses'][-1][0]:.6f} / "
          f"{result['losses'][-1][1]:.6f}")
    for key, (base, peak) in growth.items():
        print(f"after warm-up {key}: {base} -> peak {peak} ({peak - base:+d})")
    for f in failures:
        print("FAIL:", f)
    print("soak: " + ("FAILED" if failures else "passed"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
