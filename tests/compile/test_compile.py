"""torch.compile(backend="tpu"): graphs as one program each, matching eager."""
import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torchtpu
import torchtpu.dynamo
from torchtpu.demo import GPT, batches, load_text

torchtpu.dynamo.register()  # the entry point does this where installed


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def clear_compile_log():
    """Empties the compile log (a ring of the last 4096 compiles: an offset
    into a full one finds nothing new) and returns the offset to read from."""
    torchtpu.debug.compiles(clear=True)
    return 0


def graphs_since(log_len):
    return [c for c in torchtpu.debug.compiles()[log_len:] if c["what"].startswith("graph")]


def train(model, steps, batch, compiled, opt_cls=torch.optim.SGD, compile_opt=False, **opt_kw):
    opt = opt_cls(model.parameters(), **opt_kw)
    fwd = torch.compile(model, backend="tpu") if compiled else model
    opt_step = torch.compile(opt.step, backend="tpu") if compile_opt else opt.step
    losses = []
    for i in range(steps):
        x, y = batch(i)
        loss = F.cross_entropy(fwd(x), y)
        opt.zero_grad()
        loss.backward()
        opt_step()
        losses.append(loss.item())
    return losses


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 4))


def cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.GELU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))


@pytest.mark.parametrize("make,shape,classes", [(mlp, (8, 16), 4), (cnn, (4, 3, 16, 16), 3)])
def test_compiled_training_matches_eager(make, shape, classes):
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(5, *shape, generator=g).to("tpu")
    ys = torch.randint(0, classes, (5, shape[0]), generator=g).to("tpu")
    ref_model = make().to("tpu")
    model = copy.deepcopy(ref_model)
    ref = train(ref_model, 5, lambda i: (xs[i], ys[i]), False, lr=0.1, momentum=0.9)
    log_len = clear_compile_log()
    got = train(model, 5, lambda i: (xs[i], ys[i]), True, lr=0.1, momentum=0.9)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), atol=1e-5, rtol=1e-5)
    for k, v in ref_model.state_dict().items():  # BatchNorm statistics included
        torch.testing.assert_close(model.state_dict()[k].cpu(), v.cpu(), atol=1e-5, rtol=1e-4, msg=k)
    kinds = {c["what"].split()[1].rstrip("0123456789") for c in graphs_since(log_len)}
    assert {"forward", "backward"} <= kinds, graphs_since(log_len)


def make_step(m, opt):
    def step(x, y):
        loss = m(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def test_whole_step_with_optimizer_compiled():
    _, chars, data = load_text()
    bs = [(x.to("tpu"), y.to("tpu")) for x, y in batches(data, 4, 2, 16)]
    torch.manual_seed(0)
    ref_model = GPT(len(chars), d=32, layers=1, heads=2, block=16).to("tpu")
    model = copy.deepcopy(ref_model)

    ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=3e-3, eps=1e-4)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, eps=1e-4)
    ref_step = make_step(ref_model, ref_opt)
    step = torch.compile(make_step(model, opt), backend="tpu")
    ref = [ref_step(x, y).item() for x, y in bs]
    got = [step(x, y).item() for x, y in bs]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), atol=2e-5, rtol=1e-5)
    for a, b in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), atol=2e-5, rtol=1e-4)


def test_graph_break_runs_eager_between_graphs():
    def f(x):
        y = (x * 2).sin()
        print("graph break", end="")  # dynamo breaks the graph here
        return (y + 1).cos().sum()

    x = torch.randn(8, 8)
    got = torch.compile(f, backend="tpu")(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), ((x * 2).sin() + 1).cos().sum())


def test_dynamic_shapes_recompile_with_reason():
    f = torch.compile(lambda x: (x * 3).relu().sum(0), backend="tpu", dynamic=False)
    log_len = clear_compile_log()
    for n in (4, 5):
        x = torch.randn(n, 6)
        torch.testing.assert_close(f(x.to("tpu")).cpu(), (x * 3).relu().sum(0))
    graphs = graphs_since(log_len)
    assert len(graphs) == 2, graphs
    assert "first compile of this code" in graphs[0]["reason"], graphs
    # the second says which guard failed: x's size 0 was 4, now 5
    assert "recompiled by Dynamo" in graphs[1]["reason"] and "4" in graphs[1]["reason"] \
        and "5" in graphs[1]["reason"], graphs


def test_mark_dynamic_runs_every_size():
    f = torch.compile(lambda x: torch.tanh(x).mean(0), backend="tpu")
    for n in (3, 7, 11):
        x = torch.randn(n, 5)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 0)
        torch.testing.assert_close(f(xt).cpu(), torch.tanh(x).mean(0))


def test_input_mutation_and_views():
    def f(buf, x):
        buf.add_(x)          # mutates a graph input
        v = buf[1:, ::2]     # a view of it
        return v * 2

    buf = torch.arange(12.0).reshape(3, 4)
    x = torch.ones(3, 4)
    bt = buf.to("tpu")
    out = torch.compile(f, backend="tpu")(bt, x.to("tpu"))
    ref_buf = buf.clone()
    ref = f(ref_buf, x)
    torch.testing.assert_close(out.cpu(), ref)
    torch.testing.assert_close(bt.cpu(), ref_buf)
    # a view as a graph input
    base = torch.randn(6, 6)
    g = torch.compile(lambda t: t.exp() + t.t(), backend="tpu")
    torch.testing.assert_close(g(base.to("tpu")[1:5, 1:5]).cpu(),
                               base[1:5, 1:5].exp() + base[1:5, 1:5].t())


def test_inference_graph_is_one_program():
    model = mlp().to("tpu").eval()
    x = torch.randn(8, 16)
    f = torch.compile(model, backend="tpu")
    with torch.no_grad():
        f(x.to("tpu"))
        before = torchtpu.debug.metrics()["executions"]
        out = f(x.to("tpu"))
        after = torchtpu.debug.metrics()["executions"]
        ref = model.cpu()(x)
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    assert after - before == 1


def test_compiled_graphs_use_the_disk_cache(tmp_path):
    code = textwrap.dedent("""
        import torch, torchtpu, torchtpu.dynamo
        torchtpu.dynamo.register()
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("tpu")
        f = torch.compile(m, backend="tpu")
        x = torch.randn(4, 8).to("tpu")
        loss = f(x).square().mean()
        loss.backward()
        mm = torchtpu.debug.metrics()
        print(repr((loss.item(), mm["compiles"], mm["disk_hits"])), flush=True)
    """)
    env = {**os.environ, "TORCHTPU_CACHE_DIR": str(tmp_path)}
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(eval(out.stdout.strip().splitlines()[-1]))
    assert runs[0][1] > 0
    assert runs[1][1] == 0 and runs[1][2] == runs[0][1]
    assert runs[0][0] == runs[1][0]


# ------------------------------------------------------------ graph replay


def replays():
    return torchtpu.debug.metrics()["graph_replays"]


def recorded_ops():
    return torchtpu.debug.metrics()["fused_ops"]


def test_training_step_replays_without_recording():
    """After the first step, forward, backward and optimizer graphs run
    from their captured programs: no op is recorded, losses and parameters
    match both eager and the recording path. In a fresh process: the
    automatic buckets learn from every upload a process made, and uploads
    of earlier tests change which of this step's inputs are padded."""
    from _proc import check, run_script

    check(run_script("""
        import os
        import sys
        sys.path.insert(0, os.path.join(sys.path[0], "compile"))  # this file's folder
        import torch
        import test_compile as t

        t.replay_training_step()
        print("ok")
    """, timeout=300))


def replay_training_step():
    _, chars, data = load_text()
    bs = [(x.to("tpu"), y.to("tpu")) for x, y in batches(data, 5, 2, 16)]

    def run(compiled):
        torch.manual_seed(0)
        model = GPT(len(chars), d=32, layers=1, heads=2, block=16).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, eps=1e-4)
        step = make_step(model, opt)
        if compiled:
            step = torch.compile(step, backend="tpu")
        losses = []
        for i, (x, y) in enumerate(bs):
            if i == 2:
                counts = (replays(), recorded_ops())
            losses.append(step(x, y).item())
        return losses, [p.detach().cpu() for p in model.parameters()], counts

    ref, ref_params, _ = run(False)
    got, params, (r0, ops0) = run(True)
    assert replays() - r0 == 3 * 3  # forward, backward, optimizer x 3 steps
    assert recorded_ops() == ops0
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), atol=2e-5, rtol=1e-5)
    for a, b in zip(params, ref_params):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)
    torch._dynamo.reset()
    os.environ["TORCHTPU_GRAPH_REPLAY"] = "0"
    r1 = replays()
    recorded, recorded_params, _ = run(True)
    assert replays() == r1
    assert recorded == got  # replaying is bit-identical to recording
    for a, b in zip(params, recorded_params):
        assert torch.equal(a, b)


def test_replay_outputs_alias_like_recorded():
    """Outputs that are an input, views of an input, and several views of
    one new storage come back with the same sharing, and in-place input
    updates land in the caller's tensors on every call."""
    def f(buf, x):
        buf.mul_(2).add_(x)
        y = x * 3
        return buf, buf[1], buf.t(), y, y[0], y.t()

    g = torch.compile(f, backend="tpu")
    buf_c, x_c = torch.arange(6.0).reshape(2, 3), torch.ones(2, 3)
    buf, x = buf_c.to("tpu"), x_c.to("tpu")
    r0 = replays()
    for i in range(3):
        got = g(buf, x)
        ref = f(buf_c, x_c)
        for a, b in zip(got, ref):
            torch.testing.assert_close(a.cpu(), b)
        assert got[0] is buf
        assert got[1].untyped_storage().data_ptr() == buf.untyped_storage().data_ptr()
        assert got[1].storage_offset() == 3 and got[2].stride() == (1, 3)
        assert got[4].untyped_storage().data_ptr() == got[3].untyped_storage().data_ptr()
        got[4].fill_(-1)  # writes through to y, as with eager views
        assert got[3][0].cpu().eq(-1).all()
        torch.testing.assert_close(buf.cpu(), buf_c)
    assert replays() - r0 == 2


def test_replay_falls_back_when_storages_differ():
    """Inputs whose storages differ from the capture's (never written, or
    two inputs in one storage) record the graph again: the answer stays
    right."""
    def f(a, b):
        a.add_(1)
        return a * b

    g = torch.compile(f, backend="tpu")
    a, b = torch.randn(4), torch.randn(4)
    at, bt = a.clone().to("tpu"), b.to("tpu")
    torch.testing.assert_close(g(at, bt).cpu(), (a + 1) * b)
    r0 = replays()
    torch.testing.assert_close(g(at, bt).cpu(), (a + 2) * b)
    assert replays() == r0 + 1
    # a storage never written (no value on the device, reads as zeros):
    # the program was compiled for one that holds a value
    e = torch.empty(4, device="tpu")
    fused0 = torchtpu.debug.metrics()["fused_windows"]
    torch.testing.assert_close(g(e, bt).cpu(), b)
    assert replays() == r0 + 1 and torchtpu.debug.metrics()["fused_windows"] == fused0 + 1
    torch.testing.assert_close(g(at, bt).cpu(), (a + 3) * b)
    assert replays() == r0 + 2
    base = torch.randn(8)
    bt2 = base.to("tpu")
    x, y = bt2[:4], bt2[4:]  # two inputs in one storage
    torch.testing.assert_close(g(x, y).cpu(), (base[:4] + 1) * base[4:])
    torch.testing.assert_close(bt2.cpu()[:4], base[:4] + 1)


def test_replay_random_ops_follow_the_generator(monkeypatch):
    def run():
        torch._dynamo.reset()
        f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True) * 2,
                          backend="tpu")
        torch.manual_seed(5)
        x = torch.ones(64).to("tpu")
        return [f(x).cpu() for _ in range(4)]

    r0 = replays()
    replayed = run()
    assert replays() - r0 == 3
    assert not torch.equal(replayed[1], replayed[2])  # the state advances
    monkeypatch.setenv("TORCHTPU_GRAPH_REPLAY", "0")
    recorded = run()
    for a, b in zip(replayed, recorded):
        assert torch.equal(a, b)


def test_graph_with_host_tensors_is_not_replayed():
    f = torch.compile(lambda x, s: x * s.to("tpu") + 1, backend="tpu")
    x = torch.randn(5).to("tpu")
    r0 = replays()
    for k in range(3):
        s = torch.tensor(float(k))
        torch.testing.assert_close(f(x, s).cpu(), x.cpu() * k + 1)
    assert replays() == r0
