"""Ranks as threads of one process, one tpu device each.

    def train(rank):
        model = DDP(Net().to(f"tpu:{rank}"))   # collectives: XLA programs
        ...
        return loss.item()

    losses = torchtpu.distributed.threads.run(train, world_size=4)

Each thread is a rank of a "tpu" process group on ``tpu:rank``
(``TORCHTPU_NUM_DEVICES=N`` gives the CPU plugin N devices). The ranks share
one PJRT client, so the backend runs their collectives as XLA collective
programs spanning their devices (``torchtpu.distributed.path()`` says
"xla collective program").

This uses PyTorch's own machinery for thread ranks, the thread-local world
of its threaded process groups (``torch.testing._internal.distributed.
multi_threaded_pg``) with the process-group registry in thread-isolation
mode, and turns autograd's worker threads off while it runs, as that
machinery does: each rank's backward runs on its own thread. One run at a
time per process; it cannot be mixed with a process group initialized
outside it.
"""
import datetime
import threading

import torch

_lock = threading.Lock()


def run(fn, world_size=None, args=(), timeout=60.0):
    """Runs ``fn(rank, *args)`` on `world_size` threads (default: every
    device), each after ``init_process_group("tpu")`` with its rank and with
    ``tpu:rank`` as its current device, and destroys the group after.
    Returns the results in rank order. If a rank raises, the others fail at
    their next collective within `timeout` seconds (the group's timeout),
    and the first exception in rank order is raised here, its rank named."""
    import torch.distributed as dist
    from torch.testing._internal.distributed import multi_threaded_pg as mtpg

    world_size = torch.tpu.device_count() if world_size is None else int(world_size)
    if world_size > torch.tpu.device_count():
        raise ValueError(f"{world_size} thread ranks need {world_size} tpu devices; "
                         f"there are {torch.tpu.device_count()} "
                         f"(set TORCHTPU_NUM_DEVICES before the first tpu use)")
    isolation = torch._C._distributed_c10d._set_thread_isolation_mode
    if not _lock.acquire(blocking=False):
        raise RuntimeError("torchtpu.distributed.threads.run is already running")
    try:
        mtpg._install_threaded_pg()
        isolation(True)
        store = dist.HashStore()
        results = [None] * world_size
        errors = [None] * world_size

        def rank_main(rank):
            try:
                torch.tpu.set_device(rank)
                dist.init_process_group(
                    "tpu", store=store, rank=rank, world_size=world_size,
                    timeout=datetime.timedelta(seconds=timeout))
                try:
                    # Backward on this thread, not autograd's device threads:
                    # the thread-local world (the rank's groups, what comm
                    # hooks see) exists on this thread only.
                    with torch.autograd.set_multithreading_enabled(False):
                        results[rank] = fn(rank, *args)
                finally:
                    dist.destroy_process_group()
            except BaseException as e:  # reported below, rank named
                errors[rank] = e

        threads = [threading.Thread(target=rank_main, args=(r,), daemon=True,
                                    name=f"tpu-rank-{r}")
                   for r in range(world_size)]
        for t in threads:
            t.start()
        for t in threads:
            # A rank stuck outside any collective cannot be interrupted; give
            # up on it after the group timeout plus some slack.
            t.join(timeout + 30.0)
        stuck = [r for r, t in enumerate(threads) if t.is_alive()]
        if stuck:
            raise RuntimeError(f"thread ranks {stuck} did not finish within "
                               f"{timeout + 30.0:.0f} s")
        for rank, e in enumerate(errors):
            if e is not None:
                raise RuntimeError(f"rank {rank} failed: {type(e).__name__}: {e}") from e
        return results
    finally:
        try:
            isolation(False)
            mtpg._uninstall_threaded_pg()
        finally:
            _lock.release()
