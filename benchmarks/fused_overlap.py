"""How soon the device starts on a fused step: a step begins with the
device idle (synchronized), and the profiler's tpu track gives each
program's start. Per step: how long Python takes to record the forward,
when the first program starts (from the forward's start), and how many
programs started while the forward was still being recorded. Repeated
layers (TORCHTPU_FUSED_REPEATS, default on) are cut as they are recorded
from the second step on, so the device runs the first layers while the
host records the later ones.

    .venv/bin/python benchmarks/fused_overlap.py [--layers 4] [--dim 256] [--steps 8]

The model is benchmarks/llama.py's (vocab 512, 8x128 tokens, AdamW), as
in fused_breakdown.py; medians over the steps after three warm-up steps.
"""
import argparse
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

import torchtpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama import Llama  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args(argv)

    torch.manual_seed(0)
    model = Llama(512, d=a.dim, layers=a.layers).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randint(0, 512, (8, 128)).to("tpu")
    y = torch.randint(0, 512, (8, 128)).to("tpu")

    def step():
        with record_function("forward"):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
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
            starts = sorted(e.time_range.start for e in prof.events()
                            if getattr(e, "device_type", None) == torch.autograd.DeviceType.PrivateUse1
                            and e.name.startswith("fused window"))
            t0, t1 = fwd.time_range.start, fwd.time_range.end
            rec.append((t1 - t0) / 1e3)
            first.append((starts[0] - t0) / 1e3)
            during.append(sum(1 for t in starts if t < t1))
    print(f"LLaMA-style d={a.dim}, {a.layers} layers, 8x128 tokens, AdamW, fused, "
          f"TORCHTPU_FUSED_REPEATS={os.environ.get('TORCHTPU_FUSED_REPEATS', '1')}; "
          f"load average {os.getloadavg()[0]:.2f}; medians of {a.steps} steps")
    print(f"forward recorded in {statistics.median(rec):.1f} ms; first program starts "
          f"{statistics.median(first):.1f} ms after the forward's start; "
          f"programs started while the forward was recorded: {statistics.median(during):g}")


if __name__ == "__main__":
    main()
