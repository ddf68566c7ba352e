"""Steady-state cost of random draws on tpu: uniform_ and normal_ of 4M
float32 elements, dropout of a 256 x 1024 activation, and an MLP training
step with two dropouts (strict mode). Compare engine builds side by side
(PYTHONPATH to each build's tree), alternating processes, with the load
average (printed).

    .venv/bin/python benchmarks/random_draws.py
"""
import os
import time

import torch

import torchtpu


def per_call_ms(fn, n=20):
    for _ in range(3):
        fn()
    torch.tpu.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.tpu.synchronize()
    return (time.perf_counter() - t) / n * 1e3


def main():
    torch.manual_seed(0)
    with torchtpu.set_eager_mode("strict"):
        x = torch.empty(4_000_000, device="tpu")
        h = torch.randn(256, 1024, device="tpu")
        model = torch.nn.Sequential(
            torch.nn.Linear(1024, 1024), torch.nn.Dropout(0.1), torch.nn.ReLU(),
            torch.nn.Linear(1024, 1024), torch.nn.Dropout(0.1)).to("tpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            model(h).sum().backward()
            opt.step()

        rows = [("uniform_, 4M float32", per_call_ms(lambda: x.uniform_())),
                ("normal_, 4M float32", per_call_ms(lambda: x.normal_())),
                ("dropout, 256 x 1024", per_call_ms(
                    lambda: torch.nn.functional.dropout(h, 0.1, training=True))),
                ("MLP step, two dropouts", per_call_ms(step, 40))]
    print(f"load average {os.getloadavg()[0]:.2f}")
    for name, ms in rows:
        print(f"{name}: {ms:.2f} ms")


if __name__ == "__main__":
    main()
