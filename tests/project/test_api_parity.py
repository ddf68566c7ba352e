"""torch.tpu as torch.cuda's counterpart: every name tools/api_parity.py
reports present is usable, the implemented functions behave as torch.cuda
documents them, and torch.accelerator reaches the same figures."""
import os
import subprocess
import sys

import pytest
import torch

import torchtpu

from _proc import ROOT
sys.path.insert(0, os.path.join(ROOT, "tools"))
import api_parity  # noqa: E402

DEV = "tpu"
N = 1024


def _long_work(steps=24):
    """Dependent 1024x1024 matmuls: far longer than enqueueing them."""
    a = torch.full((N, N), 1.0 / N, device=DEV)
    b = torch.ones(N, N, device=DEV)
    b = b @ a  # compiled before anything is timed or queried
    torch.tpu.synchronize()
    return a, b, steps


def _enqueue(a, b, steps):
    for _ in range(steps):
        b = b @ a
    return b


@pytest.fixture
def strict():
    # Asynchronous eager execution, whatever the environment asks for.
    with torchtpu.set_eager_mode("strict"):
        yield


# ------------------------------------------------------------------ the table

def test_doc_is_up_to_date():
    with open(api_parity.DOC, encoding="utf-8") as f:
        version = api_parity.doc_torch_version(f.read())
    if version != torch.__version__:
        pytest.skip(f"docs/api.md was written with torch {version}")
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "api_parity.py"),
         "--check"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_check_fails_on_a_stale_doc(tmp_path, monkeypatch, capsys):
    doc = tmp_path / "api.md"
    monkeypatch.setattr(api_parity, "DOC", str(doc))
    assert api_parity.main(["--check"]) == 1  # no file
    doc.write_text("# stale\n")
    assert api_parity.main(["--check"]) == 1
    assert api_parity.main([]) == 0
    assert api_parity.main(["--check"]) == 0
    assert doc.read_text() == api_parity.render()
    capsys.readouterr()


def test_rule_keeps_api_and_drops_imports():
    names = dict(api_parity.cuda_public_names())
    for kept in ("Stream", "Event", "memory_allocated", "nvtx", "jiterator",
                 "default_generators", "has_half", "OutOfMemoryError"):
        assert kept in names, kept
    for dropped in ("os", "torch", "warnings", "Any", "Optional", "cast",
                    "lru_cache", "classproperty", "TYPE_CHECKING"):
        assert dropped not in names, dropped
    assert names["nvtx"] == "module" and names["Stream"] == "class"


def test_totals_add_up():
    rows, totals = api_parity.classify()
    assert sum(totals.values()) == len(rows) == len(api_parity.cuda_public_names())
    for name, _, status, category, note in rows:
        assert status in (api_parity.PRESENT, api_parity.MISSING,
                          api_parity.NOT_APPLICABLE)
        present = hasattr(torch.tpu, name)
        assert present == (status == api_parity.PRESENT), name
        if status == api_parity.NOT_APPLICABLE:
            assert category and note, name
        if status == api_parity.MISSING:
            assert note, name


def _use_stream_classes():
    s = torch.tpu.Stream()
    with torch.tpu.StreamContext(s):
        assert torch.tpu.current_stream() == s
    with torch.tpu.stream(s):
        torch.ones(2, device=DEV)
    torch.tpu.set_stream(torch.tpu.default_stream())
    assert torch.tpu.current_stream() == torch.tpu.default_stream()


def _use_event():
    e = torch.tpu.Event()
    e.record()
    e.synchronize()
    assert e.query()


def _use_device_classes():
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    x = torch.ones(1, device=DEV)
    with torch.tpu.device_of(x):
        assert torch.tpu.current_device() == 0


def _use_rng():
    saved = torch.tpu.get_rng_state_all()
    torch.tpu.set_rng_state(torch.tpu.get_rng_state())
    torch.tpu.manual_seed(1)
    first = torch.rand(4, device=DEV).cpu()
    torch.tpu.manual_seed_all(1)
    assert torch.tpu.initial_seed() == 1
    assert torch.equal(torch.rand(4, device=DEV).cpu(), first)
    torch.tpu.seed()
    torch.tpu.seed_all()
    assert len(torch.tpu.default_generators) == torch.tpu.device_count()
    assert isinstance(torch.tpu.default_generators[0], torch.Generator)
    torch.tpu.set_rng_state_all(saved)


def _check(condition):
    assert condition


def _deprecated(fn):
    with pytest.warns(FutureWarning):
        return fn()


def _amp():
    with torch.autocast(DEV, dtype=torch.bfloat16):
        y = torch.ones(2, 2, device=DEV) @ torch.ones(2, 2, device=DEV)
    assert y.dtype == torch.bfloat16
    assert torch.tpu.amp is torchtpu.amp


# One use of every present name: a name the table calls present must be in
# here (test_every_present_name_is_usable), and must work.
USES = {
    "Event": _use_event,
    "Stream": _use_stream_classes,
    "StreamContext": _use_stream_classes,
    "stream": _use_stream_classes,
    "set_stream": _use_stream_classes,
    "current_stream": _use_stream_classes,
    "default_stream": _use_stream_classes,
    "OutOfMemoryError": lambda: _check(
        torch.tpu.OutOfMemoryError is torch.OutOfMemoryError),
    "amp": _amp,
    "device": _use_device_classes,
    "device_of": _use_device_classes,
    "current_device": lambda: _check(torch.tpu.current_device() == 0),
    "set_device": lambda: torch.tpu.set_device(0),
    "device_count": lambda: _check(torch.tpu.device_count() >= 1),
    "is_available": lambda: _check(torch.tpu.is_available()),
    "is_initialized": lambda: _check(torch.tpu.is_initialized()),
    "init": lambda: torch.tpu.init(),
    "synchronize": lambda: torch.tpu.synchronize(),
    "is_bf16_supported": lambda: _check(torch.tpu.is_bf16_supported()),
    "get_device_name": lambda: _check(torch.tpu.get_device_name()),
    "get_device_properties": lambda: _check(
        torch.tpu.get_device_properties(0).name),
    "get_rng_state": _use_rng,
    "get_rng_state_all": _use_rng,
    "set_rng_state": _use_rng,
    "set_rng_state_all": _use_rng,
    "manual_seed": _use_rng,
    "manual_seed_all": _use_rng,
    "seed": _use_rng,
    "seed_all": _use_rng,
    "initial_seed": _use_rng,
    "default_generators": _use_rng,
    "memory_allocated": lambda: _check(torch.tpu.memory_allocated() >= 0),
    "max_memory_allocated": lambda: torch.tpu.max_memory_allocated(),
    "memory_reserved": lambda: torch.tpu.memory_reserved(),
    "max_memory_reserved": lambda: torch.tpu.max_memory_reserved(),
    "memory_cached": lambda: _deprecated(torch.tpu.memory_cached),
    "max_memory_cached": lambda: _deprecated(torch.tpu.max_memory_cached),
    "reset_peak_memory_stats": lambda: torch.tpu.reset_peak_memory_stats(),
    "reset_max_memory_allocated":
        lambda: _deprecated(torch.tpu.reset_max_memory_allocated),
    "reset_max_memory_cached":
        lambda: _deprecated(torch.tpu.reset_max_memory_cached),
    "reset_accumulated_memory_stats":
        lambda: torch.tpu.reset_accumulated_memory_stats(),
    "memory_stats": lambda: torch.tpu.memory_stats()["allocated_bytes.all.current"],
    "memory_stats_as_nested_dict":
        lambda: torch.tpu.memory_stats_as_nested_dict()["allocation"]["all"],
    "empty_cache": lambda: torch.tpu.empty_cache(),
    "mem_get_info": lambda: _check(torch.tpu.mem_get_info()[1] > 0),
}


def test_every_present_name_is_usable():
    rows, totals = api_parity.classify()
    present = {name for name, _, status, _, _ in rows
               if status == api_parity.PRESENT}
    assert present == set(USES), (present ^ set(USES))
    assert totals[api_parity.PRESENT] == len(present)
    for name in sorted(present):
        assert hasattr(torch.tpu, name)
        USES[name]()


# ------------------------------------------------------------------ memory

def test_peak_resets_then_grows():
    torch.tpu.synchronize()
    x = torch.ones(1 << 16, device=DEV)
    del x
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated() + (1 << 18)
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    assert torch.tpu.max_memory_allocated() == base
    assert torch.tpu.max_memory_reserved() == torch.tpu.memory_reserved()
    y = torch.ones(1 << 15, device=DEV)
    assert torch.tpu.memory_allocated() >= base + (1 << 17)
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated()
    assert torch.tpu.memory_reserved() >= torch.tpu.memory_allocated()
    assert torch.tpu.max_memory_reserved() >= torch.tpu.max_memory_allocated()
    peak = torch.tpu.max_memory_allocated()
    del y
    assert torch.tpu.max_memory_allocated() == peak
    assert torch.tpu.memory_allocated() == base
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.peak"] == peak
    assert stats["active.all.peak"] >= stats["active.all.current"]
    with pytest.warns(FutureWarning):
        torch.tpu.reset_max_memory_allocated()
    assert torch.tpu.max_memory_allocated() == base


def test_accumulated_counts():
    torch.tpu.synchronize()
    torch.tpu.reset_accumulated_memory_stats()
    stats = torch.tpu.memory_stats()
    assert stats["allocation.all.allocated"] == 0
    assert stats["allocated_bytes.all.freed"] == 0
    x = torch.empty(1000, dtype=torch.uint8, device=DEV)
    y = torch.empty(24, dtype=torch.uint8, device=DEV)
    del x
    stats = torch.tpu.memory_stats()
    assert stats["allocation.all.allocated"] == 2
    assert stats["allocation.all.freed"] == 1
    assert stats["allocated_bytes.all.allocated"] == 1024
    assert stats["allocated_bytes.all.freed"] == 1000
    assert stats["num_device_alloc"] == 2 and stats["num_device_free"] == 1
    assert stats["segment.all.allocated"] == 2
    assert stats["reserved_bytes.all.current"] == stats["allocated_bytes.all.current"]
    nested = torch.tpu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["allocated"] == 1024
    del y


def test_accelerator_memory_api():
    assert torch.accelerator.current_accelerator().type == DEV
    torch.accelerator.synchronize()
    x = torch.ones(1 << 14, device=DEV)
    assert torch.accelerator.memory_allocated() == torch.tpu.memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.tpu.memory_reserved()
    assert torch.accelerator.max_memory_allocated() == torch.tpu.max_memory_allocated()
    assert torch.accelerator.max_memory_reserved() == torch.tpu.max_memory_reserved()
    ours = torch.tpu.memory_stats()
    theirs = torch.accelerator.memory_stats()
    for key, value in theirs.items():
        if key in ours:
            assert ours[key] == value, key
    assert theirs["allocated_bytes.all.current"] == ours["bytes_in_use"]
    torch.accelerator.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    torch.accelerator.reset_accumulated_memory_stats()
    assert torch.tpu.memory_stats()["allocation.all.allocated"] == 0
    torch.accelerator.empty_cache()
    free, total = torch.accelerator.get_memory_info()
    assert 0 < free <= total
    assert total == torch.tpu.mem_get_info()[1]
    del x
    capability = torch.accelerator.get_device_capability()
    dtypes = capability["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.int64, torch.bool,
            torch.complex64} <= dtypes
    assert torch.float8_e4m3fn not in dtypes
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    assert torch.get_device_module(DEV) is torch.tpu
    assert torch.get_device_module(torch.device(DEV, 0)) is torch.tpu


def test_mem_get_info_and_properties():
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    props = torch.tpu.get_device_properties()
    assert props.name == torch.tpu.get_device_name() == torch.tpu.get_device_name(0)
    assert props.name == torch.tpu.get_device_properties("tpu:0").name
    assert props.type == DEV and props.index == 0
    assert props.platform == torchtpu.platform_info()["name"]
    assert props.total_memory == total
    assert props.name in repr(props)
    if props.platform == "cpu":
        with open("/proc/meminfo") as f:
            mem_total = int(next(line for line in f
                                 if line.startswith("MemTotal")).split()[1]) * 1024
        assert total == mem_total
    with pytest.raises(AssertionError):
        torch.tpu.get_device_properties(torch.tpu.device_count())


# ------------------------------------------------------------------ events, streams

def test_event_query_does_not_wait(strict):
    a, b, steps = _long_work()
    start = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    never = torch.tpu.Event()
    assert never.query()  # never recorded: nothing to wait for
    start.record()
    b = _enqueue(a, b, steps)
    end.record()
    assert start.query()
    assert not end.query()  # the matmuls are still running
    assert not torch.tpu.current_stream().query()
    with pytest.raises(RuntimeError, match="completed"):
        start.elapsed_time(end)
    torch.tpu.synchronize()
    assert end.query()
    assert torch.tpu.current_stream().query()
    assert start.elapsed_time(end) > 0
    assert end.elapsed_time(start) < 0
    with pytest.raises(ValueError, match="enable_timing"):
        never.record()
        never.elapsed_time(end)
    assert torch.allclose(b[0, :4].cpu(), torch.ones(4))


def test_event_synchronize_and_order(strict):
    a, b, steps = _long_work()
    events = []
    for _ in range(4):
        b = _enqueue(a, b, steps // 4)
        e = torch.tpu.Event()
        e.record()
        events.append(e)
    last = events[-1]
    last.synchronize()
    assert all(e.query() for e in events)
    # re-recording moves the event to the new point of the queue
    b = _enqueue(a, b, steps)
    last.record()
    assert not last.query()
    last.wait()  # same device: already ordered
    last.synchronize()
    assert last.query()


def test_stream_api(strict):
    assert torch.tpu.Stream.priority_range() == (0, 0)
    high = torch.tpu.Stream(priority=-1)
    low = torch.tpu.Stream(priority=5)
    assert isinstance(high, torch.Stream) and isinstance(high, torch.tpu.Stream)
    assert high.priority == 0 and low.priority == 0  # one level, as clamped
    assert torch.tpu.current_stream().priority == 0
    assert high != low
    a, b, steps = _long_work()
    with torch.tpu.stream(high):
        b = _enqueue(a, b, steps)
        event = high.record_event()
    assert isinstance(event, torch.tpu.Event)
    assert not high.query()
    low.wait_stream(high)
    low.wait_event(event)
    with torch.tpu.stream(low):
        c = b + 1  # ordered after the work on `high`
    low.synchronize()
    assert low.query() and high.query() and event.query()
    assert torch.allclose(c[0, :4].cpu(), torch.full((4,), 2.0))
    torch.accelerator.set_stream(high)
    assert torch.accelerator.current_stream() == high
    torch.accelerator.set_stream(torch.tpu.default_stream())


def test_timing_is_real(strict):
    a, b, steps = _long_work()
    start = torch.tpu.Event(enable_timing=True)
    mid = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    start.record()
    b = _enqueue(a, b, 2)
    mid.record()
    b = _enqueue(a, b, steps)
    end.record()
    end.synchronize()
    short, long = start.elapsed_time(mid), mid.elapsed_time(end)
    assert 0 <= short and 0 < long
    assert abs(start.elapsed_time(end) - (short + long)) < 1e-3
