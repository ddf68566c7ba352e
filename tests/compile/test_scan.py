"""PyTorch's scan and torchtpu.scan_layers as one stablehlo.while: forward and
backward against the CPU in strict, fused and compiled modes; the loop's
program count does not grow with its length; bodies that cannot be a loop
fail clearly; a scanned training step compiles for a TPU with libtpu."""
import copy
import json
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._higher_order_ops.scan import scan

import torchtpu
import torchtpu.aot as aot
import torchtpu.dynamo

torchtpu.dynamo.register()

MODES = ["strict", "fused", "compiled"]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def run(mode, fn, *args):
    if mode == "compiled":
        return torch.compile(fn, backend="tpu", fullgraph=True)(*args)
    with torchtpu.set_eager_mode(mode):
        return fn(*args)


def programs_compiled(fn):
    """How many programs fn compiled (or loaded from the disk cache)."""
    torchtpu.debug.compiles(clear=True)
    fn()
    torch.tpu.synchronize()
    return torchtpu.debug.compiles()


# ------------------------------------------------------------------ scan


def rnn_loss(h0, xs, w, b):
    def step(h, x):
        h = torch.tanh(h @ w + x + b)
        return h, h.sum(-1)

    h, ys = scan(step, h0, xs)
    return h.sum() + (ys * torch.arange(ys.shape[0], device=ys.device)[:, None]).sum()


def rnn_inputs(length=5, batch=3, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, d, generator=g), torch.randn(length, batch, d, generator=g),
            torch.randn(d, d, generator=g) * 0.3, torch.randn(d, generator=g)]


def grads_of(loss_fn, inputs, mode=None):
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    loss = loss_fn(*leaves) if mode is None else run(mode, loss_fn, *leaves)
    loss.backward()
    return loss.detach().cpu(), [t.grad.cpu() for t in leaves]


@pytest.mark.parametrize("mode", MODES)
def test_scan_forward_matches_cpu(mode):
    cpu = rnn_inputs()
    want = rnn_loss(*cpu)
    with torch.no_grad():
        got = run(mode, rnn_loss, *[t.to("tpu") for t in cpu])
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_scan_backward_matches_cpu(mode):
    cpu = rnn_inputs()
    want_loss, want = grads_of(rnn_loss, cpu)
    got_loss, got = grads_of(rnn_loss, [t.to("tpu") for t in cpu], mode)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=1e-5)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_scan_outputs_like_cpu():
    """Several carries and ys, an integer carry, ys of other shapes."""
    def two(c, x):
        a, n = c
        a = a + x
        return (a, n + 1), (a * 2, x.sum())

    g = torch.Generator().manual_seed(3)
    xs = torch.randn(4, 2, 3, generator=g)
    init = (torch.zeros(2, 3), torch.zeros((), dtype=torch.int64))
    want = scan(two, init, xs)
    got = scan(two, tuple(t.to("tpu") for t in init), xs.to("tpu"))
    for w, o in zip(torch.utils._pytree.tree_leaves(want), torch.utils._pytree.tree_leaves(got)):
        assert o.device.type == "tpu" and o.dtype == w.dtype and o.shape == w.shape
        torch.testing.assert_close(o.cpu(), w)


def test_loop_programs_do_not_grow_with_length():
    """A loop of 3 steps and one of 24 compile the same programs: one body.
    (A first run compiles what no shape decides, as the scalar loss.) It runs
    in a fresh process with the disk cache off, so that no program another
    test compiled is already in the memory cache and every count is exact."""
    from _proc import check, run_script

    out = check(run_script("""
        import json
        import os
        import sys
        sys.path.insert(0, os.path.join(sys.path[0], "compile"))  # this file's folder
        from test_scan import grads_of, programs_compiled, rnn_inputs, rnn_loss

        def once(length, d):
            inputs = [t.to("tpu") for t in rnn_inputs(length=length, d=d)]
            return programs_compiled(lambda: grads_of(rnn_loss, inputs, "strict"))

        once(2, 5)
        short, long = once(3, 13), once(24, 17)
        print(json.dumps([[c["what"] for c in short], [c["what"] for c in long]]))
        print("ok")
    """, timeout=300, TORCHTPU_DISK_CACHE="0"))
    import json
    short, long = json.loads(out.splitlines()[-2])
    assert sorted(short) == sorted(long), (short, long)
    assert long.count("torchtpu::extern_call") == 2, long  # the forward scan and the backward scan


# ------------------------------------------------------------ scan_layers


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Stack(nn.Module):
    def __init__(self, n, d=16, scanned=True):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList(Block(d) for _ in range(n))
        self.head = nn.Linear(d, 4)
        self.scanned = scanned

    def forward(self, x):
        if self.scanned:
            x = torchtpu.scan_layers(self.layers, x)
        else:
            for layer in self.layers:
                x = layer(x)
        return self.head(x).square().mean()


def layer_grads(model, x, mode=None):
    loss = model(x) if mode is None else run(mode, model, x)
    loss.backward()
    return loss.detach().cpu(), {n: p.grad.cpu() for n, p in model.named_parameters()}


@pytest.mark.parametrize("mode", MODES)
def test_scan_layers_matches_cpu(mode):
    ref = Stack(3, scanned=False)
    model = copy.deepcopy(ref)
    model.scanned = True
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1))
    want_loss, want = layer_grads(ref, x)
    got_loss, got = layer_grads(model.to("tpu"), x.to("tpu"), mode)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=1e-5)
    assert want.keys() == got.keys()
    for n in want:
        torch.testing.assert_close(got[n], want[n], rtol=1e-4, atol=1e-5, msg=n)


class Scaled(nn.Module):
    """A layer with an argument every layer gets: gradients reach it too."""

    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.register_buffer("shift", torch.randn(d) * 0.1)

    def forward(self, x, scale):
        return torch.tanh(self.lin(x) * scale + self.shift)


@pytest.mark.parametrize("mode", MODES)
def test_scan_layers_arguments_and_buffers(mode):
    torch.manual_seed(2)
    layers = nn.ModuleList(Scaled(8) for _ in range(4))
    x = torch.randn(3, 8)
    scale = torch.rand(8) + 0.5

    def loss_cpu(x, scale):
        for layer in layers:
            x = layer(x, scale)
        return x.square().sum()

    xc, sc = x.clone().requires_grad_(), scale.clone().requires_grad_()
    want = loss_cpu(xc, sc)
    want.backward()
    tpu_layers = copy.deepcopy(layers).to("tpu")
    for p in tpu_layers.parameters():
        p.grad = None

    def loss_tpu(x, scale):
        return torchtpu.scan_layers(tpu_layers, x, scale).square().sum()

    xt, st = x.to("tpu").requires_grad_(), scale.to("tpu").requires_grad_()
    got = run(mode, loss_tpu, xt, st)
    got.backward()
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(st.grad.cpu(), sc.grad, rtol=1e-4, atol=1e-5)
    for (n, p), q in zip(tpu_layers.named_parameters(), layers.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=n)


class Attend(nn.Module):
    """Causal self-attention: its mask is a fill of the sequence's length."""

    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return x + F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Tokens(nn.Module):
    def __init__(self, n, d=16, vocab=32, scanned=True):
        super().__init__()
        torch.manual_seed(3)
        self.tok = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Attend(d) for _ in range(n))
        self.scanned = scanned

    def forward(self, ids):
        x = self.tok(ids)
        if self.scanned:
            x = torchtpu.scan_layers(self.layers, x)
        else:
            for layer in self.layers:
                x = layer(x)
        return x.square().mean()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("length", [64, 100])
def test_scan_layers_over_a_token_batch(mode, length):
    """Token ids of such lengths are stored padded to their bucket, and so
    are fills of their length (the causal mask): the loop body is traced
    exact all the same, and the loop takes the padded embedding output."""
    ref = Tokens(3, scanned=False)
    model = copy.deepcopy(ref)
    model.scanned = True
    ids = torch.randint(0, 32, (2, length), generator=torch.Generator().manual_seed(4))
    want_loss, want = layer_grads(ref, ids)
    got_loss, got = layer_grads(model.to("tpu"), ids.to("tpu"), mode)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=1e-5)
    for n in want:
        torch.testing.assert_close(got[n], want[n], rtol=1e-4, atol=1e-5, msg=n)


@pytest.mark.parametrize("mode", MODES)
def test_scan_layers_gradients_are_their_own_tensors(mode):
    """Each layer's parameter gradient is a tensor of its own in the eager
    modes (a row of the stacked gradient would be a slice in every optimizer
    program). Compiled, they are the backward graph's rows, as stack's
    backward gives them (an autograd.Function there costs Dynamo's tracing
    more than the rows cost the optimizer)."""
    model = Stack(4).to("tpu")
    layer_grads(model, torch.randn(2, 5, 16).to("tpu"), mode)
    grads = [p.grad for p in model.layers.parameters()]
    storages = {g.untyped_storage().data_ptr() for g in grads}
    if mode != "compiled":
        assert all(g._base is None for g in grads)
        assert len(storages) == len(grads)


@pytest.mark.parametrize("mode", MODES)
def test_scan_layers_without_state(mode):
    """Layers with no parameters or buffers: nothing to stack, the layers
    run as they are."""
    layers = nn.ModuleList(nn.Tanh() for _ in range(3))
    x = torch.randn(2, 4)
    xc = x.clone().requires_grad_()
    want = xc
    for layer in layers:
        want = layer(want)
    want.sum().backward()
    xt = x.to("tpu").requires_grad_()
    got = run(mode, lambda t: torchtpu.scan_layers(layers, t), xt)
    got.sum().backward()
    torch.testing.assert_close(got.detach().cpu(), want.detach())
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)


def depth_programs(mode):
    """Programs a training step's first run compiles at 2 and at 12 layers
    (each of its own width, after a first run at a third one)."""
    def once(n, d):
        model = Stack(n, d=d).to("tpu")
        x = torch.randn(3, 7, d).to("tpu")
        return programs_compiled(lambda: layer_grads(model, x, mode))

    once(5, 8)
    return once(2, 16), once(12, 24)


@pytest.mark.parametrize("mode", MODES)
def test_scan_layers_programs_do_not_grow_with_depth(mode):
    two, twelve = depth_programs(mode)
    if mode == "strict":
        # One program per op and signature: which signatures coincide
        # (storage sizes) differs with the widths, not what compiles.
        assert {c["what"] for c in two} == {c["what"] for c in twelve}, (two, twelve)
        for run in (two, twelve):  # the forward loop and the backward loop
            assert sum(c["what"] == "torchtpu::extern_call" for c in run) == 2, run
        return
    assert len(two) == len(twelve), (two, twelve)
    assert [c["ops"] for c in two] == [c["ops"] for c in twelve], (two, twelve)
    if mode == "compiled":  # the forward graph and the backward graph
        assert sum(c["what"].startswith("graph") for c in twelve) == 2, twelve


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_scan_layers_second_step_compiles_nothing(mode):
    """The first step traces the loop bodies; the steps after it trace
    nothing. The windows a fused first step records around its loops are
    those of every later step (tracing a body leaves the window recorded),
    so the second step compiles nothing, and no stack of parameters is
    taken for a growing tensor."""
    from _proc import check, run_script

    out = check(run_script("""
        import json, os, sys, torch, torchtpu
        sys.path.insert(0, os.environ["SCAN_TESTS"])
        from test_scan import Stack
        torchtpu.set_eager_mode(os.environ["MODE"])
        model = Stack(3).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        x = torch.randn(2, 5, 16).to("tpu")
        counts = []
        for step in range(3):
            torchtpu.debug.compiles(clear=True)
            loss = model(x)
            loss.backward()
            opt.step()
            opt.zero_grad()
            loss.item()
            torch.tpu.synchronize()
            counts.append(len(torchtpu.debug.compiles()))
            assert not [c for c in torchtpu.debug.compiles() if "grows" in c["reason"]]
        print(json.dumps(counts))
        print("ok")
    """, SCAN_TESTS=os.path.dirname(os.path.abspath(__file__)), MODE=mode, TORCHTPU_DISK_CACHE="0"))
    counts = json.loads(out.splitlines()[-2])
    assert counts[0] > 0 and counts[1:] == [0, 0], counts


# ----------------------------------------------------------------- errors


def test_scan_layers_refuses_unlike_layers():
    layers = [nn.Linear(4, 4), nn.Linear(4, 4, bias=False)]
    with pytest.raises(ValueError, match="other parameters"):
        torchtpu.scan_layers([l.to("tpu") for l in layers], torch.zeros(2, 4, device="tpu"))
    with pytest.raises(TypeError, match="alike"):
        torchtpu.scan_layers([nn.Linear(4, 4).to("tpu"), nn.Tanh()], torch.zeros(2, 4, device="tpu"))


def test_dropout_in_a_body_raises_clearly():
    layers = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)) for _ in range(2)).to("tpu")
    with pytest.raises((NotImplementedError, RuntimeError), match="random numbers"):
        torchtpu.scan_layers(layers, torch.ones(2, 4, device="tpu"))
    layers.eval()  # no dropout: runs
    out = torchtpu.scan_layers(layers, torch.ones(2, 4, device="tpu"))
    ref = torch.ones(2, 4)
    for layer in layers:
        ref = layer.cpu()(ref)
    torch.testing.assert_close(out.cpu(), ref)


def test_host_read_in_a_body_raises_clearly():
    def step(h, x):
        if (h + x).sum().item() > 1e9:
            h = h * 2
        return h + x, h

    with pytest.raises(Exception, match="loop body"):
        torchtpu.scan._run_scan(lambda h, x: step(h, x), [torch.zeros(3, device="tpu")],
                                [torch.ones(2, 3, device="tpu")], [])
    # the runtime goes on
    assert (torch.ones(3, device="tpu") + 1).sum().item() == 6


# ------------------------------------------------------------------ libtpu

_ok, _why = aot.available()


@pytest.mark.skipif(not _ok, reason=f"libtpu not installed: {_why}")
def test_scanned_step_compiles_for_v5e():
    x = torch.randn(2, 8, 16)
    counts = []
    for n in (2, 12):
        report = aot.compile_for(Stack(n), (x,), topology="v5e:2x2")
        assert not report.failures and report.fits
        names = {p.name.split("-")[0] for p in report.programs}
        assert "torchtpu::extern_call" in names, names
        counts.append(len(report.programs))
    assert counts[1] <= counts[0], counts  # the depth adds no program
