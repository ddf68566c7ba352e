"""Shared helpers for op tests: run a function on CPU and on tpu, compare.

check(fn, *args) runs fn on the CPU arguments and on copies moved to tpu
(tensors anywhere inside args, lists and tuples included), compares every
output tensor, and, with grad=True, compares the gradients of every
floating-point input that requires grad. noncontig=True runs it once more with
each tensor input of rank >= 2 replaced by a transposed (non-contiguous) view
holding the same values.
"""
import zlib

import pytest
import torch

import torchtpu  # noqa: F401  (registers the device)

DEV = "tpu"

TOL = {
    torch.float32: dict(atol=1e-5, rtol=1.3e-5),
    torch.bfloat16: dict(atol=1e-2, rtol=1.6e-2),
    torch.float16: dict(atol=1e-3, rtol=1e-3),
    torch.float64: dict(atol=1e-7, rtol=1e-7),
    torch.complex64: dict(atol=1e-5, rtol=1.3e-5),
    torch.complex128: dict(atol=1e-7, rtol=1e-7),
}


def _map(x, f):
    if isinstance(x, torch.Tensor):
        return f(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map(v, f) for v in x)
    if isinstance(x, dict):
        return {k: _map(v, f) for k, v in x.items()}
    return x


def _flat(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flat(v, out)
    return out


def noncontiguous(t):
    """Same values, non-contiguous layout (rank >= 2: stored transposed)."""
    if t.dim() < 2:
        if t.dim() == 1 and t.numel() > 0:
            big = torch.empty(t.shape[0] * 2, dtype=t.dtype)
            big[::2] = t
            return big[::2].requires_grad_(t.requires_grad)
        return t
    u = t.detach().transpose(-1, -2).contiguous().transpose(-1, -2)
    return u.requires_grad_(t.requires_grad)


def to_tpu(x):
    def f(t):
        d = t.detach().to(DEV)
        if t.requires_grad:
            d.requires_grad_(True)
        return d

    return _map(x, f)


def assert_close(actual, expected, dtype=None, atol=None, rtol=None, msg=""):
    actual = actual.cpu() if isinstance(actual, torch.Tensor) else actual
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{msg}: expected a tensor"
        assert actual.dtype == expected.dtype, f"{msg}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{msg}: shape {actual.shape} != {expected.shape}"
        tol = TOL.get(dtype or expected.dtype, dict(atol=0, rtol=0))
        if atol is not None:
            tol = dict(atol=atol, rtol=rtol if rtol is not None else tol["rtol"])
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{msg}: {m}", **tol)
    else:
        assert actual == expected, f"{msg}: {actual} != {expected}"


def check(fn, *args, grad=False, noncontig=True, atol=None, rtol=None, dtype=None, **kwargs):
    variants = [args]
    if noncontig:
        variants.append(_map(args, noncontiguous))
    for variant in variants:
        cpu_args = _map(variant, lambda t: t.detach().clone().requires_grad_(t.requires_grad) if t.requires_grad else t)
        tpu_args = to_tpu(cpu_args)
        expected = fn(*cpu_args, **kwargs)
        actual = fn(*tpu_args, **kwargs)
        exp_flat, act_flat = _flat(expected, []), _flat(actual, [])
        assert len(exp_flat) == len(act_flat)
        for i, (a, e) in enumerate(zip(act_flat, exp_flat)):
            assert a.device.type == DEV, f"output {i} is on {a.device}"
            assert_close(a, e, dtype=dtype, atol=atol, rtol=rtol, msg=f"output {i}")
        if grad:
            outs = [(e, a) for e, a in zip(exp_flat, act_flat) if e.requires_grad]
            if not outs:
                continue
            gen = torch.Generator().manual_seed(0)
            loss_c, loss_t = 0, 0
            for e, a in outs:
                if e.is_complex():  # a real loss that sees both parts
                    w = torch.randn(e.shape, generator=gen, dtype=e.dtype)
                    loss_c = loss_c + (e * w).sum().real
                    loss_t = loss_t + (a * w.to(DEV)).sum().real
                    continue
                w = torch.randn(e.shape, generator=gen, dtype=torch.float32).to(e.dtype)
                loss_c = loss_c + (e * w).sum()
                loss_t = loss_t + (a * w.to(DEV)).sum()
            leaves_c = [t for t in _flat(cpu_args, []) if t.requires_grad]
            leaves_t = [t for t in _flat(tpu_args, []) if t.requires_grad]
            gc = torch.autograd.grad(loss_c, leaves_c, allow_unused=True)
            gt = torch.autograd.grad(loss_t, leaves_t, allow_unused=True)
            for i, (a, e) in enumerate(zip(gt, gc)):
                if e is None:
                    continue
                assert a is not None, f"grad {i} missing"
                assert_close(a, e, dtype=dtype, atol=atol, rtol=rtol, msg=f"grad {i}")
    return True


def check_fb(fn, *args, noncontig=False, atol=None, rtol=None, dtype=None):
    """Like check(..., grad=True), but the backward is seeded with
    random grad_outputs instead of a reduced loss: the same coverage with
    fewer programs to compile (which is what makes op tests slow)."""
    variants = [args]
    if noncontig:
        variants.append(tuple(noncontiguous(a) if isinstance(a, torch.Tensor) else a for a in args))
    for variant in variants:
        cpu = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
               for a in variant]
        dev = to_tpu(cpu)
        exp, act = fn(*cpu), fn(*dev)
        exp = list(exp) if isinstance(exp, (tuple, list)) else [exp]
        act = list(act) if isinstance(act, (tuple, list)) else [act]
        assert len(exp) == len(act)
        for i, (a, e) in enumerate(zip(act, exp)):
            assert a.device.type == DEV, f"output {i} is on {a.device}"
            assert_close(a, e, dtype=dtype, atol=atol, rtol=rtol, msg=f"output {i}")
        pairs = [(e, a) for e, a in zip(exp, act) if e.requires_grad]
        if not pairs:
            continue
        gen = torch.Generator().manual_seed(0)
        seeds = [torch.randn(e.shape, generator=gen).to(e.dtype) for e, _ in pairs]
        leaves_c = [t for t in cpu if isinstance(t, torch.Tensor) and t.requires_grad]
        leaves_t = [t for t in dev if isinstance(t, torch.Tensor) and t.requires_grad]
        gc = torch.autograd.grad([e for e, _ in pairs], leaves_c, seeds, allow_unused=True)
        gt = torch.autograd.grad([a for _, a in pairs], leaves_t, [s.to(DEV) for s in seeds], allow_unused=True)
        for i, (a, e) in enumerate(zip(gt, gc)):
            if e is None:
                continue
            assert a is not None, f"grad {i} missing"
            assert_close(a, e, dtype=dtype, atol=atol, rtol=rtol, msg=f"grad {i}")


def rand(*shape, dtype=torch.float32, requires_grad=False, low=-2.0, high=2.0, seed=None):
    # crc32, not hash(): Python salts str hashes per process, and inputs
    # must be the same on every run.
    g = torch.Generator().manual_seed(zlib.crc32(repr((shape, str(dtype), seed)).encode()))
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        re, im = (torch.rand((2,) + shape, generator=g, dtype=dtype.to_real()) * (high - low) + low).unbind(0)
        return torch.complex(re, im).requires_grad_(requires_grad)
    if not dtype.is_floating_point:
        return torch.randint(int(low) - 3, int(high) + 4, shape, generator=g, dtype=dtype)
    t = (torch.rand(shape, generator=g) * (high - low) + low).to(dtype)
    return t.requires_grad_(requires_grad)


def _outcome(fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return type(e)
    return r.cpu() if isinstance(r, torch.Tensor) else r


def same_outcome(fn):
    """fn(device) on the CPU and on tpu: the same exception type (a
    subclass of the CPU's), or the same values (NaN where NaN)."""
    cpu, dev = _outcome(lambda: fn("cpu")), _outcome(lambda: fn(DEV))
    if isinstance(cpu, type):
        assert isinstance(dev, type) and issubclass(dev, cpu), (cpu, dev)
    else:
        assert not isinstance(dev, type), dev
        torch.testing.assert_close(dev, cpu, equal_nan=True)


def same_error(fn):
    """The CPU's exception, type and message, for a call the CPU refuses."""
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value)) as dev:
        fn(DEV)
    assert str(cpu.value).split("\n")[0] in str(dev.value), (str(cpu.value), str(dev.value))
