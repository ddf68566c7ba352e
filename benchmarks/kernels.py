"""torchtpu.jax_op figures: what a JAX function costs as an op, and JAX's
Pallas TPU flash attention as the attention of the LLaMA-style model.

    .venv/bin/python benchmarks/kernels.py [--calls 300] [--no-aot]

Prints, on the runtime's plugin (the XLA CPU plugin here):
  1. the first call of a JAX function (JAX's lowering, then our compile)
     and the steady per-call time of the same small computation as a
     jax_op and as PyTorch ops, in strict mode;
  2. flash attention (Pallas, interpret mode off a TPU) against
     F.scaled_dot_product_attention: largest forward and gradient
     differences, and the LLaMA-style model's losses over two AdamW steps
     with each attention;
  3. with libtpu (the tpu extra): the training step with flash attention
     compiled for v5e:2x2 and v6e:2x2 (a fresh process, so every program is
     captured), with the Mosaic kernels' flops and peak HBM.
Needs the kernels extra (JAX).
"""
import argparse
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
sys.path.insert(0, TESTS)

import torchtpu  # noqa: E402
from support.kernels import flash_attention, llama_pair  # noqa: E402


def call_cost(calls):
    import jax.numpy as jnp

    @torchtpu.jax_op
    def scale_shift(x, w):
        return jnp.tanh(x * w + 1.0)

    x, w = torch.randn(64, 64, device="tpu"), torch.randn(64, 64, device="tpu")
    t0 = time.perf_counter()
    scale_shift(x, w).cpu()
    first = time.perf_counter() - t0

    def timed(fn):
        for _ in range(10):
            fn()
        torch.tpu.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.tpu.synchronize()
        return (time.perf_counter() - t) / calls * 1e6

    ours = timed(lambda: scale_shift(x, w))
    aten = timed(lambda: torch.tanh(x * w + 1.0))  # three engine ops
    aten1 = timed(lambda: torch.tanh(x))  # one engine op
    print(f"first call (JAX lowering + compile): {first:.3f} s")
    print(f"steady, strict mode, {calls} calls: jax_op tanh(x*w+1) {ours:.0f} us/call; "
          f"the same as 3 PyTorch ops {aten:.0f} us; one PyTorch op (tanh) {aten1:.0f} us")


def attention_match():
    torch.manual_seed(0)
    attention = flash_attention()
    q, k, v, g = (torch.randn(2, 2, 128, 64) for _ in range(4))
    qt, kt, vt = (t.to("tpu").requires_grad_() for t in (q, k, v))
    t0 = time.perf_counter()
    out = attention(qt, kt, vt)
    (out * g.to("tpu")).sum().backward()
    torch.tpu.synchronize()
    first = time.perf_counter() - t0
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True)
    (ref * g).sum().backward()
    fwd = (out.detach().cpu() - ref.detach()).abs().max().item()
    grad = max((a.grad.cpu() - b.grad).abs().max().item() for a, b in ((qt, qc), (kt, kc), (vt, vc)))
    print(f"flash attention (2x2x128x64, causal) vs SDPA on CPU: forward max |diff| {fwd:.2e}, "
          f"gradients {grad:.2e}; first forward+backward {first:.2f} s")

    _, _, rows = llama_pair(attention)
    print("LLaMA-style (d=128, 2 layers, 2x128 tokens), AdamW, losses SDPA on CPU / flash on tpu: "
          + ", ".join(f"{a.item():.6f} / {b.item():.6f}" for a, b in rows))


AOT = """
import sys, time
sys.path.insert(0, {tests!r})
import torch, torchtpu, torchtpu.aot as aot
from support.kernels import flash_attention
from support.llama import Llama
model = Llama(128, d=128, layers=2, heads=2, block=128, attention=flash_attention())
idx, tgt = torch.randint(0, 128, (2, 128)), torch.randint(0, 128, (2, 128))
t = time.perf_counter()
for r in aot.compile_for(model, (idx, tgt), ["v5e:2x2", "v6e:2x2"]):
    ext = [p for p in r.programs if "extern_call" in p.name]
    print(f"{{r.topology}}: {{len(r.programs)}} programs, {{len(r.failures)}} failed, compile wall "
          f"{{r.compile_wall_seconds:.1f}} s; the programs with the Mosaic kernels: "
          + "; ".join(f"{{p.flops / 1e6:.1f}} MFLOP, peak {{p.peak_bytes / 2**20:.2f}} MiB" for p in ext))
print(f"capture + both compiles: {{time.perf_counter() - t:.1f}} s")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--no-aot", action="store_true", help="skip the libtpu compile")
    args = ap.parse_args()
    print(f"platform: {torchtpu.platform()}; load average {os.getloadavg()[0]:.2f}")
    call_cost(args.calls)
    attention_match()
    if not args.no_aot:
        import torchtpu.aot as aot

        ok, why = aot.available()
        if not ok:
            print(f"libtpu compile skipped: {why}")
        else:
            env = dict(os.environ, TORCHTPU_CACHE_DIR="")
            subprocess.run([sys.executable, "-c", AOT.format(tests=TESTS)], check=True, env=env)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
