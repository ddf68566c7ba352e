"""Error of a float32 matmul against float64 under each
torch.set_float32_matmul_precision setting, on tpu and on the CPU.

    .venv/bin/python benchmarks/matmul_precision.py [--n 1024] [--repeat 5]

On tpu the setting picks the XLA precision config of every float32
contraction: "highest" -> HIGHEST, "high" -> HIGH (bf16_3x), "medium" ->
DEFAULT (one bf16 pass on a TPU). Prints, per device and setting, the
largest and the mean absolute error relative to max|A@B| (float64
reference), a bf16-pass reference (inputs rounded to bfloat16 first, what
one bf16 pass computes), and the time per matmul.
"""
import argparse
import time

import torch

import torchtpu  # noqa: F401


def measure(a, b, device, setting, repeat):
    torch.set_float32_matmul_precision(setting)
    try:
        x, y = a.float().to(device), b.float().to(device)
        out = x @ y  # compile / warm up
        out.cpu()
        t0 = time.perf_counter()
        for _ in range(repeat):
            out = x @ y
        out = out.cpu()
        dt = (time.perf_counter() - t0) / repeat
    finally:
        torch.set_float32_matmul_precision("highest")
    return out.double(), dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    a = torch.randn(args.n, args.n, generator=g, dtype=torch.float64)
    b = torch.randn(args.n, args.n, generator=g, dtype=torch.float64)
    ref = a @ b
    scale = ref.abs().max().item()
    print(f"{args.n}x{args.n} @ {args.n}x{args.n}, randn inputs; errors relative to max|ref| = {scale:.1f}")
    print(f"{'device':6} {'setting':8} {'max rel err':>12} {'mean rel err':>13} {'ms/matmul':>10}")
    bf = (a.to(torch.bfloat16).double() @ b.to(torch.bfloat16).double())
    err = (bf - ref).abs()
    print(f"{'(ref)':6} {'1xbf16':8} {err.max().item() / scale:12.3e} {err.mean().item() / scale:13.3e} {'':>10}")
    for device in ("tpu", "cpu"):
        for setting in ("highest", "high", "medium"):
            out, dt = measure(a, b, device, setting, args.repeat)
            err = (out - ref).abs()
            print(f"{device:6} {setting:8} {err.max().item() / scale:12.3e} "
                  f"{err.mean().item() / scale:13.3e} {dt * 1e3:10.2f}")


if __name__ == "__main__":
    main()
