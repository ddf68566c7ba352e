"""``torch.tpu.amp``: mixed precision on tpu, named after ``torch.cuda.amp``.

``torch.autocast("tpu")`` (bfloat16 by default) and
``torch.amp.GradScaler("tpu")`` are the general spellings; these are the
device-specific ones. The cast policy lives in csrc/torch/runtime/autocast.cpp.
"""
import torch

__all__ = ["autocast", "GradScaler", "get_amp_supported_dtype"]


def get_amp_supported_dtype():
    """Dtypes ``torch.autocast("tpu", dtype=...)`` accepts."""
    return [torch.bfloat16, torch.float16]


class autocast(torch.amp.autocast):
    """``torch.autocast("tpu", ...)``; bfloat16 unless dtype says otherwise."""

    def __init__(self, enabled=True, dtype=torch.bfloat16, cache_enabled=True):
        super().__init__("tpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("tpu", ...)``. With bfloat16 autocast no scaling
    is needed (its exponent range is float32's); it matters for float16."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
