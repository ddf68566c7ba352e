"""``torch.tpu``: the device module, named after ``torch.cuda``'s API.

Which of ``torch.cuda``'s names exist here, and why the others do not, is
in docs/api.md (written by tools/api_parity.py from this module)."""
import collections
import os
import warnings

import torch

from . import _C

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device",
    "set_device", "device", "device_of", "synchronize", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "default_generators", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_cached",
    "max_memory_cached", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "reset_max_memory_cached",
    "reset_accumulated_memory_stats", "memory_stats",
    "memory_stats_as_nested_dict", "empty_cache", "mem_get_info",
    "get_device_name", "get_device_properties", "is_bf16_supported",
    "OutOfMemoryError", "Stream", "Event", "current_stream",
    "default_stream", "set_stream", "stream", "StreamContext",
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


class _TpuDeviceProperties:
    """What ``get_device_properties`` returns: the device's kind as its
    plugin names it, its memory where known, and where it comes from."""

    __slots__ = ("name", "type", "index", "id", "total_memory", "platform",
                 "platform_version")

    def __init__(self, index):
        info = _C._device_properties(index)
        platform = _C._platform()
        self.name = info["kind"]
        self.type = _BACKEND
        self.index = index
        self.id = info["id"]
        try:
            self.total_memory = mem_get_info(index)[1]
        except NotImplementedError:
            self.total_memory = None  # the plugin does not say
        self.platform = platform["name"]
        self.platform_version = platform["version"]

    def __repr__(self):
        memory = ("unknown" if self.total_memory is None
                  else f"{self.total_memory // (1024 * 1024)}MB")
        return (f"_TpuDeviceProperties(name='{self.name}', "
                f"total_memory={memory}, platform='{self.platform}', "
                f"index={self.index}, id={self.id})")


def get_device_properties(device=None):
    """Properties of ``device`` (default: current): ``name`` (the device's
    kind, e.g. ``"TPU v5 lite"``; ``"cpu"`` on the CPU plugin),
    ``total_memory`` in bytes (the host's memory on the CPU plugin; None
    where the plugin does not report it), ``platform``,
    ``platform_version``, ``index`` and the global ``id``."""
    _lazy_init()
    index = _get_device_index(device, optional=True)
    if not 0 <= index < device_count():
        raise AssertionError("Invalid device id")
    return _TpuDeviceProperties(index)


def get_device_name(device=None):
    """The name (kind) of ``device`` (default: current)."""
    return get_device_properties(device).name


def is_bf16_supported(including_emulation=True):
    """True: every plugin runs bfloat16 (XLA lowers it on CPU, TPU, GPU)."""
    return is_available()


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
#
# No caching allocator: each storage is one device buffer, released when
# the storage dies. So every allocation is one device allocation (a
# "segment"), reserved memory is allocated memory, and only the "all" pool
# is counted. (On the CPU plugin the process heap keeps freed memory,
# which empty_cache() gives back.) The same figures
# reach torch.accelerator's memory functions through the glue's
# c10::DeviceAllocator.

OutOfMemoryError = torch.OutOfMemoryError


def _index(device):
    return _get_device_index(device, optional=True)


def memory_stats_as_nested_dict(device=None):
    """The allocator statistics of ``device``, nested as torch.cuda's:
    ``{"allocated_bytes": {"all": {"current", "peak", "allocated",
    "freed"}}, ...}``."""
    return _C._device_memory_stats(_index(device))


def _flatten(prefix, value, out):
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else key, inner, out)
    else:
        out.append((prefix, value))


def memory_stats(device=None):
    """torch.cuda's allocator statistics (``"allocated_bytes.all.current"``,
    ``"reserved_bytes.all.peak"``, ``"allocation.all.allocated"``, ...),
    sorted, then the engine's own counters (``"bytes_in_use"``,
    ``"compiles"``, ...)."""
    flat = []
    _flatten("", memory_stats_as_nested_dict(device), flat)
    out = collections.OrderedDict(sorted(flat))
    out.update(_C._memory_stats(_index(device)))
    return out


def _stat(device, key):
    return memory_stats_as_nested_dict(device)[key]["all"]


def memory_allocated(device=None):
    """Bytes held by live tpu tensors' storages on ``device``."""
    return _stat(device, "allocated_bytes")["current"]


def max_memory_allocated(device=None):
    """The most bytes storages held on ``device`` since the start or the
    last reset_peak_memory_stats()."""
    return _stat(device, "allocated_bytes")["peak"]


def memory_reserved(device=None):
    """Bytes reserved on ``device``: nothing is cached, so what storages
    hold (memory_allocated)."""
    return _stat(device, "reserved_bytes")["current"]


def max_memory_reserved(device=None):
    """Peak of memory_reserved (max_memory_allocated: nothing is cached)."""
    return _stat(device, "reserved_bytes")["peak"]


def memory_cached(device=None):
    """Deprecated; see memory_reserved."""
    warnings.warn(
        "torch.tpu.memory_cached has been renamed to torch.tpu.memory_reserved",
        FutureWarning, stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device=None):
    """Deprecated; see max_memory_reserved."""
    warnings.warn(
        "torch.tpu.max_memory_cached has been renamed to "
        "torch.tpu.max_memory_reserved", FutureWarning, stacklevel=2)
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None):
    """Makes every peak statistic of ``device`` its current value."""
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None):
    """Zeroes the accumulated statistics of ``device`` (the "allocated" and
    "freed" totals, num_device_alloc/num_device_free)."""
    _C._reset_accumulated_memory_stats(_index(device))


def _deprecated_peak_reset(name, device):
    warnings.warn(
        f"torch.tpu.{name} now calls torch.tpu.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.", FutureWarning, stacklevel=3)
    return reset_peak_memory_stats(device)


def reset_max_memory_allocated(device=None):
    """Deprecated: resets every peak statistic (reset_peak_memory_stats)."""
    return _deprecated_peak_reset("reset_max_memory_allocated", device)


def reset_max_memory_cached(device=None):
    """Deprecated: resets every peak statistic (reset_peak_memory_stats)."""
    return _deprecated_peak_reset("reset_max_memory_cached", device)


def empty_cache():
    """Freed storages release their buffers at once. On the XLA CPU
    plugin, whose device memory is the process heap, the heap keeps freed
    memory for reuse (TORCHTPU_CPU_HEAP); this returns it to the system."""
    _C._release_host_heap()


def mem_get_info(device=None):
    """(free, total) bytes of ``device``: the plugin's figures where it
    reports them; on the CPU plugin, whose devices' memory is the host's,
    the host's available and total memory. NotImplementedError where the
    plugin says nothing."""
    return tuple(_C._mem_get_info(_index(device)))


# ------------------------------------------------------------------ streams

class _TorchTypeFactory(type):
    """Metaclass: the class builds plain torch.Stream/torch.Event objects
    (PyTorch's own methods check for those exact types) and isinstance()
    accepts them when they are on tpu."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._torch_type) and getattr(
            obj, "device", torch.device("cpu")).type == _BACKEND


class Stream(torch.Stream, metaclass=_TorchTypeFactory):
    """A tpu stream (a ``torch.Stream``): query, synchronize, wait_event,
    wait_stream, record_event. Streams of one device share its ordered
    work queue, so waits between them are already met and there is one
    priority level: ``priority`` is 0 whatever was asked for (as CUDA maps
    a priority outside its range to the nearest one)."""

    _torch_type = torch.Stream

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:
            return super().__new__(cls, **kwargs)
        index = _get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device(_BACKEND, index),
                               priority=priority)

    @property
    def priority(self):
        return 0

    @staticmethod
    def priority_range():
        """(least, greatest) priority: one level."""
        return (0, 0)


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
    elapsed_time. It completes when the work queued on its device before
    record() has finished; query() tells without waiting, and elapsed_time
    is the time between two completions on the device."""

    _torch_type = torch.Event

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(device=_BACKEND, enable_timing=enable_timing,
                           blocking=blocking, interprocess=interprocess)


# torch.tpu.amp, and what torch.autocast("tpu") asks of the device module.
from . import amp  # noqa: E402
from .amp import get_amp_supported_dtype  # noqa: E402,F401
