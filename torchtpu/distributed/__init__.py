"""torch.distributed on device ``tpu``: the ``"tpu"`` c10d backend.

``import torchtpu`` registers it, so these all work::

    dist.init_process_group("tpu")                  # tpu tensors only
    dist.init_process_group("cpu:gloo,tpu:tpu")     # cpu and tpu tensors
    dist.init_process_group(device_id=torch.device("tpu", i))

and so do DDP, FSDP2 (fully_shard), DTensor and torch.distributed.checkpoint.

Where collectives run (``path()``; ``torchtpu.debug.report()`` shows the
path and per-collective counts):

- Ranks that are threads of one process, each on its own device of the
  one PJRT client (PyTorch's thread-local world, as its threaded process
  groups use): "xla collective program". The ranks meet in process; the
  last to arrive launches one replicated XLA program over every rank's
  device (all_reduce, broadcast, reduce, all_gather, reduce_scatter,
  equal-split all_to_all); irregular shapes (uneven all_to_all, gather,
  scatter, send/recv) move by device-to-device copies.
- Ranks in separate processes: the XLA CPU plugin cannot reach other
  processes (it ignores PJRT's key-value callbacks), so every collective
  stages through host memory and runs with PyTorch's gloo: "host-staged over
  gloo". Results land in the tpu tensors in place. Where a tensor is all
  of its storage, gloo works on the storage's bytes where they lie (the CPU
  plugin's device memory is host memory): no copy either way.

``TORCHTPU_DIST_LOCAL=0`` forces the gloo path even for ranks of one
process. ``TORCHTPU_DIST_IN_PLACE=0`` makes that path copy every tensor
(the zero-copy access off). ``TORCHTPU_DIST_CHECK=0`` skips the gloo path's signature exchange
that makes a mismatched collective (other op, dtype, size, root, split
sizes on some rank; a send and recv of different sizes) fail with a clear
error instead of aborting inside gloo. ``comm`` holds the list API (one
tensor per device, no process group).
"""
import datetime
import os
import threading
import uuid

import torch
import torch.distributed as dist

from .. import _C
from . import comm, threads  # noqa: F401  (list API; ranks as threads)

BACKEND = "tpu"

HOST_STAGED = "host-staged over gloo"
XLA_LOCAL = "xla collective program"
DEVICE_COPIES = "in-process device copies"

# Identifies this process to the other ranks of a group: equal tokens on
# every rank mean the ranks are threads of one process.
_PROCESS_TOKEN = uuid.uuid4().hex
_paths = {}  # group name -> the path its tpu backend takes
_paths_lock = threading.Lock()


def _check_enabled():
    return os.environ.get("TORCHTPU_DIST_CHECK", "1") not in ("0", "")


def _in_place_enabled():
    return os.environ.get("TORCHTPU_DIST_IN_PLACE", "1") not in ("0", "")


def _local_enabled():
    return os.environ.get("TORCHTPU_DIST_LOCAL", "1") not in ("0", "")


# The XLA path for a group whose ranks live in several processes: one
# program across processes needs a plugin whose collectives reach them
# (the cross_process_collectives capability), and the engine does not
# implement that path yet. Until it does, such groups stay on host staging
# whatever the plugin can do.
_XLA_ACROSS_PROCESSES_IMPLEMENTED = False


def _xla_across_processes():
    """Whether a group spanning processes takes the XLA path: the plugin
    must reach other processes and the path must exist (it does not yet)."""
    return (bool(_C._caps()["cross_process_collectives"])
            and _XLA_ACROSS_PROCESSES_IMPLEMENTED)


def _local_key(backend_opts):
    """The group's key when every rank is a thread of this process on its
    own device (so one XLA program can span them), else None. Every rank
    publishes its process token and device through the group's store."""
    rank, size = backend_opts.group_rank, backend_opts.group_size
    store = dist.PrefixStore("tpu-local/", backend_opts.store)
    device = torch.tpu.current_device()
    store.set(str(rank), f"{_PROCESS_TOKEN}:{device}:{uuid.uuid4().hex}")
    entries = [store.get(str(r)).decode().split(":") for r in range(size)]
    same_process = all(e[0] == _PROCESS_TOKEN for e in entries)
    devices = [int(e[1]) for e in entries]
    if not same_process and not _xla_across_processes():
        return None
    if same_process and len(set(devices)) != size:
        return None
    # rank 0's fresh id names this group instance (a group name is reused
    # by the next world of the same process)
    return f"{backend_opts.group_id}/{entries[0][2]}"


def _create(backend_opts, options=None):
    """c10d creator (extended API). Ranks that share this process, one
    device each, get the in-process backend (XLA collective programs);
    other groups a tpu Backend over a gloo Backend of the same ranks,
    talking through this group's store under its own prefix."""
    timeout = backend_opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout.total_seconds()
                                                   if hasattr(timeout, "total_seconds")
                                                   else timeout))
    key = _local_key(backend_opts) if _local_enabled() else None
    with _paths_lock:
        _paths[backend_opts.group_id] = XLA_LOCAL if key else HOST_STAGED
    if key:
        return _C._dist_local_backend(key, backend_opts.group_rank,
                                      backend_opts.group_size, timeout.total_seconds(),
                                      torch.tpu.current_device())
    store = dist.PrefixStore("tpu-host/", backend_opts.store)
    host = dist.ProcessGroupGloo(store, backend_opts.group_rank,
                                 backend_opts.group_size, timeout)
    host.options.global_ranks_in_group = list(backend_opts.global_ranks_in_group)
    host.options.group_name = backend_opts.group_id
    return _C._dist_backend(host, backend_opts.group_rank, backend_opts.group_size,
                            timeout.total_seconds(), _check_enabled(),
                            _in_place_enabled())


def register():
    """Registers the ``"tpu"`` backend with torch.distributed (idempotent)."""
    if not dist.is_available():
        return False
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return True
    dist.Backend.register_backend(BACKEND, _create, extended_api=True,
                                  devices=[BACKEND])
    return True


def path(group=None):
    """How collectives on tpu tensors of `group` (default: the default
    group) run: "xla collective program" or "host-staged over gloo"."""
    if group is None:
        group = dist.group.WORLD if dist.is_initialized() else None
    name = getattr(group, "group_name", None)
    with _paths_lock:
        return _paths.get(name, HOST_STAGED)


def counters():
    """{collective: {"calls", "d2h_bytes", "h2d_bytes", "in_place_bytes"}}:
    the host-staged (gloo) path's collectives in this process. d2h/h2d:
    bytes copied between the device and the host; in_place_bytes: tpu bytes
    gloo used where they lie, with no copy."""
    return dict(_C._dist_counters())


def local_counters():
    """{path: {collective: {"calls", "bytes"}}}: collectives that ran in
    process, as XLA collective programs (the comm list API and in-process
    ranks) or as device-to-device copies. bytes: per device."""
    return {p: dict(v) for p, v in _C._coll_counters().items()}


def reset_counters():
    _C._dist_reset_counters()
    _C._coll_reset_counters()


def report_lines():
    """Lines for torchtpu.debug.report(); empty when no collective ran."""
    staged, local = counters(), local_counters()
    paths = [(p, {k: (v["calls"], f"{v['bytes']} B per device")
                  for k, v in ops.items()}) for p, ops in sorted(local.items())]
    if staged:
        paths.append((HOST_STAGED, {
            k: (v["calls"], f"{v['d2h_bytes']} B to host, {v['h2d_bytes']} B back, "
                            f"{v['in_place_bytes']} B in place")
            for k, v in staged.items()}))
    paths = [(p, ops) for p, ops in paths if ops]
    if not paths:
        return []
    total = sum(calls for _, ops in paths for calls, _ in ops.values())
    lines = [f"  collectives         {total}"]
    for p, ops in paths:
        lines.append(f"    {p}: {sum(c for c, _ in ops.values())}")
        for name, (calls, detail) in sorted(ops.items()):
            lines.append(f"      {name:<22} x{calls}, {detail}")
    return lines


__all__ = ["BACKEND", "register", "path", "counters", "local_counters",
           "reset_counters", "report_lines", "comm", "threads", "HOST_STAGED", "XLA_LOCAL",
           "DEVICE_COPIES"]
