"""Strict mode with compile threads (TORCHTPU_COMPILE_THREADS): programs
compile on the pool while later ops queue behind them in program order.
Each case runs in a fresh interpreter with the thread count it needs and no
persistent cache, so that every program really compiles."""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
