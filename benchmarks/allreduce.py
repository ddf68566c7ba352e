"""all_reduce bus bandwidth on tpu tensors (the "tpu" backend) vs gloo on CPU
tensors, and DDP step-time overhead vs one process.

    python benchmarks/allreduce.py [--ranks 2] [--min-mb 1] [--max-mb 256]
                                   [--iters 5] [--ddp-steps 10] [--xla-only]
                                   [--after-matmul]

Starts the ranks itself (one process each, 127.0.0.1). Bus bandwidth is
NCCL's definition: bytes * 2 (n - 1) / n / time, for a float32 SUM all_reduce
of `bytes`. Three columns run in the same processes ("cpu:gloo,tpu:tpu"),
interleaved round by round after one warm-up each, and each size reports
the median of --iters rounds: tpu tensors (the storage's bytes handed to
gloo where they lie), tpu tensors with that off (TORCHTPU_DIST_IN_PLACE=0:
copied to the host and back), tpu tensors without the signature exchange
before each collective (TORCHTPU_DIST_CHECK=0), and gloo on CPU tensors.

Then the in-process path: one process with --ranks devices
(TORCHTPU_NUM_DEVICES), the same all_reduce as one XLA collective program
over the devices, called through the list API (torchtpu.distributed.comm)
and through c10d with the ranks as threads (torchtpu.distributed.threads),
each timed to the results being on the devices (synchronize). With
--ddp-steps, DDP on thread ranks trains the same model as below.

The DDP part trains the demo GPT (torchtpu.demo) on tpu: the median step of
DDP on N ranks (same per-rank batch) against the same model in one process.
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time


def bus_bw(nbytes, seconds, n):
    return nbytes * 2 * (n - 1) / n / seconds / 1e9


def timed(fn, iters):
    fn()  # warm-up: compiles, connects, allocates
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved(fns, iters):
    """Each fn's median time over `iters` rounds of one call each, every
    call started together on all ranks (a barrier), after a warm-up call
    (compiles, connects, allocates)."""
    import torch.distributed as dist

    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(iters):
        for k, fn in enumerate(fns):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def allreduce_sweep(args, rank, world):
    import torch
    import torch.distributed as dist

    # The same all_reduce with the zero-copy host access off: every tensor
    # copied to the host and back (TORCHTPU_DIST_IN_PLACE=0 is read when a
    # group's backend is made).
    os.environ["TORCHTPU_DIST_IN_PLACE"] = "0"
    copied = dist.new_group(list(range(world)), backend="tpu")
    os.environ.pop("TORCHTPU_DIST_IN_PLACE")
    # And without the signature exchange before each collective (one small
    # gloo round): what the check costs.
    os.environ["TORCHTPU_DIST_CHECK"] = "0"
    unchecked = dist.new_group(list(range(world)), backend="tpu")
    os.environ.pop("TORCHTPU_DIST_CHECK")

    rows = []
    for mb in sizes_mb(args):
        n = mb * (1 << 20) // 4
        cpu = torch.ones(n)
        tpu = torch.ones(n, device="tpu")

        def on_tpu(group=None):
            dist.all_reduce(tpu, group=group)
            torch.tpu.synchronize()

        # Interleaved, so that the machine's load drifts over all columns
        # alike: one of each per round, median per column.
        fns = [on_tpu, lambda: on_tpu(copied), lambda: on_tpu(unchecked),
               lambda: dist.all_reduce(cpu)]
        rows.append((mb, *interleaved(fns, args.iters)))
        del cpu, tpu
    if rank == 0:
        print(f"all_reduce float32 SUM, {world} ranks, median of {args.iters} "
              "interleaved rounds (bus bandwidth GB/s; time ms)")
        print(f"{'size':>8} {'tpu':>7} {'copied':>7} {'no check':>9} {'gloo cpu':>9} "
              f"{'tpu ms':>7} {'gloo ms':>8} {'tpu/gloo':>9} {'no check/gloo':>14}")
        for mb, t_tpu, t_copy, t_free, t_cpu in rows:
            nbytes = mb * (1 << 20)
            bw = [bus_bw(nbytes, t, world) for t in (t_tpu, t_copy, t_free, t_cpu)]
            print(f"{mb:>6}MB {bw[0]:>7.2f} {bw[1]:>7.2f} {bw[2]:>9.2f} {bw[3]:>9.2f} "
                  f"{t_tpu * 1e3:>7.1f} {t_cpu * 1e3:>8.1f} {t_cpu / t_tpu:>9.2f} "
                  f"{t_cpu / t_free:>14.2f}")
        print(f"load average {os.getloadavg()[0]:.2f}")
        sys.stdout.flush()


def after_matmul(args, rank, world):
    """The signature exchange behind device work: an all_reduce of a 1 MB
    tensor that a matmul has just written (as DDP reduces a bucket its
    backward is still computing). The exchange starts before the backend
    waits for that matmul, so with the check on it costs only what the
    matmul does not hide; "exposed" is checked minus unchecked."""
    import torch
    import torch.distributed as dist

    os.environ["TORCHTPU_DIST_CHECK"] = "0"
    unchecked = dist.new_group(list(range(world)), backend="tpu")
    os.environ.pop("TORCHTPU_DIST_CHECK")
    n, k = (1 << 20) // 4, 256
    a = torch.randn(k, k, device="tpu")
    b = torch.randn(k, n // k, device="tpu")
    t = torch.empty(n, device="tpu")

    def step(compute, group=None):
        if compute:
            torch.mm(a, b, out=t.view(k, -1))
        dist.all_reduce(t, group=group)
        torch.tpu.synchronize()

    fns = [lambda: step(True), lambda: step(True, unchecked),
           lambda: step(False), lambda: step(False, unchecked)]
    medians = interleaved(fns, args.iters)
    if rank == 0:
        m = [x * 1e3 for x in medians]
        print(f"1 MB all_reduce, median of {args.iters} interleaved rounds (ms): "
              f"after a matmul: checked {m[0]:.2f}, unchecked {m[1]:.2f} "
              f"(exposed {m[0] - m[1]:+.2f}); alone: checked {m[2]:.2f}, "
              f"unchecked {m[3]:.2f} (exposed {m[2] - m[3]:+.2f}); "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)


def ddp_step_time(args, rank, world, distributed, device="tpu", state=None):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from torchtpu.demo import GPT, batches, load_text

    _, chars, data = load_text()
    if state is None:
        torch.manual_seed(0)
    model = GPT(len(chars), d=64, layers=2, heads=4, block=64)
    if state is not None:
        model.load_state_dict(state)
    model = model.to(device)
    if distributed:
        model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for step, (x, y) in enumerate(batches(data, args.ddp_steps + 2, 8, 64, seed=rank)):
        x, y = x.to(device), y.to(device)
        t0 = time.perf_counter()
        loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if step >= 2:  # the first steps compile
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def rank_main(args):
    import torch
    import torch.distributed as dist

    import torchtpu  # noqa: F401

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("cpu:gloo,tpu:tpu", timeout=datetime.timedelta(seconds=300))
    if args.after_matmul:
        after_matmul(args, rank, world)
        dist.destroy_process_group()
        sys.stdout.flush()
        os._exit(0)
    if not args.skip_allreduce:
        allreduce_sweep(args, rank, world)
    if args.ddp_steps:
        dist.barrier()
        t = ddp_step_time(args, rank, world, True)
        t_all = [None] * world
        dist.all_gather_object(t_all, t)
        if rank == 0:
            print(f"DDP demo GPT (batch 8 x 64 per rank): {max(t_all) * 1e3:.1f} ms/step "
                  f"on {world} ranks", flush=True)
    dist.destroy_process_group()
    # Skips the exit-time teardown, which sometimes aborts after backward on
    # tpu (not a distributed issue; see the README's distributed section).
    sys.stdout.flush()
    os._exit(0)


def sizes_mb(args):
    out, mb = [], args.min_mb
    while mb <= args.max_mb:
        out.append(mb)
        mb *= 2
    return out


def xla_main(args):
    """One process, --ranks devices: the all_reduce as one XLA collective
    program, through the list API and through c10d thread ranks."""
    import torch
    import torch.distributed as dist

    import torchtpu  # noqa: F401
    from torchtpu.distributed import comm, threads

    n = args.ranks
    assert torch.tpu.device_count() == n, "run with TORCHTPU_NUM_DEVICES=--ranks"
    rows = []
    for mb in sizes_mb(args):
        count = mb * (1 << 20) // 4
        ts = [torch.ones(count, device=f"tpu:{i}") for i in range(n)]

        def listed():
            comm.all_reduce(ts)
            for i in range(n):
                torch.tpu.synchronize(i)

        t_list = timed(listed, args.iters)
        del ts

        def rank_fn(rank):
            t = torch.ones(count, device=f"tpu:{rank}")

            def step():
                dist.all_reduce(t)
                torch.tpu.synchronize(rank)

            return timed(step, args.iters)

        t_threads = max(threads.run(rank_fn, world_size=n, timeout=300))
        rows.append((mb, t_list, t_threads))
    print(f"in-process XLA collective program, {n} devices of one client, "
          f"median of {args.iters} (bus bandwidth GB/s; time ms)")
    print(f"{'size':>8} {'list API':>10} {'c10d threads':>13} {'list ms':>9} "
          f"{'threads ms':>11}")
    for mb, t_list, t_thr in rows:
        nbytes = mb * (1 << 20)
        print(f"{mb:>6}MB {bus_bw(nbytes, t_list, n):>10.2f} "
              f"{bus_bw(nbytes, t_thr, n):>13.2f} {t_list * 1e3:>9.1f} "
              f"{t_thr * 1e3:>11.1f}", flush=True)
    if args.ddp_steps:
        from torchtpu.demo import GPT, load_text

        _, chars, _ = load_text()
        torch.manual_seed(0)
        state = GPT(len(chars), d=64, layers=2, heads=4, block=64).state_dict()
        t_all = threads.run(lambda r: ddp_step_time(args, r, n, True, f"tpu:{r}", state),
                            world_size=n, timeout=300)
        print(f"DDP demo GPT (batch 8 x 64 per rank), {n} thread ranks in one "
              f"process: {max(t_all) * 1e3:.1f} ms/step", flush=True)
    sys.stdout.flush()
    os._exit(0)


def single_main(args):
    import torchtpu  # noqa: F401

    t = ddp_step_time(args, 0, 1, False)
    print(f"same model, one process, no DDP: {t * 1e3:.1f} ms/step", flush=True)
    os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--min-mb", type=int, default=1)
    p.add_argument("--max-mb", type=int, default=256)
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--ddp-steps", type=int, default=10)
    p.add_argument("--skip-allreduce", action="store_true")
    p.add_argument("--after-matmul", action="store_true",
                   help="only the signature exchange's cost behind device work")
    p.add_argument("--xla-only", action="store_true",
                   help="only the in-process XLA collective part")
    p.add_argument("--role", default="launcher", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "rank":
        return rank_main(args)
    if args.role == "single":
        return single_main(args)
    if args.role == "xla":
        return xla_main(args)
    xla = [sys.executable, __file__, *sys.argv[1:], "--role", "xla"]
    xla_env = dict(os.environ, TORCHTPU_NUM_DEVICES=str(args.ranks),
                   PYTHONWARNINGS="ignore", TORCH_CPP_LOG_LEVEL="ERROR")
    if args.xla_only:
        return subprocess.call(xla, env=xla_env)

    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [a for a in sys.argv[1:]]
    procs = []
    for rank in range(args.ranks):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE=str(args.ranks), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), PYTHONWARNINGS="ignore",
                   TORCH_CPP_LOG_LEVEL="ERROR")
        procs.append(subprocess.Popen([sys.executable, __file__, *argv, "--role", "rank"],
                                      env=env))
    rc = max(p.wait() for p in procs)
    if args.after_matmul:
        return rc
    if rc == 0 and args.ddp_steps:
        rc = subprocess.call([sys.executable, __file__, *argv, "--role", "single"],
                             env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if rc == 0:
        rc = subprocess.call(xla, env=xla_env)
    return rc


if __name__ == "__main__":
    sys.exit(main())
