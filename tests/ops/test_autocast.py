"""Mixed precision on tpu: torch.autocast("tpu") and its op policy
(csrc/torch/runtime/autocast.cpp), torch.amp.GradScaler("tpu"), and
torch.set_float32_matmul_precision mapped onto XLA's precision config."""
import copy
import glob

import pytest
import torch
import torch.nn.functional as F

import torchtpu

import models as M
from optest import DEV, rand

BF16 = torch.bfloat16


def test_autocast_api():
    assert torch.amp.is_autocast_available(DEV)
    assert torch.get_autocast_dtype(DEV) == BF16  # the TPU's native type
    assert not torch.is_autocast_enabled(DEV)
    with torch.autocast(DEV):
        assert torch.is_autocast_enabled(DEV)
        assert not torch.is_autocast_enabled("cpu")
        with torch.autocast(DEV, enabled=False):
            assert not torch.is_autocast_enabled(DEV)
    with torch.tpu.amp.autocast():
        assert torch.is_autocast_enabled(DEV)
        assert torch.get_autocast_dtype(DEV) == BF16
    with torch.autocast(DEV, dtype=torch.float16):
        assert torch.get_autocast_dtype(DEV) == torch.float16
    assert not torch.is_autocast_enabled(DEV)


a32, b32 = rand(8, 16), rand(16, 8)
x4 = rand(2, 4, 8, 16)  # [batch, heads, seq, head_dim]
img = rand(2, 3, 8, 8)
w_conv = rand(4, 3, 3, 3)
lin_w, lin_b = rand(8, 16), rand(8)

LOWER = {
    "mm": lambda t: torch.mm(t["a"], t["b"]),
    "matmul": lambda t: t["a"] @ t["b"],
    "linear": lambda t: F.linear(t["a"], t["lw"], t["lb"]),
    "addmm": lambda t: torch.addmm(t["lb"], t["a"], t["lw"].t()),
    "bmm": lambda t: torch.bmm(t["a"][None], t["b"][None]),
    "baddbmm": lambda t: torch.baddbmm(t["lb"][None, None], t["a"][None], t["lw"].t()[None]),
    "conv2d": lambda t: F.conv2d(t["img"], t["wc"], padding=1),
    "sdpa": lambda t: F.scaled_dot_product_attention(t["x4"], t["x4"], t["x4"], is_causal=True),
}

FP32 = {
    "softmax": lambda t: torch.softmax(t["h"], -1),
    "log_softmax": lambda t: F.log_softmax(t["h"], -1),
    "layer_norm": lambda t: F.layer_norm(t["h"], (16,)),
    "group_norm": lambda t: F.group_norm(t["h"][:, :, None], 4),
    "sum": lambda t: t["h"].sum(),
    "sum_dim": lambda t: t["h"].sum(-1),
    "mean": lambda t: t["h"].mean(),
    "mean_dim": lambda t: t["h"].mean(-1, keepdim=True),
    "cumsum": lambda t: t["h"].cumsum(0),
    "exp": lambda t: t["h"].exp(),
    "log": lambda t: t["h"].abs().log(),
    "pow": lambda t: t["h"].pow(2),
    "rsqrt": lambda t: (t["h"].abs() + 1).rsqrt(),
    "mse_loss": lambda t: F.mse_loss(t["h"], t["h"].flip(0)),
    "cross_entropy": lambda t: F.cross_entropy(t["h"], torch.arange(8, device=t["h"].device) % 16),
    "bce_logits": lambda t: F.binary_cross_entropy_with_logits(t["h"], t["h"].sigmoid()),
    "norm": lambda t: t["h"].norm(),
}

PROMOTE = {
    "cat": lambda t: torch.cat([t["h"], t["a"]]),
    "stack": lambda t: torch.stack([t["h"], t["a"]]),
    "addcmul": lambda t: torch.addcmul(t["a"], t["h"], t["h"]),
}


def _inputs(device):
    t = dict(a=a32, b=b32, x4=x4, img=img, wc=w_conv, lw=lin_w, lb=lin_b, h=a32.to(BF16))
    return {k: v.to(device) for k, v in t.items()}


def _run(fn, device):
    with torch.autocast(device, dtype=BF16):
        return fn(_inputs(device))


@pytest.mark.parametrize("name", LOWER)
def test_policy_lower_precision(name):
    """Contractions take float32 inputs and run in bfloat16, with CPU
    autocast's values."""
    out = _run(LOWER[name], DEV)
    assert out.dtype == BF16
    ref = _run(LOWER[name], "cpu")
    assert ref.dtype == BF16  # CPU autocast agrees on these
    torch.testing.assert_close(out.cpu(), ref, atol=3e-2, rtol=2e-2)


@pytest.mark.parametrize("name", FP32)
def test_policy_fp32(name):
    """Ops 16 bits are too few for take bfloat16 inputs and compute in float32."""
    out = _run(FP32[name], DEV)
    assert out.dtype == torch.float32
    # The reference computes everything in float32 from the same bfloat16
    # values; unlisted ops before the listed one (abs, +) ran in bfloat16.
    ref = FP32[name]({k: v.float() for k, v in _inputs("cpu").items()})
    torch.testing.assert_close(out.cpu(), ref, atol=1e-2, rtol=1.6e-2)
    if name in ("softmax", "log_softmax", "layer_norm", "sum", "mean", "exp", "pow", "cross_entropy"):
        # the op itself reads bfloat16 and computes in float32: exact
        torch.testing.assert_close(out.cpu(), ref, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("name", PROMOTE)
def test_policy_promote(name):
    assert _run(PROMOTE[name], DEV).dtype == torch.float32


def test_unlisted_ops_keep_their_dtype():
    with torch.autocast(DEV):
        h = a32.to(BF16).to(DEV)
        assert torch.relu(h).dtype == BF16
        assert (h * 2).dtype == BF16
        assert (h + a32.to(DEV)).dtype == torch.float32  # ordinary promotion
        assert torch.mm(a32.to(DEV).double(), b32.to(DEV).double()).dtype == torch.float64  # not eligible


def test_autocast_backward_grads_are_fp32():
    lin = torch.nn.Linear(16, 8).to(DEV)
    with torch.autocast(DEV):
        y = lin(a32.to(DEV))
        assert y.dtype == BF16
        loss = y.float().pow(2).mean()
    loss.backward()
    assert lin.weight.grad.dtype == torch.float32 and lin.bias.grad.dtype == torch.float32


def _train_autocast(model, batches, device, scaler=None, steps=3):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-4)
    losses = []
    for x, y in batches[:steps]:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device, dtype=BF16):
            loss = model(x, y)
        opt.zero_grad()
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses.append(loss.detach().float().cpu())
    return torch.stack(losses)


def _lm_batches(vocab, n=3):
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(n):
        idx = torch.randint(0, vocab, (2, 17), generator=g)
        out.append((idx[:, :-1].contiguous(), idx[:, 1:].contiguous()))
    return out


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_model_trains_under_autocast_like_cpu(arch):
    torch.manual_seed(0)
    model = M.Llama(M.LlamaConfig(layers=1)) if arch == "llama" else M.GPT2(M.GPT2Config(layers=1))
    batches = _lm_batches(96)
    ref = copy.deepcopy(model)
    before = dict(torchtpu.debug.metrics()["cpu_fallbacks"])
    tl = _train_autocast(model, batches, DEV)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == before
    cl = _train_autocast(ref, batches, "cpu")
    # bf16 rounding of different kernels; a loss is ~4.6
    torch.testing.assert_close(tl, cl, atol=0.03, rtol=0.01)
    assert tl[-1] < tl[0]


def test_grad_scaler_matches_cpu():
    """GradScaler("tpu") scales, unscales, steps and grows like the CPU one;
    an injected overflow skips the step and backs the scale off."""
    torch.manual_seed(0)
    model = M.GPT2(M.GPT2Config(layers=1))
    batches = _lm_batches(96, 4)
    ref = copy.deepcopy(model)
    scales = {}
    for dev, m in ((DEV, model), ("cpu", ref)):
        scaler = torch.amp.GradScaler(dev, init_scale=2.0**10, growth_interval=2)
        _train_autocast(m, batches, dev, scaler, steps=3)
        # an overflow: the step is skipped, the scale halves
        before = [p.detach().clone() for p in m.parameters()]
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        opt.zero_grad()
        x, y = batches[3]
        with torch.autocast(dev, dtype=BF16):
            loss = m(x.to(dev), y.to(dev))
        scaler.scale(loss * float("inf")).backward()
        scaler.step(opt)
        scaler.update()
        assert all(torch.equal(a.cpu(), p.detach().cpu()) for a, p in zip(before, m.parameters()))
        scales[dev] = scaler.get_scale()
    assert scales[DEV] == scales["cpu"]
    for (n, a), b in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), atol=2e-2, rtol=2e-2, msg=n)


def test_torch_tpu_amp_grad_scaler():
    scaler = torch.tpu.amp.GradScaler(init_scale=8.0)
    p = torch.nn.Parameter(torch.ones(3, device=DEV))
    opt = torch.optim.SGD([p], lr=1.0)
    scaler.scale((p * 2).sum()).backward()
    assert p.grad.cpu().tolist() == [16.0] * 3
    scaler.step(opt)
    scaler.update()
    assert p.detach().cpu().tolist() == [-1.0] * 3


# ------------------------------------------------------- matmul precision


@pytest.mark.parametrize("setting,config", [("highest", "HIGHEST"), ("high", "HIGH"), ("medium", "DEFAULT")])
def test_float32_matmul_precision_maps_to_xla(setting, config, tmp_path, monkeypatch):
    """Each setting compiles its own program with the matching precision
    config on every float32 contraction; float64 is always HIGHEST."""
    monkeypatch.setenv("TORCHTPU_DUMP_DIR", str(tmp_path))
    # shapes no other test uses, so each program compiles (and is dumped) here
    a, b = rand(5, 7, seed=setting).to(DEV), rand(7, 3, seed=setting).to(DEV)
    w = rand(2, 3, 3, 3, seed=setting).to(DEV)
    try:
        torch.set_float32_matmul_precision(setting)
        out = (a @ b).cpu()
        F.conv2d(rand(1, 3, 5, 7, seed=setting).to(DEV), w).cpu()
        (a.double() @ b.double()).cpu()
    finally:
        torch.set_float32_matmul_precision("highest")
    def programs(op):
        return [open(p).read() for p in glob.glob(str(tmp_path / f"{op}-*.mlir"))]

    f32_mm = [t for t in programs("mm") if "f64" not in t]
    f64_mm = [t for t in programs("mm") if "f64" in t]
    assert len(f32_mm) == 1 and f"precision {config}>" in f32_mm[0]
    assert len(f64_mm) == 1 and "precision HIGHEST>" in f64_mm[0]
    conv = programs("convolution")
    assert len(conv) == 1 and f"precision {config}>" in conv[0]
    # on this plugin every setting computes in full float32
    torch.testing.assert_close(out, a.cpu() @ b.cpu(), atol=1e-5, rtol=1e-5)


def test_matmul_precision_is_part_of_the_signature():
    a = rand(6, 6, seed="sig").to(DEV)
    try:
        for setting in ("highest", "medium"):
            torch.set_float32_matmul_precision(setting)
            (a @ a).cpu()
            before = torchtpu.debug.metrics()["compiles"]
            (a @ a).cpu()
            assert torchtpu.debug.metrics()["compiles"] == before  # cached per setting
        torch.set_float32_matmul_precision("high")
        before = torchtpu.debug.metrics()["compiles"]
        (a @ a).cpu()
        assert torchtpu.debug.metrics()["compiles"] == before + 1  # a new program
    finally:
        torch.set_float32_matmul_precision("highest")
