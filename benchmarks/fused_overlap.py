"""How soon the device starts on a fused step: a step begins with the
device idle (synchronized), and the profiler's tpu track gives each
program's start. Per step: how long Python takes to record the forward,
when the first program starts (from the forward's start), and how many
programs started while the forward was still being recorded. Repeated
layers (TORCHTPU_FUSED_REPEATS, default on) are cut as they are recorded
from the second step on, so the device runs the first layers while the
host records the later ones.

Then what the host's work beside the programs costs them where both share
the cores (the XLA CPU plugin): the windows' programs' summed run time per step
when the host waits for the device after the forward, the backward and
the update (nothing runs beside the programs) against the ordinary step
(the next phase is recorded while the programs run), rounds of three steps
alternating, and the wall time of each; then the same step under
torch.compile (backend "tpu"), whose graphs' programs run with the host
idle, measured the same way.

    .venv/bin/python benchmarks/fused_overlap.py [--layers 4] [--dim 256] [--steps 8] [--rounds 6]

The model and optimizer are steady.py's (benchmarks/llama.py's model,
vocab 512, 8x128 tokens, AdamW), as in fused_breakdown.py; medians over
the steps after three warm-up steps.
"""
import argparse
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

import torchtpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_breakdown import busy_us, tpu_events  # noqa: E402
from steady import training_setup, training_step  # noqa: E402


def program_spans(prof, prefix):
    """(start, end) of each program on the profiler's tpu track whose name
    begins with prefix ("fused window", "graph")."""
    return [(e.time_range.start, e.time_range.end) for e in tpu_events(prof)
            if e.name.startswith(prefix)]


def three_steps(run, prefix):
    """(programs ms, wall ms) a step over three calls of run(), from a
    synchronized device to a synchronized device; the programs' time is
    the time the device ran those whose name begins with prefix."""
    torch.tpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        t = time.perf_counter()
        for _ in range(3):
            run()
        torch.tpu.synchronize()
        wall = (time.perf_counter() - t) / 3 * 1e3
    return busy_us(program_spans(prof, prefix)) / 1e3 / 3, wall


def compiled_rounds(d, layers, rounds):
    """(programs ms, wall ms) a step of the same step (steady.py's, a
    model seeded alike) compiled with torch.compile: rounds of three
    steps. (steady.py registers the "tpu" backend.)"""
    step, x, y = training_step(d=d, layers=layers)
    step = torch.compile(step, backend="tpu")
    for _ in range(3):
        step(x, y).item()
    return [three_steps(lambda: step(x, y).item(), "graph") for _ in range(rounds)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6)
    a = ap.parse_args(argv)

    model, opt, x, y = training_setup(a.dim, a.layers)

    def step(wait=False):
        with record_function("forward"):
            loss = model(x, y)
        if wait:
            torch.tpu.synchronize()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if wait:
            torch.tpu.synchronize()
        opt.step()
        if wait:
            torch.tpu.synchronize()
        return loss.item()

    rec, first, during = [], [], []
    with torchtpu.set_eager_mode("fused"):
        for _ in range(3):
            step()
        for _ in range(a.steps):
            torch.tpu.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
                step()
                torch.tpu.synchronize()
            fwd = next(e for e in prof.events() if e.name == "forward")
            starts = sorted(start for start, _ in program_spans(prof, "fused window"))
            t0, t1 = fwd.time_range.start, fwd.time_range.end
            rec.append((t1 - t0) / 1e3)
            first.append((starts[0] - t0) / 1e3)
            during.append(sum(1 for t in starts if t < t1))
        alone = {False: [], True: []}
        for _ in range(a.rounds):
            for wait in (False, True):
                alone[wait].append(three_steps(lambda: step(wait), "fused window"))
    print(f"LLaMA-style d={a.dim}, {a.layers} layers, 8x128 tokens, AdamW, fused, "
          f"TORCHTPU_FUSED_REPEATS={os.environ.get('TORCHTPU_FUSED_REPEATS', '1')}; "
          f"load average {os.getloadavg()[0]:.2f}; medians of {a.steps} steps")
    print(f"forward recorded in {statistics.median(rec):.1f} ms; first program starts "
          f"{statistics.median(first):.1f} ms after the forward's start; "
          f"programs started while the forward was recorded: {statistics.median(during):g}")
    alone["compiled"] = compiled_rounds(a.dim, a.layers, a.rounds)
    for key, label in ((False, "fused, ordinary step (host records beside the programs)"),
                       (True, "fused, host waiting after each phase"),
                       ("compiled", "torch.compile, the graphs' programs")):
        dev = statistics.median(d for d, _ in alone[key])
        wall = statistics.median(w for _, w in alone[key])
        print(f"{label}: programs {dev:.1f} ms a step, wall {wall:.1f} ms (medians of {a.rounds} rounds of 3 steps)")


if __name__ == "__main__":
    main()
