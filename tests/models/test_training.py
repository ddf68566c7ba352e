"""Small models train on tpu with loss curves matching the same run on CPU:
an MLP (SGD), a CNN (SGD with momentum) and the demo's GPT (AdamW)."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torchtpu
from torchtpu.demo import GPT, batches, load_text


def run(model, device, steps, make_batch, opt_fn, loss_fn):
    model = model.to(device)
    opt = opt_fn(model.parameters())
    losses = []
    for step in range(steps):
        x, y = make_batch(step)
        x, y = x.to(device), y.to(device)
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack([l.cpu() for l in losses])


def compare(model, steps, make_batch, opt_fn, loss_fn, atol):
    ref = copy.deepcopy(model)
    tpu = run(model, "tpu", steps, make_batch, opt_fn, loss_fn)
    cpu = run(ref, "cpu", steps, make_batch, opt_fn, loss_fn)
    torch.testing.assert_close(tpu, cpu, atol=atol, rtol=1e-3)
    assert tpu[-5:].mean() < tpu[:5].mean(), "the model did not learn"
    # the parameters after training agree too
    for (name, a), b in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), atol=atol * 10, rtol=1e-3, msg=name)


def test_mlp_sgd():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(20, 8, 16, generator=g)
    ys = (xs @ torch.randn(16, 4, generator=g)).argmax(-1)  # learnable labels
    compare(model, 20, lambda i: (xs[i], ys[i]), lambda p: torch.optim.SGD(p, lr=0.2), F.cross_entropy, 1e-5)


def test_cnn_sgd_momentum():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.GELU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 3),
    )
    g = torch.Generator().manual_seed(2)
    xs = torch.randn(20, 4, 3, 16, 16, generator=g)
    ys = xs.mean(dim=(3, 4)).argmax(-1)  # learnable labels: brightest channel
    compare(
        model, 20, lambda i: (xs[i], ys[i]),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
        F.cross_entropy, 1e-4,
    )


def test_transformer_adamw():
    _, chars, data = load_text()
    torch.manual_seed(0)
    model = GPT(len(chars), d=32, layers=2, heads=4, block=32)
    batch_list = list(batches(data, 20, 4, 32))
    compare(
        model, 20, lambda i: batch_list[i],
        lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01),
        lambda logits, y: F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)), 1e-4,
    )


def test_transformer_step_compiles_once():
    """The second training step reuses every program of the first."""
    _, chars, data = load_text()
    torch.manual_seed(0)
    model = GPT(len(chars), d=32, layers=1, heads=2, block=16).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps = list(batches(data, 3, 2, 16))
    counts = []
    for x, y in steps:
        loss = model(x.to("tpu"), y.to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        counts.append(torchtpu.debug.metrics()["compiles"])
    assert counts[2] == counts[1], f"step 3 compiled {counts[2] - counts[1]} new programs"
