"""Every op the engine's table claims is an operator PyTorch knows: an ATen
overload (or torchvision's, when it is installed), looked up in PyTorch's
own registry, so a misspelt or renamed overload fails here instead of being
silently left unregistered."""
import importlib.util

import pytest
import torch

import torchtpu


def overload_of(name):
    ns, _, op = name.rpartition("::")
    base, _, overload = op.partition(".")
    packet = getattr(getattr(torch.ops, ns or "aten"), base, None)
    if packet is None:
        return None
    return getattr(packet, overload or "default", None)


def test_every_table_op_is_a_pytorch_operator():
    if importlib.util.find_spec("torchvision"):
        import torchvision  # noqa: F401  (registers torchvision::)
    import torchtpu.kernels  # noqa: F401  (registers torchtpu::)
    names = torchtpu._C._engine_ops()
    assert len(names) == len(set(names)) > 1000
    unknown = []
    for name in names:
        if name.startswith("torchvision::") and not importlib.util.find_spec("torchvision"):
            continue
        if name.startswith("torchtpu::"):  # the engine's own, called directly (engine_call.h)
            continue
        if overload_of(name) is None:
            unknown.append(name)
    assert not unknown, f"not operators PyTorch knows: {unknown}"


def test_table_ops_are_registered_or_say_why():
    registered, skipped = set(torchtpu.registered_ops), torchtpu.skipped_ops
    names = set(torchtpu._C._engine_ops())
    missing = sorted(n for n in names if n not in registered and n not in skipped)
    assert not missing, f"neither registered nor skipped with a reason: {missing}"
    for name, why in skipped.items():
        assert why, name
    # the overwhelming part of the table runs through the engine kernel
    assert len(names & registered) > 0.95 * len(names)
