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
import os
import sys
import warnings

import torchtpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from support.soak import HEADER, judge, run  # noqa: E402


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
