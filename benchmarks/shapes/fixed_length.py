"""Steady-state step time and programs compiled of a fixed-shape training
loop, at a length that is not a bucket size (padding would cost it) and at
one that is: what the bucket policy must not slow down.

    .venv/bin/python benchmarks/shapes/fixed_length.py [--lengths 100,128]
        [--modes strict,fused] [--steps 20] [--warmup 12]

The model is changing_shapes.py's LLaMA-style one (hidden 128, 2 layers,
vocab 512), AdamW, batch 8, labels = input_ids, one fresh process per row
with the disk cache off. --warmup steps run first (a stream of one length
is stored exact after 8 uploads in strict mode, see
docs/design/shapes.md), then --steps steps are timed with one host read at
the end. Compare builds side by side on one machine, with its load
average (printed).
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one(length, steps, warmup):
    sys.path.insert(0, HERE)
    import torch
    import torchtpu

    import changing_shapes as cs

    model = cs.build("llama").train().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, cs.VOCAB, (8, length), generator=g) for _ in range(warmup + steps)]

    def step(ids):
        ids = ids.to("tpu")
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    for ids in batches[:warmup]:
        step(ids)
    float(step(batches[0]))
    t = time.perf_counter()
    for ids in batches[warmup:]:
        loss = step(ids)
    float(loss)
    ms = (time.perf_counter() - t) / steps * 1e3
    compiles = torchtpu.debug.metrics()["compiles"]
    print(f"  length {length:4d}  {torchtpu.get_eager_mode():6s}  {ms:7.1f} ms/step  "
          f"{compiles:4d} programs compiled")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", default="100,128")
    ap.add_argument("--modes", default="strict,fused")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=12)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        one(a.one, a.steps, a.warmup)
        return
    print(f"fixed-length training: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for mode in a.modes.split(","):
        for length in (int(x) for x in a.lengths.split(",")):
            env = dict(os.environ, TORCHTPU_EAGER_MODE=mode, TORCHTPU_DISK_CACHE="0")
            subprocess.run([sys.executable, "-W", "ignore", __file__, "--one", str(length),
                            "--steps", str(a.steps), "--warmup", str(a.warmup)], env=env, check=True)
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
