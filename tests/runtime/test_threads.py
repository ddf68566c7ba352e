"""Several Python threads using tpu at once: ops, compiles, training in each
eager mode, synchronize and backward from other threads, two devices, and
a short version of the stress run (benchmarks/stress_threads.py). Every
test runs under a watchdog: a deadlock fails with every thread's stack."""
import random
import threading
import warnings

import pytest
import torch

import torchtpu
from _proc import check, run_script, watchdog
from support import stress_threads as st

DEV = "tpu"


@pytest.fixture(autouse=True)
def _watchdog():
    with watchdog(240):
        yield


@pytest.fixture
def start_mode():
    """The process's eager mode before the test, put back after it."""
    mode = torchtpu.get_eager_mode()
    yield mode
    torchtpu.set_eager_mode(mode)


def _checked_ops(index, rounds):
    rng = random.Random(index)
    return sum(st.task_ops(rng, DEV) for _ in range(rounds))


def test_ops_from_four_threads_one_device():
    def work(i):
        n = _checked_ops(i, 25)
        return n + st.task_train(random.Random(100 + i), DEV)

    assert st.run_threads([lambda i=i: work(i) for i in range(4)], 180) == [310] * 4


def test_each_thread_its_own_device():
    # The current device is per thread (as CUDA's): each thread selects its
    # own with set_device and its factory calls land there.
    out = check(run_script("""
        import random, threading, torch, torchtpu
        from support import stress_threads as st
        assert torch.tpu.device_count() == 2
        seen = {}

        def work(i):
            torch.tpu.set_device(i % 2)
            rng = random.Random(i)
            for _ in range(15):
                st.task_ops(rng, "tpu")
            st.task_train(rng, "tpu")
            st.task_backward(rng, "tpu")
            seen[i] = (torch.tpu.current_device(), torch.ones(2, device="tpu").device.index)

        st.run_threads([lambda i=i: work(i) for i in range(4)], 150)
        assert seen == {0: (0, 0), 1: (1, 1), 2: (0, 0), 3: (1, 1)}, seen
        assert torch.tpu.current_device() == 0   # the main thread's is untouched
        # Work crossing devices from two threads at once.
        a = torch.arange(6.0).to("tpu:0")
        st.run_threads([lambda: torch.testing.assert_close((a.to("tpu:1") * 2).cpu(), torch.arange(6.0) * 2),
                        lambda: torch.testing.assert_close((a + 1).to("tpu:1").cpu(), torch.arange(6.0) + 1)], 60)
        torch.tpu.synchronize()
        print("ok")
    """, timeout=200, TORCHTPU_NUM_DEVICES=2))
    assert "ok" in out


def test_concurrent_compiles():
    threads, shapes = 4, 4
    sizes = [[st.new_shape() for _ in range(shapes)] for _ in range(threads)]
    barrier = threading.Barrier(threads, timeout=60)
    before = torchtpu.debug.metrics()["compiles"]

    def work(mine):
        barrier.wait()  # all start compiling at the same moment
        return sum(st.task_compile(None, DEV, size) for size in mine)

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*recompiled")  # new shapes on purpose
        st.run_threads([lambda s=s: work(s) for s in sizes], 180)
    # Each new size compiles its elementwise ops and its cumsum afresh.
    assert torchtpu.debug.metrics()["compiles"] - before >= threads * shapes * 2


def test_synchronize_from_another_thread():
    done = threading.Event()
    syncs = [0]

    def enqueue(i):
        g = torch.Generator().manual_seed(i)
        a = torch.randn(64, 64, generator=g)
        x, expected = a.to(DEV), a
        for _ in range(30):
            x = torch.tanh(x @ x.T / 64 + 0.1)
            expected = torch.tanh(expected @ expected.T / 64 + 0.1)
        torch.testing.assert_close(x.cpu(), expected, rtol=1e-4, atol=1e-5)
        return _checked_ops(i, 5)

    def synchronizer():
        while not done.is_set():
            torch.tpu.synchronize()
            syncs[0] += 1

    sync_thread = threading.Thread(target=synchronizer, daemon=True)
    sync_thread.start()
    try:
        st.run_threads([lambda i=i: enqueue(i) for i in range(3)], 180)
    finally:
        done.set()
        sync_thread.join(60)
    assert not sync_thread.is_alive()
    assert syncs[0] > 0


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_two_threads_train_adamw(mode, start_mode):
    # The eager mode is process-wide: both threads run in `mode`. In fused
    # mode their ops are recorded into one shared window.
    with torchtpu.set_eager_mode(mode):
        results = st.run_threads([lambda s=s: st.train_pair(s, DEV, steps=4) for s in (1, 2)], 200)
        for got, expected in results:
            for g, e in zip(got, expected):
                torch.testing.assert_close(g.detach().cpu(), e.detach(), **st.TRAIN_TOL)
    assert torchtpu.get_eager_mode() == start_mode


def test_mode_is_process_wide(start_mode):
    entered, release = threading.Event(), threading.Event()
    seen = []

    def other():
        with torchtpu.set_eager_mode("debug"):
            entered.set()
            release.wait(60)

    t = threading.Thread(target=other, daemon=True)
    t.start()
    assert entered.wait(60)
    seen.append(torchtpu.get_eager_mode())   # another thread's scope applies here
    release.set()
    t.join(60)
    seen.append(torchtpu.get_eager_mode())
    assert seen == ["debug", start_mode]


@pytest.mark.xfail(strict=True, reason="set_eager_mode scopes are process-wide and restore the "
                   "mode they saw on entry: scopes that overlap in two threads and close out of "
                   "order leave the process in the wrong mode")
def test_overlapping_mode_scopes_in_two_threads_restore_the_mode(start_mode):
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        with torchtpu.set_eager_mode("fused"):
            a_in.set()
            b_in.wait(60)
        a_out.set()

    def b():
        a_in.wait(60)
        with torchtpu.set_eager_mode("debug"):
            b_in.set()
            a_out.wait(60)

    st.run_threads([a, b], 120)
    assert torchtpu.get_eager_mode() == start_mode


@pytest.mark.xfail(strict=True, reason="fused mode records every thread's ops into one window: a "
                   "data-dependent error (an index out of range) recorded by one thread is raised "
                   "by whichever thread ends the window, and the faulting thread reads a wrong "
                   "value without an error")
def test_fused_mode_error_goes_to_the_thread_that_caused_it():
    x = torch.arange(5.0).to(DEV)
    bad = torch.tensor([7]).to(DEV)
    own = torch.ones(3).to(DEV)
    recorded, read_done = threading.Event(), threading.Event()
    out = {}

    def faulting():
        try:
            y = x[bad]                  # out of range: found when the window runs
            recorded.set()
            read_done.wait(60)
            out["faulting"] = y.cpu().tolist()
        except IndexError as e:
            out["faulting"] = e
        finally:
            recorded.set()

    def innocent():
        recorded.wait(60)
        try:
            out["innocent"] = (own * 2).cpu().tolist()   # ends the shared window
        except IndexError as e:
            out["innocent"] = e
        finally:
            read_done.set()

    with torchtpu.set_eager_mode("fused"):
        st.run_threads([faulting, innocent], 120)
    torch.tpu.synchronize()
    assert out["innocent"] == [2.0, 2.0, 2.0], out
    assert isinstance(out["faulting"], IndexError), out


def test_mode_switched_while_another_thread_trains(start_mode):
    stop = threading.Event()
    switches = [0]

    def switcher():
        rng = random.Random(0)
        while not stop.wait(rng.uniform(0.01, 0.1)):
            torchtpu.set_eager_mode(rng.choice(["strict", "fused", "debug"]))
            switches[0] += 1

    t = threading.Thread(target=switcher, daemon=True)
    t.start()
    try:
        seed = 0
        while seed < 3 or (switches[0] < 10 and seed < 500):
            seed += 1
            got, expected = st.train_pair(seed, DEV, steps=3)
            for g, e in zip(got, expected):
                torch.testing.assert_close(g.detach().cpu(), e.detach(), **st.TRAIN_TOL)
    finally:
        stop.set()
        t.join(60)
    assert switches[0] >= 10


def test_backward_in_one_thread_forward_in_another():
    stop = threading.Event()

    def backward_loop():
        rng, n = random.Random(1), 0
        while not stop.is_set() or n < 5:
            st.task_backward(rng, DEV)
            n += 1
        return n

    def forward_loop():
        try:
            rng = random.Random(2)
            for _ in range(40):
                st.task_ops(rng, DEV)
                with torch.no_grad():
                    model = st._mlp(rng.randrange(100)).to(DEV)
                    x = torch.randn(3, 8)
                    torch.testing.assert_close(model(x.to(DEV)).cpu(), model.cpu()(x), **st.TOL)
        finally:
            stop.set()

    assert st.run_threads([backward_loop, forward_loop], 180)[0] >= 5


@pytest.mark.long
def test_stress_short():
    """The documented stress run (--minutes 10), for 12 seconds: 4 threads
    over 2 devices with the eager mode switching meanwhile."""
    result = run_script("""
        from support import stress_threads
        stress_threads.main(["--minutes", "0.2", "--threads", "4", "--devices", "2",
                             "--modes", "--stall", "60"])
    """, timeout=150)
    out = check(result, "0 failures, no deadlock")
    assert "4 threads, 2 devices" in out
