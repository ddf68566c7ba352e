"""isclose (and allclose, assert_close through it) on tpu against the CPU.

Floating and complex operands of one dtype run one engine program; the
composite form PyTorch defines runs a dozen ops, each a program per shape.
Results must be the CPU's bit for bit, NaN, infinities, signed zeros and
the tolerance edges included; other dtypes and bad arguments go through
the composite form, errors as the CPU raises them."""
import itertools

import pytest
import torch

import torchtpu.debug as debug
from optest import DEV

NAN, INF = float("nan"), float("inf")
# no subnormals: XLA flushes them to zero in every op, on the CPU plugin as on TPUs
SPECIALS = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e-8, 1.00001, 0.99999, 1e30, 3e38, 2.5, -7.0]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
COMPLEX = [torch.complex64, torch.complex128]
TOLERANCES = list(itertools.product((0.0, 1e-5, 1e-2, 0.1), (0.0, 1e-8, 1e-3, 0.5)))


def pairs(dtype, gen):
    """Operands that meet every branch: special values against special
    values, against themselves and slightly off, and random near pairs."""
    vals = torch.tensor(SPECIALS, dtype=torch.float64)

    def pick(n):
        return vals[torch.randint(len(SPECIALS), (n,), generator=gen)]

    if dtype.is_complex:
        a = torch.complex(pick(60), pick(60))
        b = a.clone()
        b[::3] = a[::3] * (1 + 1e-5)
        b[1::3] = torch.complex(pick(20), pick(20))
    else:
        a = pick(60)
        b = a.clone()
        b[::3] = a[::3] * (1 + torch.randn(20, dtype=torch.float64, generator=gen) * 1e-3)
        b[1::3] = pick(20)
    near = torch.randn(40, dtype=a.dtype, generator=gen)
    a = torch.cat([a, near])
    b = torch.cat([b, near + torch.randn(40, dtype=a.dtype, generator=gen) * 0.01])
    return a.to(dtype), b.to(dtype)


@pytest.mark.parametrize("dtype", FLOATS + COMPLEX)
def test_values_like_cpu(dtype):
    gen = torch.Generator().manual_seed(0)
    a, b = pairs(dtype, gen)
    ta, tb = a.to(DEV), b.to(DEV)
    for (rtol, atol), equal_nan in itertools.product(TOLERANCES, (False, True)):
        want = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
        got = torch.isclose(ta, tb, rtol=rtol, atol=atol, equal_nan=equal_nan)
        assert got.device.type == DEV and got.dtype == torch.bool
        assert torch.equal(got.cpu(), want), (rtol, atol, equal_nan, (got.cpu() != want).nonzero())


def test_broadcasting_views_and_scalars():
    x = torch.randn(4, 5, dtype=torch.float64)
    y = x[1] + 1e-9
    tx = x.to(DEV)
    assert torch.equal(torch.isclose(tx, y.to(DEV)).cpu(), torch.isclose(x, y))
    assert torch.equal(torch.isclose(tx.t(), tx.t()[:, :1].expand(5, 4)).cpu(),
                       torch.isclose(x.t(), x.t()[:, :1].expand(5, 4)))
    assert torch.equal(torch.isclose(tx[::2], tx[1::2]).cpu(), torch.isclose(x[::2], x[1::2]))
    s = torch.tensor(0.5, dtype=torch.float64)
    assert torch.equal(torch.isclose(tx, s).cpu(), torch.isclose(x, s))
    empty = torch.empty(0, 3)
    assert torch.isclose(empty.to(DEV), empty.to(DEV)).shape == (0, 3)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_other_dtypes_by_composite(dtype):
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(0, 255, (30,), generator=gen).to(dtype)
    b = torch.randint(0, 255, (30,), generator=gen).to(dtype)
    for rtol, atol in TOLERANCES + [(0.0, 300.0)]:
        want = torch.isclose(a, b, rtol=rtol, atol=atol)
        assert torch.equal(torch.isclose(a.to(DEV), b.to(DEV), rtol=rtol, atol=atol).cpu(), want)


@pytest.mark.parametrize("args,kwargs", [
    ((torch.ones(3), torch.ones(3, dtype=torch.float64)), {}),
    ((torch.ones(3), torch.ones(3)), {"rtol": -1.0}),
    ((torch.ones(3), torch.ones(3)), {"atol": -1.0}),
    ((torch.ones(3), torch.ones(4)), {}),
])
def test_errors_like_cpu(args, kwargs):
    with pytest.raises(RuntimeError) as cpu:
        torch.isclose(*args, **kwargs)
    with pytest.raises(RuntimeError) as tpu:
        torch.isclose(*[t.to(DEV) for t in args], **kwargs)
    assert str(tpu.value) == str(cpu.value)


def test_allclose_and_assert_close_one_program():
    x = torch.randn(7, 3, dtype=torch.float64)
    tx = x.to(DEV)
    assert torch.allclose(tx, tx + 1e-12) and not torch.allclose(tx, tx + 1)
    debug.compiles(clear=True)
    torch.testing.assert_close(tx, tx * 1)
    # the product and isclose (its `all` ran in allclose above): not eq,
    # abs, sub, mul, add, isnan, ne, le, and, or one by one
    assert sorted(c["what"] for c in debug.compiles(clear=True)) == ["isclose", "mul.Tensor"]
    with pytest.raises(AssertionError, match="not close"):
        torch.testing.assert_close(tx, tx + 1)


def test_requires_grad_inputs():
    x = torch.randn(5, requires_grad=True)
    got = torch.isclose(x.to(DEV), x.detach().to(DEV))
    assert not got.requires_grad
    assert got.cpu().all()

