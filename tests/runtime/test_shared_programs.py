"""Signatures with the same program share one executable: an out= form
after its functional op (bmm.out after bmm), whether the first program is
loaded already or still compiling; the shared executable outlives the
eviction of either holder; each signature is written to the disk cache.
Shapes here are ones no other test uses, so the counts are this file's."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torchtpu
import torchtpu.debug


def counts():
    m = torchtpu.debug.metrics()
    return m["compiles"], m["programs_shared"]


def deltas(before):
    c, s = counts()
    return c - before[0], s - before[1]


@pytest.mark.parametrize("sync_between", [True, False], ids=["loaded", "compiling"])
def test_out_form_shares_the_functional_program(sync_between):
    n = 13 if sync_between else 17
    x = torch.randn(3, n, 19, dtype=torch.float64)
    y = torch.randn(3, 19, 7, dtype=torch.float64)
    want = torch.bmm(x, y)
    xt, yt = x.to("tpu"), y.to("tpu")
    torch.tpu.synchronize()
    before = counts()
    got = torch.bmm(xt, yt)
    if sync_between:
        got.cpu()
    out = torch.empty_like(got)
    assert torch.bmm(xt, yt, out=out) is out
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(out.cpu(), want)
    assert deltas(before) == (1, 1)
    # both signatures are loaded programs, listed by what they run
    whats = [p["what"] for p in torchtpu.debug.programs()]
    assert "bmm" in whats and "bmm.out" in whats


def test_programs_of_other_texts_are_not_shared():
    x = torch.randn(5, 23, dtype=torch.float64)
    before = counts()
    a = x.to("tpu") + 2
    b = x.to("tpu")
    b.add_(2)  # in place: its program donates self, another text
    c = torch.empty(5, 23, dtype=torch.float64, device="tpu")
    torch.add(x.to("tpu"), 2, out=c)  # the functional one's text
    for t in (a, b, c):
        torch.testing.assert_close(t.cpu(), x + 2)
    compiled, shared = deltas(before)
    assert shared == 1 and compiled >= 2


def test_a_shared_executable_outlives_either_holder():
    x = torch.randn(4, 29, 11, dtype=torch.float64)
    y = torch.randn(4, 11, 3, dtype=torch.float64)
    want = torch.bmm(x, y)
    xt, yt = x.to("tpu"), y.to("tpu")
    size = torchtpu.debug.program_cache_size()
    try:
        got = torch.bmm(xt, yt)
        out = torch.empty_like(got)
        torch.bmm(xt, yt, out=out)
        torch.tpu.synchronize()
        for _ in range(2):
            # evict everything, then the out= form alone, then the
            # functional one again: each holder in turn outlives the other
            torchtpu.debug.set_program_cache_size(1)
            torch.ones(3, device="tpu").cpu()
            torchtpu.debug.set_program_cache_size(size)
            torch.testing.assert_close(torch.bmm(xt, yt, out=out).cpu(), want)
            torch.testing.assert_close(torch.bmm(xt, yt).cpu(), want)
    finally:
        torchtpu.debug.set_program_cache_size(size)


def test_a_shared_program_is_on_disk_under_its_own_signature(tmp_path):
    code = textwrap.dedent("""
        import sys, torch, torchtpu
        x = torch.ones(2, 31, 5, dtype=torch.float64, device="tpu")
        y = torch.ones(2, 5, 3, dtype=torch.float64, device="tpu")
        if sys.argv[1] == "both":
            torch.bmm(x, y).cpu()
        out = torch.empty(2, 31, 3, dtype=torch.float64, device="tpu")
        torch.bmm(x, y, out=out)
        assert (out.cpu() == 5).all()
        m = torchtpu.debug.metrics()
        print(m["compiles"], m["programs_shared"], m["disk_hits"])
    """)
    env = {**os.environ, "TORCHTPU_CACHE_DIR": str(tmp_path)}
    env.pop("TORCHTPU_DISK_CACHE", None)

    def run(arg):
        p = subprocess.run([sys.executable, "-c", code, arg], capture_output=True,
                           text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        return [int(v) for v in p.stdout.split()[-3:]]

    compiled, shared, _ = run("both")
    assert compiled >= 1 and shared == 1
    # a fresh process that runs only the out= form loads it from disk
    compiled, shared, hits = run("out")
    assert (compiled, shared) == (0, 0) and hits >= 1
