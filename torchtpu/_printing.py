"""Tensor printing for ``tpu`` tensors.

PyTorch formats a tensor by running data-dependent ops on it (masked_select,
...), whose output shapes XLA cannot compile. Like PyTorch does for
xla/lazy/ipu/mtia tensors, format a host copy of the values; the repr keeps
the real tensor's device, dtype and grad_fn.
"""
import torch
import torch._tensor_str as _tensor_str_module

_format_values = _tensor_str_module._tensor_str


def _tensor_str(self, indent):
    if self.device.type == "tpu":
        with torch.no_grad():
            self = self.to("cpu")
    return _format_values(self, indent)


def install():
    if _tensor_str_module._tensor_str is _format_values:
        _tensor_str_module._tensor_str = _tensor_str
