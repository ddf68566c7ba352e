"""torch.profiler on device tpu: ops with device time measured by the engine,
compiles and host<->device transfers as their own events, the Chrome trace,
both ways in (Kineto's ProfilerActivity.PrivateUse1 and the legacy
torch.autograd.profiler.profile(use_device="tpu")), and nothing left
running once the profiler stops. No test asserts a speed."""
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import torchtpu

TPU_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

needs_kineto = pytest.mark.skipif(
    not torchtpu._C._profiler_has_kineto(),
    reason="this torch was built without Kineto (no device activities)")


@pytest.fixture(autouse=True)
def strict_mode():
    yield
    torchtpu.set_eager_mode("strict")
    torch.tpu.synchronize()


def model_and_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 40), nn.GELU(), nn.Linear(40, 8)).to("tpu")
    x = torch.randn(16, 24).to("tpu")
    y = torch.randn(16, 8).to("tpu")
    return model, x, y


def train_step(model, x, y):
    model.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    return loss


def averages(prof):
    return {e.key: e for e in prof.key_averages()}


def device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def named(prof, name):
    return [e for e in prof.events() if e.name == name]


# ------------------------------------------------------------ device time


@needs_kineto
def test_training_step_ops_have_device_time():
    model, x, y = model_and_batch()
    train_step(model, x, y)  # compiles happen here, not in the profile
    torch.tpu.synchronize()
    with profile(activities=TPU_ACTIVITIES) as prof:
        train_step(model, x, y)
    avg = averages(prof)
    # forward and backward ops, the backward ones run by autograd's device
    # thread
    for name in ("aten::addmm", "aten::gelu", "aten::mse_loss", "aten::mm",
                 "aten::gelu_backward", "aten::mse_loss_backward"):
        assert name in avg, sorted(avg)
        assert avg[name].device_time_total > 0, name
        assert avg[name].self_device_time_total > 0, name
    assert avg["autograd::engine::evaluate_function: AddmmBackward0"].device_time_total > 0
    # Ops that launch nothing have none.
    assert avg["aten::t"].device_time_total == 0
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=20)
    assert "Self TPU" in table and "TPU total" in table
    assert "aten::addmm" in table


@needs_kineto
def test_device_time_comes_from_the_device_track():
    model, x, y = model_and_batch()
    train_step(model, x, y)
    torch.tpu.synchronize()
    with profile(activities=TPU_ACTIVITIES) as prof:
        train_step(model, x, y)
    programs = device_events(prof)
    names = {e.name for e in programs}
    # the device track holds the engine's programs, named by what they run
    assert {"addmm", "gelu", "mm"} <= names, names
    cpu_ops = [e for e in prof.events() if e.device_type == DeviceType.CPU]
    start = min(e.time_range.start for e in cpu_ops)
    end = max(e.time_range.end for e in cpu_ops)
    for e in programs:
        assert e.time_range.end >= e.time_range.start
        assert start <= e.time_range.start and e.time_range.end <= end + 1e6
    # Each op's device time is the sum of its programs' time on the device,
    # not a copy of its own CPU time.
    addmm = [e for e in prof.events() if e.name == "aten::addmm"]
    assert addmm
    for op in addmm:
        kernels = sum(k.duration for k in op.kernels)
        assert kernels == pytest.approx(op.device_time_total)
        assert op.kernels and all(k.name == "addmm" for k in op.kernels)


# ------------------------------------------------------------ compiles


@needs_kineto
def test_compile_event_on_a_cold_op_not_on_a_cache_hit():
    # A shape no other test compiles: the first call compiles, the second
    # finds the program in memory.
    x = torch.randn(13, 29, 3).to("tpu")
    torch.tpu.synchronize()
    with profile(activities=TPU_ACTIVITIES, record_shapes=True) as cold:
        (x * 2.5).sum().cpu()
    compiles = named(cold, "tpu::compile")
    assert compiles, "a cold op compiles"
    # inside the op that needed it, named by its program
    parents = {c.cpu_parent.name for c in compiles if c.cpu_parent is not None}
    assert {"aten::mul", "aten::sum"} <= parents, parents
    programs = {c.kwinputs.get("program") for c in compiles if getattr(c, "kwinputs", None)}
    if hasattr(compiles[0], "kwinputs"):
        assert "mul.Tensor" in programs, programs
    assert averages(cold)["tpu::compile"].cpu_time_total > 0

    with profile(activities=TPU_ACTIVITIES) as warm:
        (x * 2.5).sum().cpu()
    assert named(warm, "tpu::compile") == []
    assert averages(warm)["aten::mul"].device_time_total > 0


def test_cpu_only_profile_shows_compiles_without_timing_the_device():
    x = torch.randn(11, 31, 2).to("tpu")
    torch.tpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        if torchtpu._C._profiler_has_kineto():
            assert torchtpu._C._profiler_hook() == 1  # compiles, no launches
        (x - 0.75).cpu()
    if torchtpu._C._profiler_has_kineto():
        assert named(prof, "tpu::compile")
    assert device_events(prof) == []
    assert all(e.device_time_total == 0 for e in prof.key_averages())


# ------------------------------------------------------------ transfers


@needs_kineto
def test_transfers_are_their_own_events():
    host = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    with profile(activities=TPU_ACTIVITIES, record_shapes=True) as prof:
        on_device = host.to("tpu")
        back = on_device.cpu()
    assert torch.equal(back, host)
    to_device = named(prof, "tpu::to_device")
    to_host = named(prof, "tpu::to_host")
    assert len(to_device) == 1 and len(to_host) == 1
    assert to_device[0].cpu_parent is not None and to_host[0].cpu_parent is not None
    # the bytes moved, as the range's input
    assert to_device[0].concrete_inputs == [240]
    assert to_host[0].concrete_inputs == [240]


# ------------------------------------------------------------ trace


@needs_kineto
def test_chrome_trace_is_json_with_tpu_events(tmp_path):
    model, x, y = model_and_batch()
    cold = torch.randn(7, 43, 5)
    with profile(activities=TPU_ACTIVITIES) as prof:
        train_step(model, x, y)
        (cold.to("tpu") * 3.5).cpu()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {e.get("name") for e in events}
    assert {"aten::addmm", "aten::mm", "tpu::compile", "tpu::to_device",
            "tpu::to_host"} <= names
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert {"addmm", "mm", "gelu"} <= {e["name"] for e in kernels}
    assert all(e["dur"] >= 0 for e in kernels)
    # each program points at the op that launched it
    ops = {e["args"]["External id"]: e["name"] for e in events
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    for k in kernels:
        assert ops.get(k["args"]["External id"], "").startswith(("aten::", "tpu::")), k
    # the device's row is labelled
    labels = [e for e in events if e.get("ph") == "M" and e.get("name") == "process_labels"]
    assert any(e["args"].get("labels") == "TPU 0" for e in labels)


# ------------------------------------------------------------ fused mode


@needs_kineto
def test_fused_window_is_one_program_on_the_device():
    x = torch.randn(9, 17).to("tpu")
    torch.tpu.synchronize()
    torchtpu.set_eager_mode("fused")
    with profile(activities=TPU_ACTIVITIES) as prof:
        (x * 1.25).sin().cos().sum().item()
    programs = device_events(prof)
    assert any(e.name.startswith("fused window (") for e in programs), \
        [e.name for e in programs]
    # its time belongs to the op that ended the window (the host read)
    read = averages(prof)["tpu::to_host"]
    assert read.device_time_total > 0


# ------------------------------------------------------------ legacy path


def test_legacy_use_device_profiler_has_device_time():
    model, x, y = model_and_batch()
    train_step(model, x, y)
    torch.tpu.synchronize()
    with torch.autograd.profiler.profile(use_device="tpu") as prof:
        train_step(model, x, y)
    times = {}
    for e in prof.key_averages():
        times[e.key] = max(times.get(e.key, 0), e.device_time_total)
    for name in ("aten::addmm", "aten::gelu", "aten::mm"):
        assert times.get(name, 0) > 0, name
    assert "Self TPU" in prof.key_averages().table()


# ------------------------------------------------------------ off


def test_profiler_off_leaves_behaviour_unchanged():
    model, x, y = model_and_batch()
    train_step(model, x, y)
    torch.tpu.synchronize()
    assert torchtpu._C._profiler_hook() == 0

    def run():
        loss = train_step(model, x, y)
        grads = [p.grad.cpu() for p in model.parameters()]
        return loss.item(), grads

    run()  # every program of run() compiled: the counts below are steady
    before = torchtpu.debug.metrics()
    plain_loss, plain_grads = run()
    middle = torchtpu.debug.metrics()
    activities = TPU_ACTIVITIES if torchtpu._C._profiler_has_kineto() else [ProfilerActivity.CPU]
    with profile(activities=activities):
        profiled_loss, profiled_grads = run()
    after = torchtpu.debug.metrics()
    # the same programs give the same numbers, with the same work on the
    # device: profiling adds no launch, compile or transfer
    assert profiled_loss == plain_loss
    for a, b in zip(plain_grads, profiled_grads):
        assert torch.equal(a, b)
    for key in ("executions", "compiles", "h2d_bytes", "d2h_bytes"):
        assert after[key] - middle[key] == middle[key] - before[key], key
    # the engine's hook is gone with the profiler
    assert torchtpu._C._profiler_hook() == 0

    with torch.autograd.profiler.profile(use_device="tpu"):
        run()
    # the legacy path has no "stop": its hook ends at the next launch
    run()
    assert torchtpu._C._profiler_hook() == 0
    again_loss, _ = run()
    assert again_loss == plain_loss
