"""JAX's Pallas TPU flash attention as an op, and the LLaMA-style model
trained with it beside SDPA on the CPU: shared by benchmarks/kernels.py
(which prints the figures) and tests/kernels/test_kernels.py (which checks them).
Needs the kernels extra (JAX).
"""
import torch

import torchtpu

from .llama import Llama


def flash_attention():
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    @torchtpu.jax_op
    def flash(q, k, v, sm_scale):
        return fa.flash_attention(q, k, v, causal=True, sm_scale=sm_scale)

    return lambda q, k, v: flash(q, k, v, q.shape[-1] ** -0.5)


def llama_pair(attention, steps=2):
    """The LLaMA-style model (d=128, 2 layers, 2x128 tokens) with one set
    of weights on the CPU with SDPA and on tpu with `attention`, trained
    side by side for `steps` AdamW steps: (cpu model, tpu model, [(cpu
    loss, tpu loss) per step])."""
    torch.manual_seed(0)
    ref = Llama(128, d=128, layers=2, heads=2, block=128)
    ours = Llama(128, d=128, layers=2, heads=2, block=128, attention=attention)
    ours.load_state_dict(ref.state_dict())
    ours.to("tpu")
    idx, tgt = torch.randint(0, 128, (2, 128)), torch.randint(0, 128, (2, 128))
    pairs = ((ref, torch.optim.AdamW(ref.parameters(), 1e-3), "cpu"),
             (ours, torch.optim.AdamW(ours.parameters(), 1e-3), "tpu"))
    rows = []
    for _ in range(steps):
        losses = []
        for model, opt, device in pairs:
            loss = model(idx.to(device), tgt.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach().cpu())
        rows.append(tuple(losses))
    return ref, ours, rows
