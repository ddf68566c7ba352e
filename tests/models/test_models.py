"""Real model architectures (tests/models.py) train on tpu exactly as on CPU:
forward, backward and AdamW steps, with no CPU fallback.

Each test builds the model from its config on the CPU, copies it to tpu,
and runs the same batches on both: the first step's loss and every
parameter gradient, each later step's loss, and the parameters after the
last step must agree. `python tests/models/test_models.py` prints the largest
differences and the time per step of each model instead.
"""
import copy
import os
import sys
import time

import pytest
import torch

import torchtpu

# tests/ (the helpers), also when run as a script
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import models as M  # noqa: E402

STEPS = 3


def _batch_lm(g, vocab, b=2, t=16):
    idx = torch.randint(0, vocab, (b, t + 1), generator=g)
    return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def _batch_bert(g, c, b=3, t=12):
    ids = torch.randint(1, c.vocab, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, 8:] = 0  # padded samples
    mask[2, 5:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    types = torch.zeros(b, t, dtype=torch.long)
    types[:, t // 2:] = 1
    mlm = torch.full((b, t), -100)
    pick = torch.rand(b, t, generator=g) < 0.3
    mlm[pick & (mask == 1)] = ids[pick & (mask == 1)]
    mlm[0, 1] = ids[0, 1]  # at least one masked-LM target
    labels = torch.randint(0, c.classes, (b,), generator=g)
    return ids, types, mask, mlm, labels


def _batch_image(g, c, b=4):
    size = getattr(c, "image", 16)
    x = torch.randn(b, c.in_channels, size, size, generator=g)
    return x, torch.randint(0, c.classes, (b,), generator=g)


def build(name):
    """(model on CPU, list of STEPS batches) for a model name."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if name == "llama":
        c = M.LlamaConfig()
        return M.Llama(c), [_batch_lm(g, c.vocab) for _ in range(STEPS)]
    if name == "llama_mha":  # kv_heads == heads: no grouped-query repeat
        c = M.LlamaConfig(kv_heads=4, layers=1)
        return M.Llama(c), [_batch_lm(g, c.vocab) for _ in range(STEPS)]
    if name == "gpt2":
        c = M.GPT2Config()
        return M.GPT2(c), [_batch_lm(g, c.vocab) for _ in range(STEPS)]
    if name == "bert":
        c = M.BertConfig()
        return M.Bert(c), [_batch_bert(g, c) for _ in range(STEPS)]
    if name == "resnet":
        c = M.ResNetConfig()
        return M.ResNet(c), [_batch_image(g, c) for _ in range(STEPS)]
    if name == "vit":
        c = M.ViTConfig()
        return M.ViT(c), [_batch_image(g, c) for _ in range(STEPS)]
    raise KeyError(name)


MODELS = ["llama", "llama_mha", "gpt2", "bert", "resnet", "vit"]


def train(model, batches, device, dtype=torch.float32):
    """Runs the steps; returns (losses, first-step grads by name, seconds
    per step after the first)."""
    model = model.to(device=device, dtype=dtype)
    model.train()
    # eps well above the noise of gradients that are zero in exact arithmetic
    # (a key bias under softmax), which Adam would otherwise amplify to lr.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, eps=1e-4)
    losses, grads, times = [], None, []
    for batch in batches:
        t0 = time.perf_counter()
        batch = [b.to(device=device, dtype=dtype) if b.is_floating_point() else b.to(device) for b in batch]
        loss = model(*batch[:-1], batch[-1]) if len(batch) == 2 else model(*batch)
        opt.zero_grad()
        loss.backward()
        if grads is None:
            grads = {n: p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}
        opt.step()
        losses.append(loss.detach().float().cpu())
        times.append(time.perf_counter() - t0)
    return torch.stack(losses), grads, sum(times[1:]) / max(1, len(times) - 1)


def run_both(name, dtype=torch.float32):
    cpu_model, batches = build(name)
    tpu_model = copy.deepcopy(cpu_model)
    before = dict(torchtpu.debug.metrics()["cpu_fallbacks"])
    tl, tg, tt = train(tpu_model, batches, "tpu", dtype)
    after = torchtpu.debug.metrics()["cpu_fallbacks"]
    assert after == before, f"{name} fell back to the CPU for {set(after) - set(before)}"
    cl, cg, ct = train(cpu_model, batches, "cpu", dtype)
    assert tg.keys() == cg.keys()
    params = {n: (p.detach().float().cpu(), q.detach().float()) for (n, p), q in
              zip(tpu_model.named_parameters(), cpu_model.parameters())}
    return dict(losses=(tl, cl), grads={n: (tg[n], cg[n]) for n in cg}, params=params,
                tpu_step=tt, cpu_step=ct, tpu_model=tpu_model, cpu_model=cpu_model, batches=batches)


def max_diffs(r):
    tl, cl = r["losses"]
    gd = max((a - b).abs().max().item() for a, b in r["grads"].values())
    gmax = max(b.abs().max().item() for _, b in r["grads"].values())
    return (tl - cl).abs().max().item(), gd, gmax


@pytest.mark.parametrize("name", MODELS)
def test_model_fp32_matches_cpu(name):
    r = run_both(name)
    tl, cl = r["losses"]
    torch.testing.assert_close(tl, cl, atol=2e-5, rtol=1e-5)
    for n, (a, b) in r["grads"].items():
        torch.testing.assert_close(a, b, atol=5e-5, rtol=1e-3, msg=lambda m: f"grad {n}: {m}")
    for n, (a, b) in r["params"].items():
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3, msg=lambda m: f"param {n}: {m}")
    assert not r["tpu_model"].parameters().__next__().grad.isnan().any()


def test_resnet_eval_uses_running_stats():
    """After training, eval-mode batch norm reads the running statistics the
    tpu training steps updated, like CPU's."""
    r = run_both("resnet")
    x = r["batches"][0][0]
    for m in (r["tpu_model"], r["cpu_model"]):
        m.eval()
    with torch.no_grad():
        out_t = r["tpu_model"](x.to("tpu")).cpu()
        out_c = r["cpu_model"](x)
    torch.testing.assert_close(out_t, out_c, atol=1e-4, rtol=1e-4)
    for (n, a), b in zip(r["tpu_model"].named_buffers(), r["cpu_model"].buffers()):
        torch.testing.assert_close(a.cpu(), b, atol=1e-5, rtol=1e-5, msg=lambda m: f"buffer {n}: {m}")


def test_tied_weights_stay_tied():
    """module.to("tpu") keeps shared Parameters shared (GPT-2's tied
    embedding and output layer): one Parameter, one gradient."""
    model = M.GPT2(M.GPT2Config(layers=1)).to("tpu")
    assert model.lm_head.weight is model.wte.weight
    assert model.wte.weight.device.type == "tpu"
    assert len(list(model.parameters())) == len({id(p) for p in model.parameters()})


def test_vit_inference_fast_path():
    """nn.TransformerEncoderLayer in eval mode without grad takes PyTorch's
    fused inference path on a backend that claims it; the result matches."""
    model, batches = build("vit")
    model.eval()
    x = batches[0][0]
    with torch.no_grad():
        ref = model(x)
        out = model.to("tpu")(x.to("tpu")).cpu()
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


def test_llama_bf16_matches_cpu():
    """The whole model in bfloat16: losses and gradients within bf16
    rounding of CPU's bf16 run."""
    r = run_both("llama", torch.bfloat16)
    tl, cl = r["losses"]
    torch.testing.assert_close(tl, cl, atol=0.05, rtol=0.02)
    for n, (a, b) in r["grads"].items():
        scale = b.abs().max().item() + 1e-3
        assert (a - b).abs().max().item() <= 0.1 * scale, f"grad {n}"


if __name__ == "__main__":
    # Figures for the report: python tests/models/test_models.py [steps]; the time
    # per step averages every step after the first (which compiles).
    STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    print(f"{'model':10} {'loss diff':>10} {'grad diff':>10} {'max |grad|':>10} {'tpu s/step':>11} {'cpu s/step':>11}")
    for name in MODELS + ["llama-bf16"]:
        dt = torch.bfloat16 if name.endswith("bf16") else torch.float32
        r = run_both(name.split("-")[0], dt)
        ld, gd, gm = max_diffs(r)
        print(f"{name:10} {ld:10.2e} {gd:10.2e} {gm:10.2e} {r['tpu_step']:11.4f} {r['cpu_step']:11.4f}")
