"""Eager execution modes.

    torchtpu.set_eager_mode("fused")          # from here on
    with torchtpu.set_eager_mode("debug"):    # for a block, then back
        ...
    torchtpu.get_eager_mode()                 # "debug" | "strict" | "fused"

debug: every op runs synchronously; an error is raised by the op that
caused it, naming the op and its input shapes.
strict (the default): every op is enqueued as its own program; Python waits
only when it reads data (.item(), .cpu(), .tolist(), .numpy(), printing),
on torch.tpu.synchronize(), and on stream/event waits.
fused: ops are recorded and run as one program per window. A window ends at
a host read, torch.tpu.synchronize(), an op on another device, its op limit
(TORCHTPU_FUSED_MAX_OPS, default 1000), or when the op sequence that began
the window's step starts again (so a training loop runs the same programs
every step). Temporaries that die inside a window never reach memory.

The environment variable TORCHTPU_EAGER_MODE sets the mode at start-up.
"""
from . import _C

_MODES = ("debug", "strict", "fused")


class _ModeScope:
    """The previous mode, restored when used as a context manager."""

    def __init__(self, previous):
        self.previous = previous

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_eager_mode(self.previous)
        return False

    def __repr__(self):
        return f"<eager mode {get_eager_mode()!r} (was {self.previous!r})>"


def set_eager_mode(mode):
    """Switches the eager mode; usable as a context manager."""
    if mode not in _MODES:
        raise ValueError(f"eager mode must be one of {_MODES}, not {mode!r}")
    previous = _C._eager_mode()
    _C._set_eager_mode(mode)
    return _ModeScope(previous)


def get_eager_mode():
    return _C._eager_mode()


def flush():
    """Runs the ops recorded in fused mode now (without waiting for them)."""
    _C._flush()


__all__ = ["set_eager_mode", "get_eager_mode", "flush"]
