"""Long-running processes: the bounded program cache, fork children, plugin
calls that fail mid-run, and a persistent cache directory that cannot be
written. Each case runs in a fresh interpreter: it needs a runtime of its
own (a small program cache, a fault armed, a fork)."""
import os
import subprocess
import sys
import textwrap

import pytest

from _proc import ROOT


def run_python(code, timeout=240, **env):
    full_env = dict(os.environ)
    full_env.update({k: str(v) for k, v in env.items()})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                       capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return r


def check(code, **env):
    r = run_python(code, **env)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
    return r


# ------------------------------------------------------------------ program cache

@pytest.mark.long
def test_thousands_of_shapes_stay_bounded():
    """About 1,200 new programs (240 shapes) through a 48-program cache:
    mappings and RSS stop growing once the cache is full, every result
    matches the CPU. benchmarks/program_cache.py runs the long version."""
    r = run_python("""
        import sys
        sys.path.insert(0, "tests")
        from support import program_cache
        sys.exit(program_cache.main(["--shapes", "240", "--every", "30"]))
    """, TORCHTPU_PROGRAM_CACHE_SIZE=48, TORCHTPU_DISK_CACHE=0)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "second half" in r.stdout
    rows = [line.split() for line in r.stdout.splitlines() if line.strip()[:1].isdigit()]
    loaded = [int(row[1]) for row in rows]
    evicted = [int(row[2]) for row in rows]
    assert max(loaded) <= 48
    assert evicted[-1] >= 3 * 240 - 48  # several programs per shape, all but 48 gone


def test_unbounded_cache_grows():
    """The same run without a bound keeps every program: the test above
    measures something."""
    r = run_python("""
        import sys
        sys.path.insert(0, "tests")
        from support import program_cache
        import torchtpu
        program_cache.main(["--shapes", "40", "--every", "10"])
        m = torchtpu.debug.metrics()
        assert m["programs_evicted"] == 0, m
        assert m["programs_loaded"] >= 3 * 40, m
    """, TORCHTPU_PROGRAM_CACHE_SIZE=0, TORCHTPU_DISK_CACHE=0)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]


def test_evicted_programs_come_back_from_disk(tmp_path):
    check("""
        import torch, torchtpu
        torchtpu.debug.set_program_cache_size(4)
        assert torchtpu.debug.program_cache_size() == 4
        xs = [torch.arange(n, dtype=torch.float32) for n in range(1, 9)]
        for x in xs:
            assert torch.equal((x.to("tpu") * 3).cpu(), x * 3)
        m0 = torchtpu.debug.metrics()
        assert m0["programs_loaded"] <= 4 and m0["programs_evicted"] > 0, m0
        # The first shapes again: reloaded from the disk cache, no compile.
        for x in xs[:3]:
            assert torch.equal((x.to("tpu") * 3).cpu(), x * 3)
        m1 = torchtpu.debug.metrics()
        assert m1["compiles"] == m0["compiles"], (m0, m1)
        assert m1["disk_hits"] > m0["disk_hits"], (m0, m1)
        assert m1["programs_reloaded"] >= 3, m1
        assert m1["recompiles"] == m0["recompiles"], (m0, m1)
        reasons = [c["reason"] for c in torchtpu.debug.compiles()[-3:]]
        assert all("reloaded" in r for r in reasons), reasons
        assert "evicted" in torchtpu.debug.report(file=open("/dev/null", "w"))
    """, TORCHTPU_CACHE_DIR=tmp_path)


def test_eviction_does_not_warn_of_recompiles():
    """A reload is not a shape change: no recompile warning however many."""
    r = check("""
        import warnings, torch, torchtpu
        torchtpu.debug.set_program_cache_size(2)
        x = {n: torch.ones(n, device="tpu") for n in (3, 5, 7)}
        for _ in range(6):
            for n in (3, 5, 7):
                (x[n] + 1).cpu()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(10):
                for n in (3, 5, 7):
                    (x[n] + 1).cpu()
        assert not [str(i.message) for i in w if "recompiled" in str(i.message)]
        print("reloaded", torchtpu.debug.metrics()["programs_reloaded"])
    """, TORCHTPU_DISK_CACHE=0)
    assert int(r.stdout.split()[-1]) > 20


def test_graph_replay_keeps_its_program():
    """A torch.compile graph's program is pinned: flooding the cache with
    other programs does not unload it, and the graph still replays."""
    check("""
        import torch, torchtpu
        torchtpu.debug.set_program_cache_size(3)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 4)).to("tpu")
        f = torch.compile(model, backend="tpu")
        x = torch.randn(5, 8)
        with torch.no_grad():
            want = model.cpu()(x); model.to("tpu")
            assert torch.allclose(f(x.to("tpu")).cpu(), want, atol=1e-5)
            assert torch.allclose(f(x.to("tpu")).cpu(), want, atol=1e-5)
            for n in range(1, 40):
                (torch.ones(n, device="tpu") * 2).sum().cpu()
            m0 = torchtpu.debug.metrics()
            assert torch.allclose(f(x.to("tpu")).cpu(), want, atol=1e-5)
            m1 = torchtpu.debug.metrics()
        assert m1["graph_replays"] > m0["graph_replays"], (m0, m1)
        graphs = [c for c in torchtpu.debug.compiles() if c["what"].startswith("graph")]
        assert len(graphs) == 1, graphs
    """, TORCHTPU_DISK_CACHE=0)


def test_fused_training_with_a_tiny_cache_matches_cpu():
    check("""
        import torch, torchtpu
        torchtpu.debug.set_program_cache_size(2)
        torch.manual_seed(0)
        cpu = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1))
        dev = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1))
        dev.load_state_dict(cpu.state_dict()); dev.to("tpu")
        oc = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
        od = torch.optim.AdamW(dev.parameters(), lr=1e-2)
        for mode in ("fused", "strict", "fused"):
            torchtpu.set_eager_mode(mode)
            for step in range(6):
                x = torch.randn(4 + step % 3, 6)
                for m, o, xx in ((cpu, oc, x), (dev, od, x.to("tpu"))):
                    o.zero_grad(); m(xx).pow(2).mean().backward(); o.step()
        for a, b in zip(cpu.parameters(), dev.parameters()):
            assert torch.allclose(a, b.cpu(), atol=1e-5), (a - b.cpu()).abs().max()
        assert torchtpu.debug.metrics()["programs_evicted"] > 0
    """, TORCHTPU_DISK_CACHE=0)


def test_bad_program_cache_size_is_a_clear_error():
    r = run_python("""
        import torch, torchtpu
        try:
            torch.ones(1, device="tpu")
        except RuntimeError as e:
            print("ERR", e)
    """, TORCHTPU_PROGRAM_CACHE_SIZE="lots")
    assert "ERR" in r.stdout and "TORCHTPU_PROGRAM_CACHE_SIZE=lots" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------ fork

FORK_CHILD = """
    import os, sys, torch, torchtpu
    x = torch.arange(6.0, device="tpu")
    (x * 2).cpu()
    pid = os.fork()
    if pid == 0:
        bad = []
        def refuses(fn):
            try:
                fn()
            except RuntimeError as e:
                if "forked" not in str(e) or "spawn" not in str(e):
                    bad.append(str(e))
            else:
                bad.append(f"{fn} did not raise")
        refuses(lambda: (x + 1).cpu())
        refuses(lambda: x.cpu())
        refuses(lambda: torch.ones(2, device="tpu"))
        refuses(lambda: torch.tpu.synchronize())
        refuses(lambda: torch.tpu.init())
        # CPU work is unaffected in the child.
        assert torch.equal(torch.arange(4.0) * 2, torch.tensor([0., 2., 4., 6.]))
        del x   # releasing the parent's storage in the child: left alone
        print("child ok" if not bad else f"child bad: {bad}", flush=True)
        {child_exit}
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent keeps working.
    assert torch.equal((x + 1).cpu(), torch.arange(6.0) + 1)
    torch.tpu.synchronize()
    print("parent ok")
"""


@pytest.mark.parametrize("child_exit", ["os._exit(0)", "sys.exit(0)"])
def test_forked_child_gets_a_clear_error(child_exit):
    """The child's first tpu use raises (as CUDA does) instead of hanging;
    a child that exits through the interpreter's shutdown does not hang
    either."""
    r = run_python(FORK_CHILD.replace("{child_exit}", child_exit), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "child ok" in r.stdout and "parent ok" in r.stdout, r.stdout


def test_multiprocessing_fork_and_spawn(tmp_path):
    """A fork-started worker touching tpu fails with the message; a
    spawn-started one uses the device."""
    script = tmp_path / "workers.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing as mp, torch, torchtpu

        def use_tpu(q):
            try:
                q.put(float((torch.ones(3, device="tpu") * 2).sum().cpu()))
            except RuntimeError as e:
                q.put(str(e))

        if __name__ == "__main__":
            torch.ones(1, device="tpu").cpu()
            for method, want in (("fork", "spawn"), ("spawn", 6.0)):
                ctx = mp.get_context(method)
                q = ctx.Queue()
                p = ctx.Process(target=use_tpu, args=(q,))
                p.start()
                got = q.get(timeout=120)
                p.join(60)
                assert p.exitcode == 0, (method, p.exitcode)
                if isinstance(want, str):
                    assert want in got and "forked" in got, got
                else:
                    assert got == want, got
            print("ok")
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=240, cwd=ROOT)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr[-3000:]


# ------------------------------------------------------------------ faults

def test_plugin_call_failing_mid_run():
    """Each failing plugin call gives an error naming it; tensors computed
    before are intact and the process keeps working."""
    check("""
        import torch, torchtpu
        from torchtpu import _C
        a = torch.arange(8.0, device="tpu")
        b = (a * 2)
        b.cpu()
        def fails(fn, call):
            try:
                fn()
            except RuntimeError as e:
                assert call in str(e), str(e)
            else:
                raise AssertionError(f"{call}: no error")

        _C._inject_plugin_fault("loaded_executable_execute")
        fails(lambda: (a + 1).cpu(), "loaded_executable_execute")
        _C._inject_plugin_fault("client_compile")
        fails(lambda: (a.reshape(2, 4) @ a.reshape(4, 2)).cpu(), "client_compile")
        _C._inject_plugin_fault("buffer_to_host_buffer")
        fails(lambda: b.cpu(), "buffer_to_host_buffer")
        _C._inject_plugin_fault("client_buffer_from_host_buffer")
        fails(lambda: torch.ones(3).to("tpu"), "client_buffer_from_host_buffer")

        # What existed is intact; what failed works on a second try.
        assert torch.equal(a.cpu(), torch.arange(8.0))
        assert torch.equal(b.cpu(), torch.arange(8.0) * 2)
        assert torch.equal((a + 1).cpu(), torch.arange(8.0) + 1)
        m = (a.reshape(2, 4) @ a.reshape(4, 2)).cpu()
        assert torch.equal(m, torch.arange(8.0).reshape(2, 4) @ torch.arange(8.0).reshape(4, 2))

        # An asynchronous failure: reported by the next synchronize, once.
        torch.tpu.synchronize()
        c = a * 5
        _C._inject_plugin_fault("event_await")
        fails(torch.tpu.synchronize, "event_await")
        torch.tpu.synchronize()
        assert torch.equal(c.cpu(), torch.arange(8.0) * 5)
        _C._inject_plugin_fault("", 0, 0)
    """, TORCHTPU_DISK_CACHE=0)


# ------------------------------------------------------------------ disk cache

DISK_WARNS_ONCE = """
    import warnings, torch, torchtpu
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 12):
            x = torch.arange(float(n), device="tpu")
            assert torch.equal((x * 2 + 1).cpu(), torch.arange(float(n)) * 2 + 1)
    msgs = [str(i.message) for i in w if "compile cache" in str(i.message)]
    assert len(msgs) == 1, msgs
    assert "{expect}" in msgs[0], msgs
    m = torchtpu.debug.metrics()
    assert m["disk_writes"] == 0 and m["compiles"] > 10, m
    print("ok", m["cache_dir"] or "off")
"""


def test_unusable_cache_directory_warns_once(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    r = check(DISK_WARNS_ONCE.replace("{expect}", "persistent compile cache is off"),
              TORCHTPU_CACHE_DIR=blocker / "cache")
    assert r.stdout.split()[-1] == "off"


def test_full_cache_directory_warns_once_and_carries_on(tmp_path):
    """A file system that takes no more bytes (here: a file size limit, as a
    full disk would) turns the cache off after one warning."""
    code = "import resource, signal\n" \
           "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n" \
           "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n" + \
           textwrap.dedent(DISK_WARNS_ONCE.replace("{expect}", "cannot write"))
    r = check(code, TORCHTPU_CACHE_DIR=tmp_path / "cache")
    assert r.stdout.split()[-1] == "off"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_cache_directory_warns_once(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    os.chmod(root, 0o555)
    try:
        check(DISK_WARNS_ONCE.replace("{expect}", "compile cache"), TORCHTPU_CACHE_DIR=root)
    finally:
        os.chmod(root, 0o755)


# ------------------------------------------------------------------ threads

def test_host_read_waits_without_blocking_other_threads():
    """A thread reading a result that takes seconds to compute does not hold
    the engine: another thread's ops (an in-place write of the very tensor
    being read, which donates its storage, included) are enqueued
    meanwhile, and the read still returns the value it asked for. (Few,
    large programs: the CPU plugin blocks an enqueue once ~32 executions
    are in flight, which would order the threads by itself.)"""
    check("""
        import threading, time, torch, torchtpu
        torch.manual_seed(0)
        n, steps = 4096, 6
        at = (torch.randn(n, n) / (4 * n ** 0.5)).to("tpu")   # a contraction
        y = torch.ones(4, device="tpu")
        (y + 1).cpu(); y.add_(1).cpu()
        torch.tanh(at @ at).add_(1).cpu()                     # all compiled before
        z = at
        for _ in range(steps):
            z = torch.tanh(z @ at)                            # queued: seconds of work
        got, read_done = [], threading.Event()
        def reader():
            got.append(z.cpu())
            read_done.set()
        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.2)                                       # the reader is waiting now
        for _ in range(4):
            w = y + 1                                         # other work is enqueued
        behind = not read_done.is_set()
        # Donates the version being read: the plugin orders it after the
        # copy (its enqueue waits for the copy to finish).
        z.add_(1)
        t.join(120)
        assert not t.is_alive()
        # The read saw z before the write, whole: z is now exactly that + 1.
        assert torch.isfinite(got[0]).all() and got[0].abs().sum() > 0
        assert torch.equal(z.cpu(), got[0] + 1)
        assert torch.equal(w.cpu(), torch.full((4,), 3.0))
        # The other thread's ops were enqueued while the read waited
        # (before, a host read held the engine's lock until its data came).
        assert behind, "the read finished before the other thread's ops"
    """, TORCHTPU_DISK_CACHE=0)
