"""CPU replays: where only the CPU's own kernel knows the answer (the words
of an argument error a meta kernel words differently, whether a write
through shared memory is refused), the call is asked of it on stand-ins.
Each replay is counted in torchtpu.debug.metrics()["cpu_replays"], the
errors are the CPU's, and a replay's host memory is bounded, whatever the
size of the tpu storages it stands in for (the rule at the top of
csrc/torch/aten/cpu_replay.cpp)."""
import pytest
import torch

import torchtpu

from _proc import check, run_script

DEV = "tpu"


def replays():
    return dict(torchtpu.debug.metrics()["cpu_replays"])


def raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value).splitlines()[0]


def test_metrics_report_the_replay_counts():
    counts = replays()
    assert set(counts) == {"error_text", "alias_checks", "alias_checks_shrunk", "skipped"}
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())


def test_error_text_replay_is_counted_and_raises_the_cpus_error():
    # PyTorch's meta kernel says "alpha argument of type float cannot be
    # safely cast"; the CPU's words are what a user sees.
    def call(d):
        a = torch.arange(4, device=d, dtype=torch.int32)
        return torch.add(a, a, alpha=1.5)
    want = raised(lambda: call("cpu"))
    before = replays()
    assert raised(lambda: call(DEV)) == want
    after = replays()
    assert after["error_text"] == before["error_text"] + 1
    assert after["alias_checks"] == before["alias_checks"]


def test_alias_check_is_counted_and_raises_the_cpus_error():
    def call(d):
        x = torch.arange(6.0, device=d)
        x[1:].add_(x[:-1])
    want = raised(lambda: call("cpu"))
    assert "unsupported operation" in want[1]
    before = replays()
    assert raised(lambda: call(DEV)) == want
    after = replays()
    assert after["alias_checks"] == before["alias_checks"] + 1
    assert after["alias_checks_shrunk"] == before["alias_checks_shrunk"]
    assert after["error_text"] == before["error_text"]


def test_alias_check_the_cpu_accepts_runs_on_the_engine():
    # Two columns of one storage: their ranges interleave, so the CPU is
    # asked; it accepts (the elements are disjoint) and the engine computes.
    def call(d):
        y = torch.arange(6.0, device=d).view(2, 3)
        y[:, 0].mul_(y[:, 1])
        return y.cpu()
    before = replays()
    assert torch.equal(call(DEV), call("cpu"))
    assert replays()["alias_checks"] == before["alias_checks"] + 1


def test_a_call_without_shared_memory_replays_nothing():
    before = replays()
    x = torch.arange(6.0, device=DEV)
    x.add_(torch.ones(6, device=DEV))
    y = torch.zeros(6, device=DEV)
    torch.add(x, 1, out=y)
    assert y.cpu().tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert replays() == before


# A fresh interpreter, so the peak resident size (ru_maxrss) speaks of these
# calls only: each is warmed up on small tensors first (imports, Python
# meta functions), then measured on a 256 MiB tpu storage (host memory on
# the CPU plugin, allocated before the measurement). Before the bound, each
# replay allocated zero-filled host storages of the full size.
BIG = """
import resource, torch, torchtpu

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def raised(fn):
    try:
        fn()
    except Exception as e:
        return type(e).__name__, str(e).splitlines()[0]
    return None

def counts():
    return dict(torchtpu.debug.metrics()["cpu_replays"])

def calls(x):
    side = round(x.numel() ** 0.5)
    v = x.view(side, side)
    return {
        "small views of the storage": lambda: x[:1000].add_(x[1:1001]),
        "shifted views of all of it": lambda: x[1:].add_(x[:-1]),
        "a matrix and its transpose": lambda: v.add_(v.t()),
    }

N = 64 * 2**20  # float32: 256 MiB
small_cpu = torch.arange(4096.0)
small_tpu = torch.arange(4096.0, device="tpu")
x = torch.zeros(N, device="tpu")
x[0].item()  # the storage exists before anything is measured
for name in calls(x):
    want = raised(calls(small_cpu)[name])
    assert want is not None and "unsupported operation" in want[1], (name, want)
    assert raised(calls(small_tpu)[name]) == want, name  # warm-up
    c0, p0 = counts(), peak()
    got = raised(calls(x)[name])
    grew, c1 = peak() - p0, counts()
    assert got == want, (name, got, want)
    assert grew < 16 * 2**20, (name, grew)
    assert c1["alias_checks"] == c0["alias_checks"] + 1, (name, c0, c1)
    print(name, "grew", grew >> 20, "MiB, shrunk", c1["alias_checks_shrunk"] - c0["alias_checks_shrunk"])

# An error-text replay on a 32 MiB storage (within the replay bound): the
# CPU's words, at the cost of the pages its kernel writes (none).
def bad_alpha(a):
    return torch.add(a[:4], a[:4], alpha=1.5)
want = raised(lambda: bad_alpha(torch.arange(8, dtype=torch.int32)))
assert raised(lambda: bad_alpha(torch.arange(8, dtype=torch.int32, device="tpu"))) == want
i = torch.zeros(8 * 2**20, dtype=torch.int32, device="tpu")
i[0].item()
c0, p0 = counts(), peak()
got = raised(lambda: bad_alpha(i))
grew, c1 = peak() - p0, counts()
assert got == want, (got, want)
assert grew < 4 * 2**20, grew
assert c1["error_text"] == c0["error_text"] + 1, (c0, c1)
print("error text grew", grew >> 20, "MiB")
print("ok")
"""


def test_replays_of_a_large_storage_cost_little_host_memory():
    out = check(run_script(BIG, timeout=300))
    # the whole storage's views are asked on shrunk stand-ins
    assert "shifted views of all of it grew" in out and "a matrix and its transpose grew" in out
    for line in out.splitlines():
        if line.startswith(("shifted views", "a matrix")):
            assert line.endswith("shrunk 1"), line
        if line.startswith("small views"):
            assert line.endswith("shrunk 0"), line
