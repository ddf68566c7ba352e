"""torch.distributed on device ``tpu``: the ``"tpu"`` c10d backend.

``import torchtpu`` registers it, so these all work::

    dist.init_process_group("tpu")                  # tpu tensors only
    dist.init_process_group("cpu:gloo,tpu:tpu")     # cpu and tpu tensors
    dist.init_process_group(device_id=torch.device("tpu", i))

and so do DDP, FSDP2 (fully_shard), DTensor and torch.distributed.checkpoint.

Where collectives run: the XLA CPU plugin cannot reach other processes, so
the backend stages every collective through host memory and runs it with
PyTorch's gloo (``path()`` says so; ``torchtpu.debug.report()`` shows the
path and per-collective counts). Results land in the tpu tensors in place.

``TORCHTPU_DIST_CHECK=0`` skips the signature exchange that makes a
mismatched collective (other op, dtype, size, root, split sizes on some rank)
fail with a clear error instead of aborting inside gloo.
"""
import datetime
import os

import torch
import torch.distributed as dist

from .. import _C

BACKEND = "tpu"

# Name of the only path this build has; a plugin with multi-process
# collectives would run them inside XLA programs instead.
HOST_STAGED = "host-staged over gloo"


def _check_enabled():
    return os.environ.get("TORCHTPU_DIST_CHECK", "1") not in ("0", "")


def _create(backend_opts, options=None):
    """c10d creator (extended API): a tpu Backend over a gloo Backend of the
    same ranks, talking through this group's store under its own prefix."""
    timeout = backend_opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout.total_seconds()
                                                   if hasattr(timeout, "total_seconds")
                                                   else timeout))
    store = dist.PrefixStore("tpu-host/", backend_opts.store)
    host = dist.ProcessGroupGloo(store, backend_opts.group_rank,
                                 backend_opts.group_size, timeout)
    host.options.global_ranks_in_group = list(backend_opts.global_ranks_in_group)
    host.options.group_name = backend_opts.group_id
    return _C._dist_backend(host, backend_opts.group_rank, backend_opts.group_size,
                            timeout.total_seconds(), _check_enabled())


def register():
    """Registers the ``"tpu"`` backend with torch.distributed (idempotent)."""
    if not dist.is_available():
        return False
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return True
    dist.Backend.register_backend(BACKEND, _create, extended_api=True,
                                  devices=[BACKEND])
    return True


def path():
    """How collectives on tpu tensors run in this process."""
    return HOST_STAGED


def counters():
    """{collective: {"calls", "d2h_bytes", "h2d_bytes"}} for this process."""
    return dict(_C._dist_counters())


def reset_counters():
    _C._dist_reset_counters()


def report_lines():
    """Lines for torchtpu.debug.report(); empty when no collective ran."""
    c = counters()
    if not c:
        return []
    lines = [f"  collectives         {sum(v['calls'] for v in c.values())} ({path()})"]
    for name, v in sorted(c.items()):
        lines.append(f"    {name:<22} x{v['calls']}, {v['d2h_bytes']} B to host, "
                     f"{v['h2d_bytes']} B back")
    return lines


__all__ = ["BACKEND", "register", "path", "counters", "reset_counters", "report_lines"]
