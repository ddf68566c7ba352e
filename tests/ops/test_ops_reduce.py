"""Reductions on tpu against CPU: sum/mean/prod, max/min and arg forms,
var/std, any/all, logsumexp, cumulative ops, norms."""
import math

import pytest
import torch

from optest import DEV, assert_close, check, rand

FLOATS = [torch.float32, torch.bfloat16]
SHAPE = (3, 4, 5)


def special():
    """Values with ties, NaN and infinities in known places."""
    x = torch.tensor([[1.0, 3.0, 3.0, -1.0],
                      [float("nan"), 2.0, float("nan"), 0.0],
                      [-float("inf"), -float("inf"), 5.0, 5.0]])
    return x


# ------------------------------------------------------------------ sum/mean


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, -1), True), ([], False)])
def test_sum(dtype, dim, keepdim):
    x = rand(*SHAPE, dtype=dtype, requires_grad=dtype.is_floating_point)
    if dim is None:
        check(lambda t: t.sum(), x, grad=dtype.is_floating_point)
    else:
        check(lambda t: t.sum(dim, keepdim=keepdim), x, grad=dtype.is_floating_point)


def test_sum_dtype_arg():
    x = rand(*SHAPE)
    check(lambda t: t.sum(1, dtype=torch.float64), x)
    check(lambda t: t.sum(dtype=torch.bfloat16), x, dtype=torch.bfloat16)
    check(lambda t: t.sum(0, dtype=torch.int32), rand(*SHAPE, dtype=torch.int64))
    check(lambda t: t.sum(1), rand(*SHAPE, dtype=torch.int32))
    check(lambda t: torch.sum(t, dtype=torch.float32), rand(4, 5, dtype=torch.bool))
    # dtype= casts first: negative floats into uint8 wrap (-1.3 -> 255), so
    # the uint8 sum of these is 248 as on the CPU (XLA's saturating cast
    # gave 5)
    check(lambda t: torch.sum(t, dtype=torch.uint8), rand(3, 2, low=-30, high=30, seed=3))
    check(lambda t: torch.sum(t, 0, dtype=torch.int8), rand(3, 2, low=-300, high=300, seed=4))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, True), ((0, -1), False)])
def test_mean(dtype, dim, keepdim):
    x = rand(*SHAPE, dtype=dtype, requires_grad=True)
    if dim is None:
        check(lambda t: t.mean(), x, grad=True)
    else:
        check(lambda t: t.mean(dim, keepdim=keepdim), x, grad=True)


def test_mean_int_errors_like_cpu():
    x = rand(3, 4, dtype=torch.int64)
    with pytest.raises(RuntimeError):
        x.mean()
    with pytest.raises(RuntimeError):
        x.to(DEV).mean()
    check(lambda t: t.mean(1, dtype=torch.float32), x)


def test_bf16_accumulates_in_f32():
    # 4096 ones in bf16 would stop at 256 with bf16 accumulation.
    x = torch.ones(4096, dtype=torch.bfloat16)
    check(lambda t: t.sum(), x, noncontig=False)
    check(lambda t: t.mean(), x, noncontig=False)


def test_empty_and_scalar():
    e = torch.zeros(0, 3)
    check(lambda t: t.sum(0), e, noncontig=False)
    check(lambda t: t.mean(0), e, noncontig=False)
    check(lambda t: t.prod(0), e, noncontig=False)
    s = torch.tensor(2.5)
    check(lambda t: (t.sum(), t.sum(0), t.mean(-1), t.amax(0), t.max(0), t.argmax(0),
                     t.var(0, correction=0), t.cumsum(0), t.logsumexp(0)), s)


def test_nansum():
    x = special()
    check(lambda t: torch.nansum(t), x)
    check(lambda t: torch.nansum(t, 1, keepdim=True), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_prod(dtype):
    # (prod's backward needs aten::nonzero, another family's op)
    x = rand(3, 4, dtype=dtype, low=-1.5, high=1.5)
    check(lambda t: t.prod(), x)
    check(lambda t: t.prod(1, keepdim=True), x)
    check(lambda t: t.prod(0, dtype=torch.float64), x)


# ------------------------------------------------------------------ max/min


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_amax_amin_max_min(dtype):
    x = rand(*SHAPE, dtype=dtype, requires_grad=dtype.is_floating_point)
    g = dtype.is_floating_point
    check(lambda t: t.amax(), x, grad=g)
    check(lambda t: t.amin((0, 2), keepdim=True), x, grad=g)
    check(lambda t: t.max(), x, grad=g)
    check(lambda t: t.min(), x, grad=g)
    check(lambda t: t.max(1), x, grad=g)
    check(lambda t: t.min(-1, keepdim=True), x, grad=g)
    check(lambda t: torch.aminmax(t), x)
    check(lambda t: torch.aminmax(t, dim=1, keepdim=True), x)


def test_max_min_ties_and_nan():
    x = special()
    check(lambda t: (t.max(1), t.min(1), t.amax(1), t.amin(0), t.max(), t.min()), x)
    check(lambda t: (t.argmax(1), t.argmin(1), t.argmax(0), t.argmin()), x)
    y = torch.tensor([[2.0, 7.0, 7.0], [1.0, 1.0, 0.0]])
    check(lambda t: (t.max(1), t.min(0), t.argmax(), t.argmax(1, keepdim=True)), y)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.uint8])
def test_argmax_argmin(dtype):
    x = rand(*SHAPE, dtype=dtype, low=3.0)
    check(lambda t: (t.argmax(), t.argmin(), t.argmax(1), t.argmin(-1, keepdim=True),
                     t.argmax(keepdim=True)), x)


def test_max_errors_like_cpu():
    x = rand(3, 4)
    for dev in ("cpu", DEV):
        with pytest.raises(IndexError):
            x.to(dev).max(2)
        with pytest.raises(IndexError):
            x.to(dev).sum(-3)
        # CPU raises IndexError; the meta kernel the device's shape
        # inference runs raises RuntimeError (a PyTorch inconsistency)
        with pytest.raises((IndexError, RuntimeError)):
            torch.zeros(0, 3, device=dev).amax(0)
        with pytest.raises(RuntimeError):
            torch.ones(3, dtype=torch.bool, device=dev).argmax()
        with pytest.raises(RuntimeError):
            x.to(dev).sum((0, 0))
        # max()/min() of no elements have nothing to return
        for shape in ((0,), (0, 3, 4, 2), (2, 0)):
            for fn in (torch.max, torch.min, torch.Tensor.max):
                with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
                    fn(torch.zeros(shape, dtype=torch.float64, device=dev).t() if len(shape) == 2
                       else torch.zeros(shape, device=dev)).cpu()
    check(lambda t: (t.max(), t.min()), torch.tensor([float("nan"), 1.0]), noncontig=False)
    check(lambda t: (t.max(), t.min()), torch.tensor(2.5), noncontig=False)


# ------------------------------------------------------------------ var/std


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim,correction", [(None, None), (1, 0), ((0, 2), 2), ([], 1.5)])
def test_var_std(dtype, dim, correction):
    x = rand(*SHAPE, dtype=dtype, requires_grad=True)
    kw = {} if correction is None else {"correction": correction}
    check(lambda t: t.var(dim, **kw), x, grad=True)
    check(lambda t: t.std(dim, keepdim=True, **kw), x, grad=True)
    check(lambda t: torch.var_mean(t, dim, **kw), x, grad=True)
    check(lambda t: torch.std_mean(t, dim, keepdim=True, **kw), x, grad=True)


def test_var_small_n():
    x = rand(1, 4)
    check(lambda t: (t.var(0), t.std(0), t.var(1, correction=0.5)), x)


# ------------------------------------------------------------------ any/all


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.uint8, torch.int64])
def test_any_all(dtype):
    x = rand(*SHAPE, dtype=dtype, low=3.0)
    if dtype != torch.bool:
        x = x * (rand(*SHAPE, dtype=torch.bool, seed=1)).to(dtype)
    check(lambda t: (t.any(), t.all(), t.any(1), t.all(-1, keepdim=True),
                     t.any((0, 2)), t.all((0, 1), keepdim=True), torch.any(t, dim=())), x)


def test_any_all_nan_counts():
    x = torch.tensor([[0.0, float("nan")], [0.0, 0.0]])
    check(lambda t: (t.any(1), t.all(0), torch.count_nonzero(t),
                     torch.count_nonzero(t, 1), torch.count_nonzero(t, (0, 1))), x)


# ------------------------------------------------------------------ logsumexp


@pytest.mark.parametrize("dtype", FLOATS)
def test_logsumexp(dtype):
    x = rand(*SHAPE, dtype=dtype, requires_grad=True)
    check(lambda t: t.logsumexp(1), x, grad=True)
    check(lambda t: t.logsumexp((0, 2), keepdim=True), x, grad=True)


def test_logsumexp_inf_and_int():
    x = special()
    check(lambda t: t.logsumexp(1), x)
    check(lambda t: t.logsumexp(0), torch.full((3, 2), -float("inf")))
    check(lambda t: t.logsumexp(1), rand(3, 4, dtype=torch.int64))


# ------------------------------------------------------------------ cumulative


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_cumsum_cumprod(dtype):
    x = rand(*SHAPE, dtype=dtype, low=-1.5, high=1.5, requires_grad=dtype.is_floating_point)
    g = dtype.is_floating_point
    check(lambda t: t.cumsum(1), x, grad=g)
    check(lambda t: t.cumsum(-1, dtype=torch.float64), x)
    check(lambda t: t.cumprod(2), x, grad=g)


def test_cumsum_inplace_through_view():
    base = rand(4, 6)
    x = base.clone()
    y = base.clone().to(DEV)
    x[:, 1:5].cumsum_(1)
    y[:, 1:5].cumsum_(1)
    assert_close(y, x)
    x[1].cumprod_(0)
    y[1].cumprod_(0)
    assert_close(y, x)


# ------------------------------------------------------------------ norms


@pytest.mark.parametrize("ord,dtype", [
    (2, torch.float32), (2, torch.bfloat16), (1, torch.float32), (math.inf, torch.float32),
    (math.inf, torch.bfloat16), (-math.inf, torch.float32), (0, torch.float32),
    (3, torch.float32), (0.5, torch.bfloat16)])
def test_vector_norm(ord, dtype):
    x = rand(*SHAPE, dtype=dtype, requires_grad=True)
    grad = ord not in (0,)
    check(lambda t: torch.linalg.vector_norm(t, ord), x, grad=grad)
    check(lambda t: torch.linalg.vector_norm(t, ord, dim=(0, 2), keepdim=True), x, grad=grad)


def test_norm_variants():
    x = rand(3, 4, requires_grad=True)
    check(lambda t: t.norm(), x, grad=True)
    check(lambda t: torch.norm(t, p=1, dim=1), x, grad=True)
    check(lambda t: torch.ops.aten.norm.Scalar(t, 3), x)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, None, [1], True), x)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dtype(t, 2, dtype=torch.float64), x)
    check(lambda t: torch.linalg.vector_norm(t, dtype=torch.float64), x)
    check(lambda t: torch.linalg.vector_norm(t, 2, dim=1), torch.zeros(2, 3))


def test_amax_amin_out():
    x = rand(*SHAPE)
    check(lambda t: torch.amax(t, 1, out=torch.empty(3, 5, device=t.device)), x)
    check(lambda t: torch.amin(t, (0, 2), keepdim=True, out=torch.empty(1, 4, 1, device=t.device)), x)


@pytest.mark.parametrize("warn_only", [False, True])
def test_median_and_mode_raise_no_cuda_determinism_alert(warn_only):
    # PyTorch's meta kernels alert for CUDA only; the CPU and tpu do not
    x = rand(10, seed=3)
    was, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    try:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for fn in (lambda t: torch.median(t, 0), lambda t: torch.nanmedian(t, 0), lambda t: torch.mode(t, 0),
                       lambda t: torch.histc(t, bins=4)):
                check(fn, x, noncontig=False)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled() == warn_only
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn)


def test_put_without_accumulate_raises_the_cpus_determinism_alert():
    was, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for device in ("cpu", DEV):
            a = torch.zeros(4, device=device)
            idx = torch.tensor([0, 0], device=device)
            src = torch.tensor([1.0, 2.0], device=device)
            for fn in (lambda: a.put_(idx, src), lambda: torch.put(a, idx, src)):
                with pytest.raises(RuntimeError, match="put_ does not have a deterministic implementation"):
                    fn()
            a.put_(idx, src, accumulate=True)  # deterministic: no alert
            assert a.cpu().tolist() == [3.0, 0.0, 0.0, 0.0]
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn)
