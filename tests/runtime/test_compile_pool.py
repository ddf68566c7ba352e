"""Strict mode with compile threads (TORCHTPU_COMPILE_THREADS): programs
compile on the pool while later ops queue behind them in program order.
Each case runs in a fresh interpreter with the thread count it needs and no
persistent cache, so that every program really compiles."""
import json
import os
import subprocess
import sys
import textwrap

from _proc import ROOT


def run(code, threads, **env):
    full = dict(os.environ)
    full.update({"TORCHTPU_COMPILE_THREADS": str(threads), "TORCHTPU_DISK_CACHE": "0",
                 "TORCHTPU_EAGER_MODE": "strict"})
    full.update({k: str(v) for k, v in env.items()})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                       capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


SEQUENCE = """
    import json, torch, torchtpu

    def seq(x, w, read):
        a = x @ w                        # compiles
        b = torch.tanh(a) * 2            # its inputs come from ops still compiling
        v = b.view(-1)
        v[3:7].add_(1.5)                 # in place through a view
        b.t()[1].mul_(3)                 # in place through a transposed view
        c = b.sum(0)
        mid = c.cpu().tolist() if read else None   # a host read mid-sequence
        t = a * 3 + 1
        u = torch.sigmoid(t) - 0.5
        del t                            # freed while its reader may wait
        d = torch.relu(b - c) + u
        d.addcmul_(u, b, value=0.25)
        e = torch.cat([d, b], 1).exp().mean(1)
        return [e.cpu().tolist(), c.cpu().tolist(), d.cpu().tolist(), mid]

    torch.manual_seed(0)
    x, w = torch.randn(4, 6), torch.randn(6, 5)
    got = seq(x.to("tpu"), w.to("tpu"), True)
    want = seq(x, w, True)
    ok = all(torch.allclose(torch.tensor(g), torch.tensor(h), rtol=1e-5, atol=1e-5)
             for g, h in zip(got[:3], want[:3]))
    ok = ok and torch.allclose(torch.tensor(got[3]), torch.tensor(want[3]), rtol=1e-5, atol=1e-5)
    log = [c["what"] for c in torchtpu.debug.compiles()]
    m = torchtpu.debug.metrics()
    print(json.dumps({"ok": bool(ok), "got": got, "log": log,
                      "compiles": m["compiles"], "hits": m["cache_hits"]}))
"""


def test_pool_matches_cpu_and_one_thread():
    """The same sequence with 2 compile threads and with 1: both match the
    CPU, give bit-identical values, and compile the same programs in the
    same order (the compile log keeps program order)."""
    two = run(SEQUENCE, 2)
    one = run(SEQUENCE, 1)
    assert two["ok"] and one["ok"], (two, one)
    assert two["got"] == one["got"]
    assert two["log"] == one["log"] and len(two["log"]) > 8, (two["log"], one["log"])
    assert (two["compiles"], two["hits"]) == (one["compiles"], one["hits"])


def test_repeated_op_compiles_once_while_in_flight():
    """Ops that need the same program while it compiles share one compile."""
    r = run("""
        import json, torch, torchtpu
        x = torch.arange(12.0, device="tpu").reshape(3, 4)
        ys = [torch.cos(x + k) for k in range(6)]     # same programs, queued
        got = [y.cpu() for y in ys]
        want = [torch.cos(torch.arange(12.0).reshape(3, 4) + k) for k in range(6)]
        log = [c["what"] for c in torchtpu.debug.compiles()]
        ok = all(torch.allclose(g, h) for g, h in zip(got, want))
        print(json.dumps({"ok": ok, "log": log}))
    """, 2)
    assert r["ok"], r
    assert len(r["log"]) == len(set(r["log"])), r["log"]


def test_compile_error_reaches_its_op():
    """A failing compile raises, named with its op, at the next point that
    reaches the op; what depended on it does not run (its storage fails on
    read with the same error); the process keeps working."""
    r = run("""
        import json, torch, torchtpu
        from torchtpu import _C
        x = torch.arange(8.0, device="tpu")
        (x * 2).cpu()
        _C._inject_plugin_fault("client_compile", 0, 1)
        err = None
        try:
            a = torch.cos(x)             # compiles on the pool: fails there
            b = a + 1                    # depends on it
            b.cpu()
        except RuntimeError as e:
            err = str(e)
        _C._inject_plugin_fault("", 0, 0)
        dep = None
        try:
            a.cpu()                      # the failed op's output
        except RuntimeError as e:
            dep = str(e)
        ok = torch.allclose((torch.cos(x) + 1).cpu(), torch.cos(torch.arange(8.0)) + 1)
        torch.tpu.synchronize()
        print(json.dumps({"err": err, "dep": dep, "ok": bool(ok)}))
    """, 2)
    assert r["err"] and "compiling cos" in r["err"] and "client_compile" in r["err"], r
    assert r["dep"] and "compiling cos" in r["dep"], r
    assert r["ok"], r


def test_one_thread_compiles_at_the_op():
    """TORCHTPU_COMPILE_THREADS=1: a compile error raises at the op itself."""
    r = run("""
        import json, torch, torchtpu
        from torchtpu import _C
        x = torch.arange(8.0, device="tpu")
        _C._inject_plugin_fault("client_compile", 0, 1)
        at_op = False
        try:
            a = torch.sin(x)
        except RuntimeError as e:
            at_op = "compiling sin" in str(e)
        _C._inject_plugin_fault("", 0, 0)
        print(json.dumps({"at_op": at_op}))
    """, 1)
    assert r["at_op"], r


def test_dumping_compiles_at_the_op(tmp_path):
    """While programs are dumped (TORCHTPU_DUMP_DIR), a compiling op has run
    and left its dump when it returns: torchtpu.aot attributes programs to
    ops that way."""
    r = run("""
        import json, os, sys, torch, torchtpu
        from torchtpu import _C
        x = torch.arange(6.0, device="tpu")
        ran, dumps = [], []
        for f in (torch.sin, torch.cos, torch.exp):
            before = _C._compile_stats()["executions"]
            y = f(x)
            ran.append(_C._compile_stats()["executions"] - before)
            dumps.append(len(os.listdir(sys.argv[1] if len(sys.argv) > 1 else os.environ["TORCHTPU_DUMP_DIR"])))
        print(json.dumps({"ran": ran, "dumps": dumps}))
    """, 2, TORCHTPU_DUMP_DIR=tmp_path)
    assert r["ran"] == [1, 1, 1], r
    assert r["dumps"] == sorted(r["dumps"]) and r["dumps"][0] >= 1 and r["dumps"][-1] >= 3, r


def test_index_check_raises_at_its_op():
    """With compile threads, an op whose program checks its indices still
    raises at the op (it runs, with what is queued before it, before the
    call returns); the ops queued before it ran, and later ops work."""
    r = run("""
        import json, torch, torchtpu
        x = torch.arange(8.0, device="tpu")
        y = torch.sin(x) * 2 + 1                  # compiling on the pool
        errs = []
        for make in (lambda: x[torch.tensor([1, 9], device="tpu")],
                     lambda: torch.index_select(y, 0, torch.tensor([3, -20], device="tpu")),
                     lambda: torch.gather(y, 0, torch.tensor([0, 8], device="tpu"))):
            try:
                make()
                errs.append(None)
            except (IndexError, RuntimeError) as e:
                errs.append(type(e).__name__)
        got = (y + torch.cos(x)).cpu()
        want = torch.sin(torch.arange(8.0)) * 2 + 1 + torch.cos(torch.arange(8.0))
        print(json.dumps({"errs": errs, "ok": bool(torch.allclose(got, want))}))
    """, 2)
    assert r["errs"] == ["IndexError", "IndexError", "RuntimeError"], r
    assert r["ok"], r


def test_default_threads_are_the_usable_cores():
    """Without TORCHTPU_COMPILE_THREADS strict mode compiles on the pool,
    one thread per usable core (at most 16)."""
    code = """
        import json, os, torch, torchtpu
        from torchtpu import _C
        x = torch.arange(6.0, device="tpu")
        ys = [torch.exp(x) + k for k in range(3)]
        print(json.dumps({"ok": bool(torch.allclose(ys[2].cpu(), torch.exp(torch.arange(6.0)) + 2)),
                          "threads": _C._platform()["compile_threads"],
                          "cores": len(os.sched_getaffinity(0))}))
    """
    full = {k: v for k, v in os.environ.items() if k != "TORCHTPU_COMPILE_THREADS"}
    full.update({"TORCHTPU_DISK_CACHE": "0", "TORCHTPU_EAGER_MODE": "strict"})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                       capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["ok"], r
    assert r["threads"] == min(r["cores"], 16), r


def assert_refused(var, value):
    """A bad value of var: the first tpu tensor fails with a message that
    names the variable and its value (not an install hint)."""
    full = dict(os.environ, **{var: value})
    p = subprocess.run([sys.executable, "-c", "import torch, torchtpu; torch.ones(1, device='tpu')"],
                       env=full, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert p.returncode != 0
    assert f"{var}={value}" in p.stderr and "pip install" not in p.stderr, p.stderr[-2000:]


def test_cpu_opt_level():
    """TORCHTPU_CPU_OPT_LEVEL: every level gives the CPU's values; programs
    compiled at one level are not loaded at another (the disk cache keeps
    them apart); a bad value is a clear error that names the variable."""
    import tempfile
    code = """
        import json, torch, torchtpu
        torch.manual_seed(0)
        x, w = torch.randn(37, 53), torch.randn(53, 29)
        t = x.to("tpu")
        pairs = [(torch.tanh(t) * 1.7 + torch.exp(-t.abs()), torch.tanh(x) * 1.7 + torch.exp(-x.abs())),
                 (torch.softmax(t, -1), torch.softmax(x, -1)),
                 (t @ w.to("tpu"), x @ w),
                 (torch.log1p(t.abs()).sum(0), torch.log1p(x.abs()).sum(0)),
                 (t.abs().pow(2.5).mean(1), x.abs().pow(2.5).mean(1))]
        ok = all(torch.allclose(a.cpu(), b, rtol=1e-5, atol=1e-5) for a, b in pairs)
        m = torchtpu.debug.metrics()
        print(json.dumps({"ok": ok, "compiles": m["compiles"], "disk_hits": m["disk_hits"]}))
    """
    with tempfile.TemporaryDirectory() as cache:
        seen = {}
        for level in ("0", "3", "xla", "3", "2"):
            seen.setdefault(level, []).append(
                run(code, 1, TORCHTPU_CPU_OPT_LEVEL=level, TORCHTPU_DISK_CACHE=1,
                    TORCHTPU_CACHE_DIR=cache))
    for level, runs in seen.items():
        assert all(r["ok"] for r in runs), (level, runs)
    # Each level's first process compiles everything; "xla" is XLA's own
    # default, kept apart from an explicit 3; a second level-3 process
    # compiles nothing.
    for level in ("0", "3", "xla", "2"):
        assert seen[level][0]["compiles"] > 4 and seen[level][0]["disk_hits"] == 0, seen
    assert seen["3"][1]["compiles"] == 0 and seen["3"][1]["disk_hits"] > 4, seen
    assert_refused("TORCHTPU_CPU_OPT_LEVEL", "fast")


def test_cpu_small_program_elements():
    """TORCHTPU_CPU_SMALL_PROGRAM_ELEMENTS: programs of small tensors compile
    with XLA's older loop emitters. The values are the CPU's whichever
    emitters compile a program (reductions, softmax, cumsum, argmax, a
    sort, a linear solve with its loop, each of sizes under and over the
    bound); each setting keeps its own disk cache entries; a bad value is a
    clear error that names the variable."""
    import tempfile
    code = """
        import json, torch, torchtpu
        torch.manual_seed(0)
        ok = True
        for n in (7, 64, 300):
            x = torch.randn(n, 96)
            a = torch.randn(n % 50 + 2, n % 50 + 2, dtype=torch.float64)
            b = torch.randn(n % 50 + 2, 3, dtype=torch.float64)
            t = x.to("tpu")
            pairs = [(t.sum(0), x.sum(0)), (t.softmax(0), x.softmax(0)),
                     (t.cumsum(1), x.cumsum(1)), (t.argmax(-1), x.argmax(-1)),
                     (t.sort(0).values, x.sort(0).values),
                     (torch.tanh(t) * 1.7 + torch.exp(-t.abs()), torch.tanh(x) * 1.7 + torch.exp(-x.abs())),
                     (torch.linalg.solve(a.to("tpu"), b.to("tpu")), torch.linalg.solve(a, b))]
            ok = ok and all(torch.allclose(p.cpu(), q, rtol=1e-4, atol=1e-4) for p, q in pairs)
        m = torchtpu.debug.metrics()
        print(json.dumps({"ok": ok, "compiles": m["compiles"], "disk_hits": m["disk_hits"]}))
    """
    with tempfile.TemporaryDirectory() as cache:
        seen = {}
        for bound in ("100000000", "0", "", "100000000"):
            seen.setdefault(bound, []).append(
                run(code, 1, TORCHTPU_CPU_SMALL_PROGRAM_ELEMENTS=bound, TORCHTPU_DISK_CACHE=1,
                    TORCHTPU_CACHE_DIR=cache))
    for bound, runs in seen.items():
        assert all(r["ok"] for r in runs), (bound, runs)
    # Every setting's first process compiles everything; the second process
    # of a setting compiles nothing.
    for bound in ("100000000", "0", ""):
        assert seen[bound][0]["compiles"] > 10 and seen[bound][0]["disk_hits"] == 0, seen
    assert seen["100000000"][1]["compiles"] == 0 and seen["100000000"][1]["disk_hits"] > 10, seen
    assert_refused("TORCHTPU_CPU_SMALL_PROGRAM_ELEMENTS", "lots")


def test_compiled_graph_compiles_on_the_pool():
    """torch.compile: a graph's first program compiles on the compile
    threads while the caller goes on (the graph's call returns before its
    compile is logged, and its result is right when read); a bad index
    that a graph's first, still compiling program checks is raised, as an
    IndexError, by the next read; the process stays usable. With one
    thread the graph compiles at its call and raises there."""
    code = """
        import json, torch, torchtpu, torchtpu.dynamo
        torchtpu.dynamo.register()

        def graphs_logged():
            return sum(c["what"].startswith("graph") for c in torchtpu.debug.compiles())

        t = torch.arange(8.0)
        tt = t.to("tpu")
        torch.tpu.synchronize()
        f = torch.compile(lambda t, i: torch.sin(t[i]) * 2 + t.sum(), backend="tpu")
        y = f(tt, torch.tensor([1, 2], device="tpu"))
        pending = graphs_logged() == 0
        ok = bool(torch.allclose(y.cpu(), torch.sin(t[[1, 2]]) * 2 + t.sum()))
        g = torch.compile(lambda t, i: torch.cos(t[i]) - t.mean(), backend="tpu")
        err, at = None, None
        try:
            z = g(tt, torch.tensor([1, 9], device="tpu"))
            at = "read"
            z.cpu()
        except (IndexError, RuntimeError) as e:
            err = type(e).__name__
            at = at or "call"
        again = f(tt, torch.tensor([7, 0], device="tpu")).cpu()
        ok2 = bool(torch.allclose(again, torch.sin(t[[7, 0]]) * 2 + t.sum()))
        ok3 = bool(torch.allclose(g(tt, torch.tensor([3], device="tpu")).cpu(),
                                  torch.cos(t[[3]]) - t.mean()))
        print(json.dumps({"pending": pending, "ok": ok, "err": err, "at": at,
                          "ok2": ok2, "ok3": ok3}))
    """
    r = run(code, 2, TORCHTPU_AOT_AUTOGRAD_CACHE="0")
    assert r["ok"] and r["ok2"] and r["ok3"], r
    assert r["pending"], r
    assert (r["err"], r["at"]) == ("IndexError", "read"), r
    r1 = run(code, 1, TORCHTPU_AOT_AUTOGRAD_CACHE="0")
    assert r1["ok"] and r1["ok2"] and r1["ok3"] and not r1["pending"], r1
    assert (r1["err"], r1["at"]) == ("IndexError", "call"), r1
