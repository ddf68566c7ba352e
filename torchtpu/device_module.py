"""``torch.tpu``: the device module, named after ``torch.cuda``'s API."""
import contextlib
import os

import torch

from . import _C

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device",
    "set_device", "device", "device_of", "synchronize", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "default_generators", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
    "memory_stats", "empty_cache", "mem_get_info", "Stream", "Event",
    "current_stream", "default_stream", "set_stream", "stream",
    "StreamContext",
]

_BACKEND = "tpu"


# ------------------------------------------------------------------ devices

def is_available():
    """True if a PJRT plugin loads and reports at least one device."""
    return _C._device_count() > 0


def is_initialized():
    return _C._is_initialized()


def _lazy_init():
    """Starts the runtime (loads the plugin); raises a clear RuntimeError."""
    if _in_bad_fork:
        raise RuntimeError(
            "Cannot use the tpu runtime in a forked subprocess: it was started "
            "in the parent before fork(). To use tpu with multiprocessing, use "
            "the 'spawn' start method")
    _C._init()


init = _lazy_init


# A PJRT client does not survive fork(); a child of an initialized parent
# must not use the parent's runtime (the engine refuses every call there;
# this flag lets torch.tpu.init() say so up front, as torch.cuda does).
_in_bad_fork = False


def _after_fork_in_child():
    global _in_bad_fork
    if _C._is_initialized():
        _in_bad_fork = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_in_bad_fork():
    return _in_bad_fork


def device_count():
    """Number of tpu devices (0 when no plugin can be loaded)."""
    return _C._device_count()


def current_device():
    return _C._get_device()


def _get_device_index(device, optional=False, allow_cpu=False):
    """Device index of ``device`` (int, str, torch.device or None)."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if device.type != _BACKEND:
            raise ValueError(f"Expected a tpu device, but got: {device}")
        index = device.index
    else:
        index = device
    if index is None:
        if optional:
            return current_device()
        raise ValueError(f"Expected a tpu device with an index, got: {device}")
    return int(index)


class _Utils:
    """What torch.serialization looks up as ``torch.tpu._utils``."""

    _get_device_index = staticmethod(_get_device_index)


_utils = _Utils()


def set_device(device):
    index = _get_device_index(device, optional=True)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that makes ``device`` the current tpu device."""

    def __init__(self, device):
        self.index = _get_device_index(device, optional=True) if device is not None else -1
        self.previous = -1

    def __enter__(self):
        self.previous = _C._exchange_device(self.index)
        return self

    def __exit__(self, *exc):
        if self.index >= 0:
            _C._set_device(self.previous)
        return False


class device_of(device):
    """Context manager that makes the device of tensor ``obj`` current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == _BACKEND else None)


def synchronize(device=None):
    """Waits for all work queued on ``device`` (default: current device);
    raises the first asynchronous error of that work."""
    _C._synchronize(_get_device_index(device, optional=True))


# ------------------------------------------------------------------ random

class _DefaultGenerators:
    """Tuple-like view of the per-device default generators."""

    def __getitem__(self, index):
        return _C._default_generator(index)

    def __len__(self):
        return device_count()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def _generator(device=None):
    return _C._default_generator(_get_device_index(device, optional=True))


def manual_seed(seed):
    """Seeds the current tpu device."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed):
    """Seeds every tpu device. Does not start the runtime: before it starts,
    the seed is kept and applied when it does (torch.manual_seed calls this
    even on machines without a plugin)."""
    _C._manual_seed_all(int(seed) & ((1 << 64) - 1))


def seed():
    """Seeds the current device with a non-deterministic random number."""
    return _generator().seed()


def seed_all():
    """Seeds every device with one non-deterministic random number."""
    random_seed = _generator(0).seed()
    manual_seed_all(random_seed)
    return random_seed


def initial_seed():
    return _generator().initial_seed()


def get_rng_state(device="tpu"):
    """Random state of ``device`` as a uint8 CPU tensor (16 bytes)."""
    return _generator(device).get_state()


def set_rng_state(new_state, device="tpu"):
    _generator(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# ------------------------------------------------------------------ memory

def _stats(device=None):
    return _C._memory_stats(_get_device_index(device, optional=True))


def memory_allocated(device=None):
    """Bytes held by live tpu tensors' storages on ``device``."""
    return _stats(device)["bytes_in_use"]


def max_memory_allocated(device=None):
    return _stats(device)["peak_bytes_in_use"]


# No caching allocator: a storage's buffer is freed when the storage dies,
# so reserved memory is allocated memory.
memory_reserved = memory_allocated
max_memory_reserved = max_memory_allocated


def reset_peak_memory_stats(device=None):
    _C._reset_peak_memory_stats(_get_device_index(device, optional=True))


def memory_stats(device=None):
    """Memory and engine counters, with torch.cuda's key names where they
    have a meaning here."""
    stats = _stats(device)
    out = {
        "allocated_bytes.all.current": stats["bytes_in_use"],
        "allocated_bytes.all.peak": stats["peak_bytes_in_use"],
        "reserved_bytes.all.current": stats["bytes_in_use"],
        "reserved_bytes.all.peak": stats["peak_bytes_in_use"],
        "active.all.current": stats["live_buffers"],
    }
    out.update(stats)
    return out


def empty_cache():
    """Nothing is cached: freed storages release their buffers at once."""


def _host_memory_info():
    info = {}
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0]) * 1024
    return info.get("MemAvailable", info.get("MemFree", 0)), info["MemTotal"]


def mem_get_info(device=None):
    """(free, total) bytes of ``device``. On the CPU plugin the device's
    memory is the host's."""
    _get_device_index(device, optional=True)
    name = _C._platform()["name"].lower()
    if name in ("cpu", "host"):
        return _host_memory_info()
    raise NotImplementedError(
        f"mem_get_info is not available for the '{name}' plugin: PJRT does not "
        "report device memory; use torch.tpu.memory_allocated()")


# ------------------------------------------------------------------ streams

class _TorchTypeFactory(type):
    """Metaclass: the class builds plain torch.Stream/torch.Event objects
    (PyTorch's own methods check for those exact types) and isinstance()
    accepts them when they are on tpu."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._torch_type) and getattr(
            obj, "device", torch.device("cpu")).type == _BACKEND


class Stream(metaclass=_TorchTypeFactory):
    """A tpu stream (a ``torch.Stream``). Streams of one device share its
    ordered work queue."""

    _torch_type = torch.Stream

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:
            return torch.Stream(**kwargs)
        index = _get_device_index(device, optional=True)
        return torch.Stream(device=torch.device(_BACKEND, index), priority=priority)


def _stream_from_tuple(triple):
    stream_id, device_index, device_type = triple
    return Stream(stream_id=stream_id, device_index=device_index,
                  device_type=device_type)


def current_stream(device=None):
    return _stream_from_tuple(
        _C._current_stream(_get_device_index(device, optional=True)))


def default_stream(device=None):
    return _stream_from_tuple(
        _C._default_stream(_get_device_index(device, optional=True)))


def set_stream(stream):
    if stream is None:
        return
    _C._set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """Makes ``stream`` current (on its device) inside the block."""

    def __init__(self, stream):
        self.stream = stream
        self.previous_stream = None
        self.device_context = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.device_context = device(self.stream.device_index)
        self.device_context.__enter__()
        self.previous_stream = current_stream()
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        set_stream(self.previous_stream)
        self.device_context.__exit__(*exc)
        return False


def stream(stream):
    return StreamContext(stream)


class Event(metaclass=_TorchTypeFactory):
    """A tpu event (a ``torch.Event``): record, wait, query, synchronize,
    elapsed_time."""

    _torch_type = torch.Event

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(device=_BACKEND, enable_timing=enable_timing,
                           blocking=blocking, interprocess=interprocess)


# torch.tpu.amp, and what torch.autocast("tpu") asks of the device module.
from . import amp  # noqa: E402
from .amp import get_amp_supported_dtype  # noqa: E402,F401
