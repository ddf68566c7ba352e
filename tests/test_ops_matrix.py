"""trace and the 3-vector cross product on tpu against CPU."""
import pytest
import torch

from optest import DEV, check, rand

FLOATS = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_trace(dtype):
    fl = dtype.is_floating_point
    check(torch.trace, rand(4, 6, dtype=dtype, requires_grad=fl), grad=dtype == torch.float32)
    check(torch.trace, rand(5, 3, dtype=dtype))


def test_trace_rejects_non_matrix():
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            torch.trace(torch.ones(2, 3, 4, device=dev))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_cross(dtype):
    fl = dtype.is_floating_point
    a = rand(4, 3, dtype=dtype, requires_grad=fl)
    b = rand(4, 3, dtype=dtype, requires_grad=fl, seed=1)
    g = dtype == torch.float32
    check(torch.linalg.cross, a, b, grad=g)
    check(lambda x, y: torch.linalg.cross(x, y, dim=0), a.T.contiguous().detach(), b.T.contiguous().detach())
    check(lambda x, y: torch.linalg.cross(x, y[:1]), a, b, grad=g)  # broadcast
    check(lambda x, y: torch.cross(x, y, dim=1), a, b, grad=g)


def test_cross_rejects_wrong_size():
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            torch.linalg.cross(torch.ones(2, 4, device=dev), torch.ones(2, 4, device=dev))
