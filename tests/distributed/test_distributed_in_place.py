"""The host-staged c10d path handing gloo the tpu storages' own bytes.

On the CPU plugin device memory is host memory: a tensor that is all of its
storage goes to gloo where it lies (ttpu_buffer_host_begin), with no copy
either way; other tensors are copied. These tests check every collective of
that path against host arithmetic on 2 and 4 ranks, with the counters showing
which tensors went in place, the inputs that must stay unchanged, the
ordering against ops queued before and after, and an in-place write racing
an asynchronous all_reduce (no crash, the process stays usable). The ranks
run this file as a script, started by test_distributed's launcher.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_distributed import emit, init, results, run_ranks  # noqa: E402


def scenario_in_place(mode):
    import torch
    import torch.distributed as dist

    import torchtpu

    if mode != "strict":
        torchtpu.set_eager_mode(mode)
    dev = init("tpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    R = dist.ReduceOp
    done = []

    def check(name, got, want):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0,
                                   msg=lambda m: f"{name}: {m}")
        done.append(name)

    def base(r, n=6, dtype=torch.float32):
        return (torch.arange(n, dtype=torch.float32) * (r + 1) + r).to(dtype)

    everyone = torch.stack([base(r) for r in range(world)])

    def staged(op):
        return torchtpu.distributed.counters().get(op, {})

    # all_reduce of a whole storage: in place, nothing copied.
    torchtpu.distributed.reset_counters()
    t = base(rank).to(dev)
    dist.all_reduce(t)
    check("all_reduce sum", t, everyone.sum(0))
    c = staged("all_reduce")
    assert c["in_place_bytes"] == 24 and c["d2h_bytes"] == 0 and c["h2d_bytes"] == 0, c

    for name, op, want in [
        ("avg", R.AVG, everyone.sum(0) / world),
        ("max", R.MAX, everyone.max(0).values),
        ("premul", dist._make_nccl_premul_sum(0.5), everyone.sum(0) * 0.5),
    ]:
        t = base(rank).to(dev)
        dist.all_reduce(t, op=op)
        check(f"all_reduce {name}", t, want)
    for dtype in (torch.int64, torch.bfloat16, torch.int8):
        t = base(rank, dtype=dtype).to(dev)
        dist.all_reduce(t)
        check(f"all_reduce {dtype}", t, everyone.to(dtype).sum(0, dtype=dtype))
    t = base(rank, dtype=torch.int64).to(dev)
    dist.all_reduce(t, op=R.AVG)
    check("all_reduce avg int", t, everyone.long().sum(0).div(world, rounding_mode="trunc"))

    # A view of a larger storage is copied; the rest of the storage stays.
    big = torch.full((10,), -1.0, device=dev)
    v = big[2:8]
    v.copy_(base(rank).to(dev))
    torchtpu.distributed.reset_counters()
    dist.all_reduce(v)
    want = torch.full((10,), -1.0)
    want[2:8] = everyone.sum(0)
    check("all_reduce view", big, want)
    c = staged("all_reduce")
    assert c["in_place_bytes"] == 0 and c["d2h_bytes"] == 24, c

    # A 2-d result (shaped version) is copied too, and still right.
    m = (torch.ones(3, 4) * (rank + 1)).to(dev) @ torch.eye(4, device=dev)
    dist.all_reduce(m)
    check("all_reduce 2-d", m, torch.ones(3, 4) * sum(range(1, world + 1)))

    # Ops queued before read the old value; ops after see the result.
    t = base(rank).to(dev)
    before = t * 2
    dist.all_reduce(t)
    after = t + 1
    check("queued before", before, base(rank) * 2)
    check("queued after", after, everyone.sum(0) + 1)

    # Read-only inputs go in place and stay unchanged.
    x = base(rank).to(dev)
    out = torch.empty(world * 6, device=dev)
    torchtpu.distributed.reset_counters()
    dist.all_gather_into_tensor(out, x)
    check("all_gather_into_tensor", out, everyone.reshape(-1))
    check("all_gather input", x, base(rank))
    c = staged("all_gather_into_tensor")
    assert c["in_place_bytes"] == 24 * (world + 1) and c["d2h_bytes"] == 0, c

    x = base(rank, n=6 * world).to(dev)
    out = torch.empty(6, device=dev)
    dist.reduce_scatter_tensor(out, x, op=dist._make_nccl_premul_sum(2.0))
    full = torch.stack([base(r, n=6 * world) for r in range(world)]).sum(0) * 2
    check("reduce_scatter premul", out, full[rank * 6:(rank + 1) * 6])
    check("reduce_scatter input", x, base(rank, n=6 * world))

    x = base(rank).to(dev)
    dist.reduce(x, dst=0)
    check("reduce", x, everyone.sum(0) if rank == 0 else base(rank))

    x = base(rank).to(dev)
    dist.broadcast(x, src=1)
    check("broadcast", x, base(1))

    x = base(rank, n=2 * world).to(dev)
    out = torch.empty(2 * world, device=dev)
    dist.all_to_all_single(out, x)
    want = torch.cat([base(r, n=2 * world)[2 * rank:2 * rank + 2] for r in range(world)])
    check("all_to_all_single", out, want)
    # input and output one storage: copied, so still right
    dist.all_to_all_single(x, x)
    check("all_to_all_single in place", x, want)

    if rank == 0:
        dist.send(base(7).to(dev), dst=1)
    elif rank == 1:
        got = torch.zeros(6, device=dev)
        dist.recv(got, src=0)
        check("recv", got, base(7))

    # An in-place write racing an asynchronous all_reduce: whatever the
    # value, no crash, and the next collectives are right.
    t = base(rank).to(dev)
    w = dist.all_reduce(t, async_op=True)
    t.mul_(3)
    t.add_(1)
    w.wait()
    assert torch.isfinite(t.cpu()).all()
    t = base(rank).to(dev)
    dist.all_reduce(t)
    check("after a racing write", t, everyone.sum(0))

    torch.tpu.synchronize()
    dist.destroy_process_group()
    emit({"done": done})


def scenario_copied():
    """TORCHTPU_DIST_IN_PLACE=0: every tensor copied, same results."""
    import torch
    import torch.distributed as dist

    import torchtpu

    dev = init("tpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.full((8,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    torch.testing.assert_close(t.cpu(), torch.full((8,), float(sum(range(1, world + 1)))))
    c = torchtpu.distributed.counters()["all_reduce"]
    assert c["in_place_bytes"] == 0 and c["d2h_bytes"] == 32 and c["h2d_bytes"] == 32, c
    dist.destroy_process_group()
    emit({"done": ["copied"]})


SCENARIOS = {"in_place": scenario_in_place, "copied": scenario_copied}

# ----------------------------------------------------------------- tests


@pytest.mark.parametrize("world,mode", [(2, "strict"), (2, "fused"), (4, "strict")])
def test_in_place(world, mode):
    outs = run_ranks(__file__, "in_place", world, args=(mode,), timeout=180)
    for payload in results(outs):
        assert "after a racing write" in payload["done"], payload


def test_in_place_off():
    outs = run_ranks(__file__, "copied", 2, timeout=90,
                     env={"TORCHTPU_DIST_IN_PLACE": "0"})
    results(outs)


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
