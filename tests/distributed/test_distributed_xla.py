"""Collectives as XLA collective programs among the devices of one process:
the list API (torchtpu.distributed.comm), c10d ranks as threads (DDP
included), their faults, and the gloo path's send/recv checks.

Each scenario runs in a fresh subprocess (the CPU plugin's device count is
fixed when a process first uses tpu: TORCHTPU_NUM_DEVICES) that is killed
at a deadline, so a hang fails the test instead of stalling CI. A scenario
prints ``RESULT <json>``: ``python tests/distributed/test_distributed_xla.py SCENARIO``.
"""
import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.abspath(__file__)
sys.path.insert(0, HERE)


def run_scenario(scenario, devices, args=(), timeout=90):
    env = dict(os.environ, TORCHTPU_NUM_DEVICES=str(devices), PYTHONUNBUFFERED="1",
               PYTHONWARNINGS="ignore", TORCH_CPP_LOG_LEVEL="ERROR")
    try:
        p = subprocess.run([sys.executable, SCRIPT, scenario, *map(str, args)], env=env,
                           cwd=HERE, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{scenario} did not finish in {timeout} s:\n"
                    f"{(e.stdout or '')[-3000:]}{(e.stderr or '')[-3000:]}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        pytest.fail(f"{scenario} failed (rc {p.returncode}):\n{p.stdout[-4000:]}\n"
                    f"{p.stderr[-6000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def emit(payload):
    print("RESULT " + json.dumps(payload), flush=True)


def close(name, got, want, **kw):
    import torch

    torch.testing.assert_close(got.cpu() if isinstance(got, torch.Tensor) else got, want,
                               msg=lambda m: f"{name}: {m}", **kw)


# ----------------------------------------------------------------- scenarios

def scenario_comm():
    """The list API on every device, against host arithmetic."""
    import torch

    import torchtpu
    from torchtpu.distributed import comm

    n = torch.tpu.device_count()
    devs = [torch.device("tpu", i) for i in range(n)]
    host = [torch.randn(4, 6, generator=torch.Generator().manual_seed(i)) for i in range(n)]
    stack = torch.stack(host)
    done = []

    def put(ts, dtype=None):
        return [t.to(d if dtype is None else d, dtype=dtype) for t, d in zip(ts, devs)]

    for op, want in [("sum", stack.sum(0)), ("avg", stack.mean(0)),
                     ("product", stack.prod(0)), ("min", stack.min(0).values),
                     ("max", stack.max(0).values)]:
        xs = put(host)
        ptrs = [x.data_ptr() for x in xs]
        comm.all_reduce(xs, op=op)
        assert [x.data_ptr() for x in xs] == ptrs  # in place
        for x, d in zip(xs, devs):
            assert x.device == d
            close(f"all_reduce {op}", x, want)
        done.append(f"all_reduce {op}")
    xs = put(host)
    outs = comm.all_reduce(xs, op="premul_sum", factor=0.5,
                           outputs=[torch.empty(4, 6, device=d) for d in devs])
    for i, (x, o) in enumerate(zip(xs, outs)):
        close("premul_sum out", o, stack.sum(0) * 0.5)
        close("premul_sum keeps its input", x, host[i])
    ints = [torch.arange(-6, 6).reshape(2, 6) * (i + 1) + i for i in range(n)]
    xi = put(ints)
    comm.all_reduce(xi, op="avg")
    close("all_reduce avg int64", xi[0], torch.div(torch.stack(ints).sum(0), n,
                                                   rounding_mode="trunc"))
    xb = put(host, torch.bfloat16)
    comm.all_reduce(xb)
    close("all_reduce bf16", xb[-1].float(),
          torch.stack([h.bfloat16() for h in host]).sum(0).float(), atol=0.1, rtol=0.02)
    done.append("all_reduce dtypes")

    for root in (0, n - 1):
        xs = put(host)
        comm.broadcast(xs, root=root)
        for x in xs:
            close(f"broadcast {root}", x, host[root], rtol=0, atol=0)
    done.append("broadcast")

    gathered = comm.all_gather(put(host))
    for g, d in zip(gathered, devs):
        assert g.device == d and g.shape == (4 * n, 6)
        close("all_gather", g, torch.cat(host), rtol=0, atol=0)
    scalars = comm.all_gather([torch.tensor(float(i), device=d) for i, d in enumerate(devs)])
    close("all_gather 0-d", scalars[0], torch.arange(n, dtype=torch.float32))
    done.append("all_gather")

    big = [torch.randn(2 * n, 3, generator=torch.Generator().manual_seed(10 + i))
           for i in range(n)]
    for op in ("sum", "avg", "max"):
        parts = comm.reduce_scatter(put(big), op=op)
        full = {"sum": torch.stack(big).sum(0), "avg": torch.stack(big).mean(0),
                "max": torch.stack(big).max(0).values}[op]
        for i, p in enumerate(parts):
            close(f"reduce_scatter {op}", p, full[2 * i:2 * i + 2])
    done.append("reduce_scatter")

    swapped = comm.all_to_all(put(big))
    for j, o in enumerate(swapped):
        close("all_to_all", o, torch.cat([big[i][2 * j:2 * j + 2] for i in range(n)]),
              rtol=0, atol=0)
    done.append("all_to_all")

    ring = comm.permute(put(host), [(i + 1) % n for i in range(n)])
    for j, o in enumerate(ring):
        close("permute ring", o, host[(j - 1) % n], rtol=0, atol=0)
    single = comm.permute(put(host), [None] * (n - 1) + [0])
    close("permute one pair", single[0], host[n - 1], rtol=0, atol=0)
    close("permute nothing received", single[1], torch.zeros(4, 6))
    done.append("permute")

    # views: a column (not contiguous) reduced in place, a transposed input
    mats = put([torch.zeros(3, 4) + i for i in range(n)])
    comm.all_reduce([m[:, 1] for m in mats])
    want = torch.zeros(3, 4)
    want[:, 1] = sum(range(n))
    for i, m in enumerate(mats):
        w = want.clone()
        w[:, [0, 2, 3]] = i
        close("all_reduce on a view", m, w)
    tg = comm.all_gather([x.t() for x in put(host)])
    close("all_gather of a transposed view", tg[0], torch.cat([h.t() for h in host]))
    done.append("views")

    # the program is compiled once per signature
    xs = put(host)
    comm.all_reduce(xs)
    before = torchtpu.debug.metrics()["compiles"]
    comm.all_reduce(put(host))
    assert torchtpu.debug.metrics()["compiles"] == before
    done.append("cached")

    errors = {}
    for name, bad in [
        ("same device", lambda: comm.all_reduce([torch.ones(2, device=devs[0])] * 2)),
        ("shapes", lambda: comm.all_reduce([torch.ones(2, device=devs[0]),
                                            torch.ones(3, device=devs[1])])),
        ("split", lambda: comm.reduce_scatter([torch.ones(n + 1, device=d) for d in devs])),
        ("cpu", lambda: comm.broadcast([torch.ones(2)] * n)),
        ("op", lambda: comm.all_reduce(put(host), op="xor")),
        ("peers", lambda: comm.permute(put(host), [0] * n)),
    ]:
        try:
            bad()
            errors[name] = None
        except Exception as e:  # noqa: BLE001  (which type is the point)
            errors[name] = [type(e).__name__, str(e).splitlines()[0]]
    report = torchtpu.debug.report(file=open(os.devnull, "w"))
    emit({"done": done, "errors": errors, "report": report,
          "counters": torchtpu.distributed.local_counters()})


def _thread_collectives(rank):
    """Every c10d collective on one thread rank, against host values: the
    multi-process test's checks, and per-rank PREMUL_SUM factors."""
    import torch
    import torch.distributed as dist

    import torchtpu
    from test_distributed import collective_checks

    world = dist.get_world_size()
    dev = torch.device("tpu", rank)
    done = collective_checks(dev)
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(float(rank + 1)))
    close("all_reduce PREMUL_SUM per rank", t,
          torch.full((3,), float(sum((r + 1) ** 2 for r in range(world)))))
    done.append("all_reduce PREMUL_SUM per rank")
    return {"done": done, "path": torchtpu.distributed.path()}


def scenario_threads():
    import torchtpu
    from torchtpu.distributed import threads

    res = threads.run(_thread_collectives, timeout=60)
    emit({"ranks": res, "counters": torchtpu.distributed.local_counters(),
          "staged": torchtpu.distributed.counters(),
          "report": torchtpu.debug.report(file=open(os.devnull, "w"))})


def _mlp():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 1))


def _batches(steps=3, batch=8):
    import torch

    g = torch.Generator().manual_seed(1)
    return [(torch.randn(batch, 8, generator=g), torch.randn(batch, 1, generator=g))
            for _ in range(steps)]


def _train(model, batches, device, step_hook=None):
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in batches:
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def _ddp_rank(rank, hook, init_state):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    world = dist.get_world_size()
    dev = torch.device("tpu", rank)
    # torch.manual_seed is process-wide: threads seeding and drawing at once
    # would interleave, so every rank starts from the same given state
    net = _mlp()
    net.load_state_dict(init_state)
    model = DDP(net.to(dev), bucket_cap_mb=0.0001)  # several buckets
    if hook:
        model.register_comm_hook(None, default_hooks.allreduce_hook)
    per = 8 // world
    local = [(x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per])
             for x, y in _batches()]
    losses = _train(model, local, dev)
    # the mean loss over ranks is the full batch's loss
    for loss in losses:
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
    params = [p.detach().cpu() for p in model.module.parameters()]
    return {"losses": [float(x.cpu()) for x in losses],
            "params": [p.reshape(-1).tolist() for p in params]}


def scenario_ddp(hook):
    import torch

    import torchtpu
    from torchtpu.distributed import threads

    ref_model = _mlp().to("tpu:0")
    ref = [float(x.cpu()) for x in _train(ref_model, _batches(), "tpu:0")]
    ref_params = [p.detach().cpu().reshape(-1).tolist() for p in ref_model.parameters()]
    init_state = {k: v.clone() for k, v in _mlp().state_dict().items()}
    res = threads.run(_ddp_rank, args=(hook == "hook", init_state), timeout=60)
    counters = torchtpu.distributed.local_counters()
    emit({"ref": ref, "ref_params": ref_params, "ranks": res, "counters": counters,
          "world": torch.tpu.device_count()})


def _fsdp_rank(rank, init_state):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    world = dist.get_world_size()
    dev = torch.device("tpu", rank)
    net = _mlp()
    net.load_state_dict(init_state)
    net = net.to(dev)
    mesh = init_device_mesh("tpu", (world,))
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    per = 8 // world
    local = [(x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per])
             for x, y in _batches()]
    losses = _train(net, local, dev)
    for loss in losses:
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
    return {"losses": [float(x.cpu()) for x in losses]}


def scenario_fsdp():
    import torchtpu
    from torchtpu.distributed import threads

    ref = [float(x.cpu()) for x in _train(_mlp().to("tpu:0"), _batches(), "tpu:0")]
    init_state = {k: v.clone() for k, v in _mlp().state_dict().items()}
    res = threads.run(_fsdp_rank, args=(init_state,), timeout=60)
    emit({"ref": ref, "ranks": res, "counters": torchtpu.distributed.local_counters()})


def _fault_rank(rank, timeout_s):
    import torch
    import torch.distributed as dist

    dev = torch.device("tpu", rank)
    out = {}

    def catch(name, fn):
        try:
            fn()
            out[name] = None
        except Exception as e:  # noqa: BLE001  (which type is the point)
            out[name] = [type(e).__name__, str(e).splitlines()[0][:600]]

    catch("shape", lambda: dist.all_reduce(torch.ones(4 + rank, device=dev)))
    t = torch.ones(4, device=dev)
    catch("op", lambda: dist.broadcast(t, src=0) if rank == 1 else dist.all_reduce(t))
    peer = 1 - rank
    catch("p2p", lambda: dist.send(torch.ones(6, device=dev), dst=peer) if rank == 0
          else dist.recv(torch.empty(4, device=dev), src=peer))
    catch("p2p dtype", lambda: dist.send(torch.ones(6, device=dev), dst=peer) if rank == 0
          else dist.recv(torch.empty(6, dtype=torch.int32, device=dev), src=peer))
    ok = torch.full((3,), float(rank), device=dev)
    dist.all_reduce(ok)  # the group is still usable
    out["after"] = ok.cpu().tolist()
    # rank 1 skips a collective: rank 0 fails at the group timeout
    start = time.monotonic()
    if rank == 0:
        catch("missing", lambda: dist.all_reduce(torch.ones(2, device=dev)))
    out["seconds"] = time.monotonic() - start
    return out


def scenario_faults(timeout_s):
    from torchtpu.distributed import threads

    emit({"ranks": threads.run(_fault_rank, world_size=2, args=(float(timeout_s),),
                               timeout=float(timeout_s))})


def scenario_gloo_p2p():
    """Two processes (gloo path): mismatched send/recv raise on both sides;
    the group stays usable."""
    import torch
    import torch.distributed as dist

    from test_distributed import init

    dev = init("tpu", timeout_s=30)
    rank = dist.get_rank()
    out = {}
    for name, recv_t in [("size", torch.empty(4, device=dev)),
                         ("dtype", torch.empty(6, dtype=torch.int32, device=dev))]:
        try:
            if rank == 0:
                dist.send(torch.ones(6, device=dev), dst=1)
            else:
                dist.recv(recv_t, src=0)
            out[name] = None
        except Exception as e:  # noqa: BLE001
            out[name] = [type(e).__name__, str(e).splitlines()[0][:600]]
    o = torch.empty(6, device=dev)
    if rank == 0:
        dist.send(torch.arange(6.0, device=dev), dst=1)
    else:
        dist.recv(o, src=0)
    out["after"] = o.cpu().tolist() if rank == 1 else None
    dist.destroy_process_group()
    emit(out)


SCENARIOS = {"comm": scenario_comm, "threads": scenario_threads, "ddp": scenario_ddp,
             "fsdp": scenario_fsdp,
             "faults": scenario_faults, "gloo_p2p": scenario_gloo_p2p}


# ----------------------------------------------------------------- tests

@pytest.mark.parametrize("devices", [2, 4])
def test_comm_list_api(devices):
    res = run_scenario("comm", devices)
    assert len(res["done"]) == 13
    errors = res["errors"]
    assert errors["same device"][0] == "ValueError" and "own device" in errors["same device"][1]
    assert errors["shapes"][0] == "ValueError"
    assert errors["split"][0] == "ValueError" and "divide evenly" in errors["split"][1]
    assert errors["cpu"][0] == "ValueError"
    assert errors["op"][0] == "ValueError"
    assert errors["peers"] is not None and "receives from two members" in errors["peers"][1]
    xla = res["counters"]["xla collective program"]
    assert xla["all_reduce"]["calls"] >= 8 and xla["collective_permute"]["calls"] == 2
    assert "xla collective program" in res["report"]


@pytest.mark.parametrize("world", [2, 4])
def test_thread_ranks_collectives(world):
    res = run_scenario("threads", world, timeout=150)
    ranks = res["ranks"]
    assert all(r["path"] == "xla collective program" for r in ranks)
    assert all(len(r["done"]) == len(ranks[1]["done"]) + (r is ranks[0]) for r in ranks)
    assert "gather" in ranks[0]["done"] and len(ranks[0]["done"]) == 33 + world
    xla = res["counters"]["xla collective program"]
    for name in ("all_reduce", "broadcast", "reduce", "all_gather",
                 "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
                 "all_to_all_single", "all_to_all"):
        assert xla[name]["calls"] >= 1, name
    copies = res["counters"]["in-process device copies"]
    for name in ("gather", "scatter", "send/recv", "all_to_all_single"):
        assert copies[name]["calls"] >= 1, name
    assert res["staged"] == {}  # nothing went through gloo
    assert "xla collective program" in res["report"]


@pytest.mark.parametrize("world,hook", [(2, "hook"), (4, "default")])
def test_thread_ranks_ddp(world, hook):
    res = run_scenario("ddp", world, [hook], timeout=150)
    for r in res["ranks"]:
        assert r["losses"] == pytest.approx(res["ref"], rel=1e-5, abs=1e-6)
        for got, want in zip(r["params"], res["ref_params"]):
            assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert res["counters"]["xla collective program"]["all_reduce"]["calls"] >= 3 * 2


def test_thread_ranks_fsdp2():
    res = run_scenario("fsdp", 2, timeout=120)
    for r in res["ranks"]:
        assert r["losses"] == pytest.approx(res["ref"], rel=1e-5, abs=1e-6)
    xla = res["counters"]["xla collective program"]
    assert xla["all_gather_into_tensor"]["calls"] >= 3
    assert xla["reduce_scatter_tensor"]["calls"] >= 3


def test_thread_ranks_faults():
    res = run_scenario("faults", 2, [3], timeout=90)
    r0, r1 = res["ranks"]
    for r in (r0, r1):
        assert r["shape"][0] == "RuntimeError" and "collective mismatch" in r["shape"][1]
        assert "all_reduce(float32[4]" in r["shape"][1]
        assert "all_reduce(float32[5]" in r["shape"][1]
        assert "broadcast(float32[4], root=0)" in r["op"][1]
        for key in ("p2p", "p2p dtype"):
            assert "send/recv mismatch" in r[key][1], r[key]
        assert "sends float32[6]" in r["p2p"][1] and "receives into float32[4]" in r["p2p"][1]
        assert r["after"] == [1.0] * 3
    assert r0["missing"][0] == "DistBackendError"
    msg = r0["missing"][1]
    assert "all_reduce(float32[2]" in msg and "timed out" in msg and "rank 1 did not" in msg
    assert 2.5 < r0["seconds"] < 3 + 5


def test_gloo_send_recv_mismatch():
    from test_distributed import results, run_ranks

    res = results(run_ranks(SCRIPT, "gloo_p2p", 2, timeout=90))
    for r in res:
        for key in ("size", "dtype"):
            assert r[key] is not None and "send/recv mismatch" in r[key][1], r
    assert "sends float32[6]" in res[0]["size"][1]
    assert "receives into float32 with 4 elements" in res[0]["size"][1]
    assert "receives into float32[4]" in res[1]["size"][1]
    assert "sends float32 with 6 elements" in res[1]["size"][1]
    assert "receives into int32[6]" in res[1]["dtype"][1]
    assert res[1]["after"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
    # The result is out; skip interpreter teardown (and its exit hooks'
    # timing with autograd's threads), which this test is not about.
    sys.stdout.flush()
    os._exit(0)
