"""The "tpu" c10d backend: collectives, init forms, MPMD and faults.

Every test starts 2 or 4 ranks as separate processes (each with its own CPU
plugin client) and kills them all at a hard deadline, so a hang fails the
test instead of stalling CI. A rank runs this file as a script:
``python tests/distributed/test_distributed.py SCENARIO [ARGS]`` with RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set, and prints ``RESULT <json>`` on success.
"""
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------- launcher

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(script, scenario, world, args=(), timeout=90, env=None):
    """Runs ``script scenario *args`` as ``world`` ranks; returns
    [(returncode, output)] per rank. Kills every rank at the deadline and
    fails the test then."""
    port = free_port()
    base = dict(os.environ)
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                WORLD_SIZE=str(world), PYTHONUNBUFFERED="1",
                TORCH_CPP_LOG_LEVEL="ERROR", PYTHONWARNINGS="ignore")
    base.pop("TORCH_DISTRIBUTED_DEBUG", None)
    base.update(env or {})
    procs, logs = [], []
    for rank in range(world):
        log = tempfile.TemporaryFile(mode="w+")
        e = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen(
            [sys.executable, script, scenario, *map(str, args)],
            env=e, stdout=log, stderr=subprocess.STDOUT, cwd=HERE))
        logs.append(log)
    deadline = time.monotonic() + timeout
    timed_out = False
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    outs = []
    for p, log in zip(procs, logs):
        log.seek(0)
        outs.append((p.returncode, log.read()))
        log.close()
    if timed_out:
        pytest.fail(f"{scenario} on {world} ranks did not finish in {timeout} s:\n"
                    + "\n".join(f"--- rank {r} (rc {rc})\n{o[-3000:]}"
                                for r, (rc, o) in enumerate(outs)))
    return outs


def results(outs):
    """The RESULT payload of every rank; fails with the logs if a rank failed."""
    payloads = []
    for rank, (rc, out) in enumerate(outs):
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        if rc != 0 or not lines:
            pytest.fail(f"rank {rank} failed (rc {rc}):\n{out[-5000:]}")
        payloads.append(json.loads(lines[-1][len("RESULT "):]))
    return payloads


# ----------------------------------------------------------------- rank side

def init(mode="tpu", timeout_s=60):
    """init_process_group in one of the supported forms; returns the rank's
    tpu device."""
    import torch
    import torch.distributed as dist

    import torchtpu  # noqa: F401  (registers the backend)

    timeout = datetime.timedelta(seconds=timeout_s)
    # One rank per device: rank i of a host uses tpu:i when there are enough
    # devices (TORCHTPU_NUM_DEVICES on the CPU plugin), else tpu:0. Setting
    # it first is what DeviceMesh expects (else it picks tpu:LOCAL_RANK).
    device = torch.device("tpu", int(os.environ["LOCAL_RANK"]) % torch.tpu.device_count())
    torch.tpu.set_device(device)
    if mode == "device_id":
        dist.init_process_group(device_id=device, timeout=timeout)
    else:
        dist.init_process_group(backend=mode, timeout=timeout)
    return device


def emit(payload):
    print("RESULT " + json.dumps(payload), flush=True)


def scenario_collectives(mode):
    """Every collective on tpu tensors against values computed on the host."""
    import torch.distributed as dist

    import torchtpu

    dev = init(mode)
    done = collective_checks(dev)
    counters = torchtpu.distributed.counters()
    report = torchtpu.debug.report(file=open(os.devnull, "w"))
    dist.destroy_process_group()
    emit({"done": done, "counters": counters, "report": report})


def collective_checks(dev):
    """Runs every collective of the default group on device `dev` against
    host values (also used by test_distributed_xla's thread ranks); returns
    the names of the checks that passed."""
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    R = dist.ReduceOp
    done = []

    def base(r, n=6, dtype=torch.float32):
        return (torch.arange(n, dtype=torch.float64) * (r + 1) + r).to(dtype)

    def check(name, got, want):
        got = got.cpu() if isinstance(got, torch.Tensor) else got
        torch.testing.assert_close(got, want, msg=lambda m: f"{name}: {m}")
        done.append(name)

    everyone = torch.stack([base(r) for r in range(world)])

    # all_reduce: every op, in place on the tpu tensor
    for op, want in [(R.SUM, everyone.sum(0)), (R.AVG, everyone.mean(0)),
                     (R.MAX, everyone.max(0).values), (R.MIN, everyone.min(0).values),
                     (R.PRODUCT, everyone.prod(0))]:
        t = base(rank).to(dev)
        ptr = t.data_ptr()
        dist.all_reduce(t, op=op)
        assert t.data_ptr() == ptr and t.device.type == "tpu"
        check(f"all_reduce {op}", t, want)
    t = base(rank).to(dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    check("all_reduce PREMUL_SUM", t, everyone.sum(0) * 0.5)
    ti = (torch.arange(6) + 3 * rank).to(dev)
    dist.all_reduce(ti, op=R.AVG)
    check("all_reduce AVG int64", ti,
          torch.stack([torch.arange(6) + 3 * r for r in range(world)]).sum(0) // world)
    # a non-contiguous view is updated in place too
    m = torch.zeros(4, 6, device=dev)
    m[1] = base(rank).to(dev)
    dist.all_reduce(m[1])
    want = torch.zeros(4, 6)
    want[1] = everyone.sum(0)
    check("all_reduce view", m, want)
    tb = base(rank, dtype=torch.bfloat16).to(dev)
    dist.all_reduce(tb)
    check("all_reduce bf16", tb, torch.stack([base(r, dtype=torch.bfloat16)
                                              for r in range(world)]).sum(0))

    # broadcast from every root
    for root in range(world):
        t = base(rank).to(dev)
        dist.broadcast(t, src=root)
        check(f"broadcast root {root}", t, base(root))

    # reduce to a root
    t = base(rank).to(dev)
    dist.reduce(t, dst=world - 1, op=R.SUM)
    check("reduce", t, everyone.sum(0) if rank == world - 1 else base(rank))

    # all_gather (list and into one tensor)
    outs = [torch.empty(6, device=dev) for _ in range(world)]
    dist.all_gather(outs, base(rank).to(dev))
    check("all_gather", torch.stack([o.cpu() for o in outs]), everyone)
    out = torch.empty(world * 6, device=dev)
    dist.all_gather_into_tensor(out, base(rank).to(dev))
    check("all_gather_into_tensor", out, everyone.reshape(-1))

    # reduce_scatter (tensor and list), SUM and AVG
    inp = torch.stack([base(rank, n=4) + 10 * j for j in range(world)])
    full = torch.stack([torch.stack([base(r, n=4) + 10 * j for j in range(world)])
                        for r in range(world)])
    for op, want in [(R.SUM, full.sum(0)[rank]), (R.AVG, full.mean(0)[rank])]:
        o = torch.empty(4, device=dev)
        dist.reduce_scatter_tensor(o, inp.reshape(-1).to(dev), op=op)
        check(f"reduce_scatter_tensor {op}", o, want)
    o = torch.empty(4, device=dev)
    dist.reduce_scatter(o, [x.to(dev) for x in inp])
    check("reduce_scatter", o, full.sum(0)[rank])

    # all_to_all_single: equal and uneven splits; all_to_all (lists)
    inp = torch.arange(world * 2, dtype=torch.float32) + 100 * rank
    o = torch.empty(world * 2, device=dev)
    dist.all_to_all_single(o, inp.to(dev))
    want = torch.cat([(torch.arange(world * 2, dtype=torch.float32) + 100 * r)[2 * rank:2 * rank + 2]
                      for r in range(world)])
    check("all_to_all_single", o, want)
    # rank r sends j+1 rows to rank j
    in_splits = [j + 1 for j in range(world)]
    out_splits = [rank + 1] * world
    inp = torch.full((sum(in_splits), 3), float(rank))
    o = torch.empty(sum(out_splits), 3, device=dev)
    dist.all_to_all_single(o, inp.to(dev), out_splits, in_splits)
    check("all_to_all_single uneven", o,
          torch.cat([torch.full((rank + 1, 3), float(r)) for r in range(world)]))
    outs = [torch.empty(2, device=dev) for _ in range(world)]
    dist.all_to_all(outs, [torch.full((2,), float(10 * rank + j), device=dev)
                           for j in range(world)])
    check("all_to_all", torch.stack([x.cpu() for x in outs]),
          torch.stack([torch.full((2,), float(10 * r + rank)) for r in range(world)]))

    # gather / scatter
    gl = [torch.empty(6, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(base(rank).to(dev), gl, dst=0)
    if rank == 0:
        check("gather", torch.stack([x.cpu() for x in gl]), everyone)
    o = torch.empty(6, device=dev)
    dist.scatter(o, [base(r).to(dev) for r in range(world)] if rank == 0 else None, src=0)
    check("scatter", o, base(rank))

    # send / recv around a ring, and batch_isend_irecv
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    o = torch.empty(6, device=dev)
    if rank % 2 == 0:
        dist.send(base(rank).to(dev), dst=nxt)
        dist.recv(o, src=prv)
    else:
        dist.recv(o, src=prv)
        dist.send(base(rank).to(dev), dst=nxt)
    check("send/recv", o, base(prv))
    o = torch.empty(6, device=dev)
    ops = [dist.P2POp(dist.isend, base(rank).to(dev), nxt),
           dist.P2POp(dist.irecv, o, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check("batch_isend_irecv", o, base(prv))

    # async handles: issue several, then wait in reverse order
    ts = [base(rank).to(dev) + i for i in range(3)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    ag = torch.empty(world * 6, device=dev)
    works.append(dist.all_gather_into_tensor(ag, base(rank).to(dev), async_op=True))
    for w in reversed(works):
        assert w.wait()
        assert w.is_completed()
    for i, t in enumerate(ts):
        check(f"async all_reduce {i}", t, everyone.sum(0) + i * world)
    check("async all_gather_into_tensor", ag, everyone.reshape(-1))
    fut = dist.all_reduce(base(rank).to(dev), async_op=True).get_future()
    check("future value", fut.wait()[0], everyone.sum(0))

    # coalesced variants
    a, b = base(rank).to(dev), (base(rank, n=3) * 2).to(dev)
    with dist._coalescing_manager(device=dev, async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    check("coalesced all_reduce", a, everyone.sum(0))
    check("coalesced all_reduce 2", b,
          torch.stack([base(r, n=3) * 2 for r in range(world)]).sum(0))
    o1, o2 = torch.empty(world * 6, device=dev), torch.empty(world * 3, device=dev)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(o1, base(rank).to(dev))
        dist.all_gather_into_tensor(o2, base(rank, n=3).to(dev))
    cm.wait()
    check("coalesced all_gather_into_tensor", o1, everyone.reshape(-1))
    inp = torch.arange(world * 2, dtype=torch.float32) + rank
    o1 = torch.empty(2, device=dev)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.reduce_scatter_tensor(o1, inp.to(dev))
    cm.wait()
    check("coalesced reduce_scatter_tensor", o1,
          torch.stack([torch.arange(world * 2, dtype=torch.float32) + r
                       for r in range(world)]).sum(0)[2 * rank:2 * rank + 2])

    # object collectives ride on the same backend
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in range(world)]
    done.append("all_gather_object")

    dist.barrier()
    return done


def scenario_mpmd(mode):
    """Rank-specific code between collectives: extra ops and logging on some
    ranks, a subgroup only some ranks use, different step counts."""
    import torch
    import torch.distributed as dist

    dev = init(mode)
    rank, world = dist.get_rank(), dist.get_world_size()
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    log = []
    x = torch.full((8,), float(rank + 1), device=dev)
    for step in range(3):
        if rank == 0:
            log.append(f"step {step}: {x.sum().item():.1f}")  # logging on rank 0 only
        if rank == world - 1:
            x = x * 2 + torch.randn(8, device=dev).abs() * 0  # an extra op on one rank
        dist.all_reduce(x)
        if rank % 2 == 0:
            y = torch.full((4,), float(rank), device=dev)
            dist.all_reduce(y, group=evens)
            assert y.cpu().tolist() == [float(sum(range(0, world, 2)))] * 4
        x = x / world
    # ranks leave a loop after different numbers of local steps, then meet again
    z = torch.zeros(2, device=dev)
    for _ in range(rank + 1):
        z = z + 1
    dist.all_reduce(z)
    dist.barrier()
    dist.destroy_process_group()
    emit({"x": x.cpu().tolist(), "z": z.cpu().tolist(), "log": log, "device": str(dev)})


def scenario_fault(kind, timeout_s):
    """Rank 1 misbehaves; every other rank must fail with a clear error."""
    import torch
    import torch.distributed as dist

    dev = init("tpu", timeout_s=float(timeout_s))
    rank = dist.get_rank()
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)  # everyone is connected
    if rank == 1:
        if kind == "die":
            os._exit(3)
        if kind == "hang":
            time.sleep(float(timeout_s) + 3)  # longer than the others wait
            os._exit(0)
    start = time.monotonic()
    try:
        if kind == "mismatch":
            # Caught before any data moves: every rank raises, and the group
            # stays usable.
            errors = []
            for bad in (lambda: dist.all_reduce(torch.ones(4 + rank, device=dev)),
                        lambda: dist.broadcast(t, src=0) if rank == 1 else dist.all_reduce(t)):
                try:
                    bad()
                except RuntimeError as e:
                    errors.append(str(e).splitlines()[0][:800])
            ok = torch.full((3,), float(rank), device=dev)
            dist.all_reduce(ok)
            emit({"errors": errors, "after": ok.cpu().tolist()})
            os._exit(0)
        dist.all_reduce(t)
        t.cpu()
    except Exception as e:  # noqa: BLE001  (the point is which one)
        emit({"error": type(e).__name__, "message": str(e).splitlines()[0][:800],
              "seconds": time.monotonic() - start})
        os._exit(0)
    emit({"error": None, "seconds": time.monotonic() - start})


SCENARIOS = {
    "collectives": scenario_collectives,
    "mpmd": scenario_mpmd,
    "fault": scenario_fault,
}


# ----------------------------------------------------------------- tests

SCRIPT = os.path.abspath(__file__)


@pytest.mark.parametrize("world,mode", [(2, "tpu"), (4, "cpu:gloo,tpu:tpu")])
def test_collectives(world, mode):
    res = results(run_ranks(SCRIPT, "collectives", world, [mode], timeout=150))
    assert len(res[0]["done"]) == 32 + world  # a broadcast per root; rank 0 checks gather
    assert all(r["done"] == [d for d in res[0]["done"] if d != "gather"] for r in res[1:])
    counters = res[0]["counters"]
    assert counters["all_reduce"]["calls"] >= 10
    assert counters["all_reduce"]["d2h_bytes"] > 0
    assert "host-staged over gloo" in res[0]["report"]
    assert "all_to_all_single" in res[0]["report"]


@pytest.mark.parametrize("world,mode", [(2, "device_id")])
def test_mpmd(world, mode):
    # Each process sees `world` devices and rank i binds tpu:i.
    res = results(run_ranks(SCRIPT, "mpmd", world, [mode], timeout=90,
                            env={"TORCHTPU_NUM_DEVICES": str(world)}))
    assert [r["device"] for r in res] == [f"tpu:{i}" for i in range(world)]
    assert all(r["x"] == res[0]["x"] for r in res)
    assert all(r["z"] == [world * (world + 1) / 2] * 2 for r in res)
    assert len(res[0]["log"]) == 3 and all(not r["log"] for r in res[1:])


@pytest.mark.parametrize("kind", ["die", "hang"])
def test_fault_peer_lost(kind):
    # The survivors must fail within the process-group timeout (4 s here).
    outs = run_ranks(SCRIPT, "fault", 2, [kind, 4], timeout=60)
    rc, out = outs[0]
    res = results([outs[0]])[0]
    assert res["error"] == "DistBackendError", out
    assert "all_reduce" in res["message"]
    assert res["seconds"] < 4 + 4
    if kind == "hang":
        assert "timeout" in res["message"]


def test_fault_mismatch():
    res = results(run_ranks(SCRIPT, "fault", 2, ["mismatch", 20], timeout=60))
    for r in res:
        shape, op = r["errors"]
        assert "collective mismatch" in shape and "collective mismatch" in op
        assert "all_reduce(float32[4]" in shape and "all_reduce(float32[5]" in shape
        assert "broadcast(float32[4], root=0)" in op and "all_reduce(float32[4]" in op
        assert r["after"] == [1.0, 1.0, 1.0]


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
