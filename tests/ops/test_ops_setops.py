"""isin and mode on tpu against CPU."""
import pytest
import torch

from optest import DEV, check, rand

FLOATS = [torch.float32, torch.bfloat16]


def test_isin_bool_rejected():
    for dev in ("cpu", DEV):
        x = torch.ones(3, dtype=torch.bool, device=dev)
        with pytest.raises(RuntimeError):
            torch.isin(x, x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
@pytest.mark.parametrize("invert", [False, True])
def test_isin(dtype, invert):
    x = rand(4, 5, dtype=dtype, low=-3, high=3)
    t = rand(7, dtype=dtype, low=-3, high=3, seed=1)
    if dtype.is_floating_point:
        x, t = x.round(), t.round()
    check(lambda a, b: torch.isin(a, b, invert=invert), x, t)
    check(lambda a: torch.isin(a, 1, invert=invert), x)
    check(lambda b: torch.isin(1, b, invert=invert), t)
    check(lambda a, b: torch.isin(a, b[:0], invert=invert), x, t)


def test_isin_promotes_and_nan():
    check(torch.isin, torch.tensor([1.0, 2.5, float("nan")]), torch.tensor([1, 2]))
    check(torch.isin, torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan")]))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
@pytest.mark.parametrize("dim,keepdim", [(-1, False), (0, True)])
def test_mode(dtype, dim, keepdim):
    x = rand(5, 8, dtype=dtype, low=-2, high=2)
    if dtype.is_floating_point:
        x = x.round()
    check(lambda t: torch.mode(t, dim, keepdim), x)
    check(lambda t: torch.mode(t), torch.tensor(3).to(dtype))


def test_mode_ties_pick_smallest_value_last_index():
    x = torch.tensor([[1.0, 2.0, 2.0, 1.0, 3.0], [5.0, 5.0, 4.0, 4.0, 0.0]])
    check(lambda t: torch.mode(t, 1), x)


def test_mode_grad():
    x = rand(4, 6, low=-2, high=2).round().requires_grad_(True)
    check(lambda t: torch.mode(t, 1)[0], x, grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_histc(dtype):
    x = rand(6, 7, dtype=dtype, low=-3, high=3)
    check(lambda t: torch.histc(t, bins=9, min=-2, max=2), x)
    check(lambda t: torch.histc(t, bins=5), x)  # the data's own range
    check(lambda t: torch.histc(t, bins=4), torch.tensor([2.0, 2.0]).to(dtype))  # empty range widened
    check(lambda t: torch.histc(t, bins=4, min=0, max=4), torch.tensor([0.0, 1.0, 4.0, 5.0, -1.0]).to(dtype))


def test_histc_counts_integers_as_cuda_and_refuses_bool():
    # The CPU refuses integer inputs; tpu counts them as CUDA does
    # (tests/ops/test_ops_out_forms.py checks the bins), which MoE routing needs.
    with pytest.raises(NotImplementedError):
        torch.histc(torch.ones(3, dtype=torch.int64))
    got = torch.histc(torch.ones(3, dtype=torch.int64, device=DEV), bins=2).cpu()
    assert got.dtype == torch.int64 and got.tolist() == [0, 3]
    for dev in ("cpu", DEV):
        with pytest.raises((NotImplementedError, RuntimeError)):
            torch.histc(torch.ones(3, dtype=torch.bool, device=dev))
