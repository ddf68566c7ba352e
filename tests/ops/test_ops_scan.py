"""Running extremes with indices (cummax/cummin) and logcumsumexp on tpu
against CPU."""
import pytest
import torch

from optest import check, rand

FLOATS = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
def test_cum_extreme(fn, dtype):
    x = rand(4, 7, dtype=dtype, requires_grad=dtype.is_floating_point)
    g = dtype == torch.float32
    check(lambda t: fn(t, 1), x, grad=g)
    check(lambda t: fn(t, 0), x, grad=g)
    check(lambda t: fn(t, -1), x[0].detach())


def test_cum_extreme_ties_nan_and_0d():
    x = torch.tensor([[1.0, 3.0, 3.0, float("nan"), 5.0, float("nan"), 2.0],
                      [2.0, 2.0, 1.0, 1.0, -1.0, 4.0, 4.0]])
    check(lambda t: torch.cummax(t, 1), x)
    check(lambda t: torch.cummin(t, 1), x)
    check(lambda t: torch.cummax(t, 0), torch.tensor(2.5))


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp(dtype):
    x = rand(3, 9, dtype=dtype, requires_grad=True)
    check(lambda t: torch.logcumsumexp(t, 1), x, grad=dtype == torch.float32, atol=1e-4 if dtype == torch.float32 else None)
    check(lambda t: torch.logcumsumexp(t, 0), x, grad=dtype == torch.float32, atol=1e-4 if dtype == torch.float32 else None)


def test_logcumsumexp_wide_range_and_infinities():
    # a global-max shift would underflow the first elements to -inf
    x = torch.tensor([[-1000.0, 0.0, -500.0, 1000.0],
                      [float("-inf"), float("-inf"), 1.0, float("inf")]])
    check(lambda t: torch.logcumsumexp(t, 1), x)
    check(lambda t: torch.logcumsumexp(t, 0), torch.tensor(3.0))
