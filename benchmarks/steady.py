"""Steady-state training steps/s of the cold-start LLaMA model
(benchmarks/llama.py: d=256, 4 layers, 8x128 tokens, AdamW, a host read of
the loss every step) in one eager mode or compiled:

    .venv/bin/python benchmarks/steady.py strict|fused|compiled [--rounds 5] [--steps 4]

Three warm-up steps, then the median of ROUNDS rounds of STEPS steps. Run
the modes (or two builds, with PYTHONPATH) alternately to compare them
under the same load.
"""
import argparse
import os
import statistics
import sys
import time

import torch

import torchtpu
import torchtpu.dynamo  # noqa: F401  (the "tpu" torch.compile backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama import Llama  # noqa: E402


def training_setup(d=256, layers=4, vocab=512):
    """The measured step's pieces on tpu: (model, optimizer, x, y) for the
    LLaMA model with AdamW, seeded, batch 8 x 128 tokens."""
    torch.manual_seed(0)
    model = Llama(vocab, d=d, layers=layers).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randint(0, vocab, (8, 128)).to("tpu")
    y = torch.randint(0, vocab, (8, 128)).to("tpu")
    return model, opt, x, y


def training_step(d=256, layers=4, vocab=512):
    """The measured step on tpu: (step(x, y) -> loss, x, y) for
    training_setup's model and optimizer."""
    model, opt, x, y = training_setup(d, layers, vocab)

    def step(x, y):
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step, x, y


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["strict", "fused", "compiled"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args(argv)

    step, x, y = training_step()

    mode = a.mode
    if mode == "compiled":
        step = torch.compile(step, backend="tpu")
        mode = None

    def run(n):
        for _ in range(n):
            if mode:
                with torchtpu.set_eager_mode(mode):
                    step(x, y).item()
            else:
                step(x, y).item()

    run(3)
    rates = []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        run(a.steps)
        rates.append(a.steps / (time.perf_counter() - t0))
    print(f"{a.mode}: {statistics.median(rates):.2f} steps/s (median of {a.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
