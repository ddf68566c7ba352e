"""Rearranging ops on tpu against CPU: channel shuffle, unfold/fold (im2col,
col2im); and torch.equal."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, check, rand

FLOATS = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_channel_shuffle(dtype):
    x = rand(2, 6, 3, 4, dtype=dtype)
    check(lambda t: F.channel_shuffle(t, 3), x)
    check(lambda t: F.channel_shuffle(t, 3), x[0].transpose(0, 1))
    if dtype == torch.float32:
        check(lambda t: torch.nn.ChannelShuffle(2)(t), rand(2, 4, 5, requires_grad=True), grad=True)


@pytest.mark.parametrize("dtype", FLOATS + [torch.bool])
@pytest.mark.parametrize("geom", [dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2))])
def test_unfold_fold(dtype, geom):
    g = dtype == torch.float32
    x = rand(2, 3, 6, 7, dtype=dtype, requires_grad=dtype.is_floating_point)
    check(lambda t: F.unfold(t, **geom), x, grad=g)
    check(lambda t: F.unfold(t, **geom), x[0].detach())
    cols = F.unfold(x.detach(), **geom).requires_grad_(dtype.is_floating_point)
    check(lambda t: F.fold(t, (6, 7), **geom), cols, grad=g)


def test_unfold_fold_integers_not_implemented():
    for dev in ("cpu", DEV):
        with pytest.raises(NotImplementedError):
            F.unfold(torch.ones(1, 1, 3, 3, dtype=torch.int64, device=dev), 2)
        with pytest.raises(NotImplementedError):
            F.fold(torch.ones(1, 4, 4, dtype=torch.int64, device=dev), (3, 3), 2)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8])
def test_unfold_fold_refusal_message(dtype):
    """The refusal names CPU's kernel and dtype as CPU does."""
    for fn, shape in ((lambda t: F.unfold(t, 2), (1, 1, 3, 3)),
                      (lambda t: F.fold(t, (3, 3), 2), (1, 4, 4))):
        x = torch.ones(shape, dtype=dtype)
        with pytest.raises(NotImplementedError) as cpu:
            fn(x)
        with pytest.raises(NotImplementedError) as tpu:
            fn(x.to(DEV)).cpu()
        assert str(cpu.value) in str(tpu.value)


def test_unfold_bad_geometry_raises():
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            F.unfold(torch.ones(1, 1, 2, 2, device=dev), kernel_size=3)


def test_equal():
    a = rand(3, 4)
    for dev in ("cpu", DEV):
        x = a.to(dev)
        assert torch.equal(x, x.clone())
        assert not torch.equal(x, x + 1)
        assert not torch.equal(x, x[:2])
        assert torch.equal(x.T, a.T.contiguous().to(dev))
        assert torch.equal(x.round().long(), x.round())
        assert not torch.equal(torch.tensor([float("nan")], device=dev), torch.tensor([float("nan")], device=dev))
        assert torch.equal(torch.ones(0, device=dev), torch.ones(0, device=dev))
    with pytest.raises(RuntimeError):
        torch.equal(a, a.to(DEV))


@pytest.mark.parametrize("row,col,offset", [(3, 4, 0), (4, 3, 1), (5, 5, -2), (3, 3, 5), (0, 3, 0)])
@pytest.mark.parametrize("fn", [torch.triu_indices, torch.tril_indices], ids=["triu", "tril"])
def test_tri_indices(fn, row, col, offset):
    expected = fn(row, col, offset)
    actual = fn(row, col, offset, device=DEV)
    assert actual.device.type == DEV
    assert torch.equal(actual.cpu(), expected)
    assert torch.equal(fn(row, col, offset, dtype=torch.int32, device=DEV).cpu(),
                       fn(row, col, offset, dtype=torch.int32))
