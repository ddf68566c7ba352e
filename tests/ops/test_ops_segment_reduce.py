"""segment_reduce (and _segment_reduce_backward) on tpu against the CPU."""
import pytest
import torch

from optest import DEV, assert_close, noncontiguous

REDUCTIONS = ["sum", "mean", "max", "min", "prod"]
LENGTHS = torch.tensor([[2, 0, 4], [1, 3, 2]])        # an empty segment
OFFSETS = torch.tensor([[0, 2, 2, 6], [0, 1, 4, 6]])


def _data(dtype=torch.float32):
    d = torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(0))
    d[0, 1, 0] = float("nan")    # NaN wins max/min
    d[1, 2, 1] = 0.0             # zeros for prod's backward
    d[1, 3, 1] = 0.0
    d[0, 4, 2] = 0.0
    d[1, 0, 2] = d[1, 1, 2]      # a tie in max/min
    return d.to(dtype)


def _to(kw, dev):
    return {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}


def _check(data, reduce, grad=True, **kw):
    x = data.clone().requires_grad_(grad)
    xt = data.to(DEV).requires_grad_(grad)
    if not data.is_contiguous():
        xt = noncontiguous(data).to(DEV).requires_grad_(grad)
    r = torch.segment_reduce(x, reduce, **kw)
    t = torch.segment_reduce(xt, reduce, **_to(kw, DEV))
    assert_close(t, r, msg="output")
    if grad:
        g = torch.randn(r.shape, generator=torch.Generator().manual_seed(1)).to(r.dtype)
        (gr,) = torch.autograd.grad(r, x, g)
        (gt,) = torch.autograd.grad(t, xt, g.to(DEV))
        assert_close(gt, gr, msg="grad", atol=1e-4 if data.dtype == torch.float32 else None)


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("by", ["lengths", "offsets"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_axis1_f32(reduce, by, initial):
    kw = {by: LENGTHS if by == "lengths" else OFFSETS}
    _check(_data(), reduce, axis=1, initial=initial, **kw)


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("unsafe", [False, True])
def test_axis0_bf16_int32_lengths(reduce, unsafe):
    x = torch.randn(7, 2, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    _check(x, reduce, grad=False, lengths=torch.tensor([3, 0, 4], dtype=torch.int32),
           unsafe=unsafe)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_1d_offsets_leading_empty(reduce):
    x = torch.randn(5, generator=torch.Generator().manual_seed(3))
    _check(x, reduce, offsets=torch.tensor([0, 0, 1, 3, 5]), unsafe=True, initial=1)


@pytest.mark.parametrize("reduce", ["sum", "max", "prod"])
def test_noncontiguous_data(reduce):
    x = noncontiguous(torch.randn(6, 4, generator=torch.Generator().manual_seed(4)))
    assert not x.is_contiguous()
    _check(x, reduce, lengths=torch.tensor([2, 1, 3]))


def test_negative_axis_and_inner_dims():
    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(5))
    _check(x, "mean", lengths=torch.tensor([[2, 3], [0, 5]]), axis=-1)


def test_unsafe_short_lengths():
    # unsafe lengths that do not cover the row: the tail is in no segment
    x = torch.randn(6, generator=torch.Generator().manual_seed(6))
    _check(x, "sum", lengths=torch.tensor([2, 3]), unsafe=True)


def _raises_like_cpu(fn):
    with pytest.raises(Exception) as ec:
        fn("cpu")
    with pytest.raises(Exception) as et:
        fn(DEV).cpu()
    assert type(et.value) is type(ec.value), (et.value, ec.value)


@pytest.mark.parametrize("kw", [
    dict(lengths=torch.tensor([[2, -1, 5], [1, 3, 2]])),             # negative length
    dict(lengths=torch.tensor([[2, 1, 5], [1, 3, 2]])),              # rows do not sum to 6
    dict(offsets=torch.tensor([[0, 3, 2, 6], [0, 1, 4, 6]])),        # decreasing offsets
    dict(lengths=torch.tensor([[2, -1, 5], [1, 3, 2]]), unsafe=True),
])
def test_bad_lengths_raise_like_cpu(kw):
    d = _data()
    _raises_like_cpu(lambda dev: torch.segment_reduce(d.to(dev), "sum", axis=1, **_to(kw, dev)))


def test_bad_arguments_raise_like_cpu():
    d = _data()
    _raises_like_cpu(lambda dev: torch.segment_reduce(d.to(dev), "foo", axis=1,
                                                      lengths=LENGTHS.to(dev)))
    _raises_like_cpu(lambda dev: torch.segment_reduce(d.long().to(dev), "sum", axis=1,
                                                      lengths=LENGTHS.to(dev)))
    _raises_like_cpu(lambda dev: torch.segment_reduce(d.to(dev), "sum", axis=1))
