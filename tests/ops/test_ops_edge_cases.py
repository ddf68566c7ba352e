"""Edge cases of op results on tpu, each against the CPU: indexing with
empty and 0-d boolean indices, linspace and logspace (views as out=, large
integer ranges), the result type of an out= of a wider dtype, NaN through
logcumsumexp, xlogy and xlog1py, complex exp's special values and complex
pow of large values, a 0-d loss, deterministic fills of new memory, empty
dims (nonzero_static, a convolution with no input channels), an unbatched
channels_last_3d max_pool3d's layout, and a cat of many tensors."""
import contextlib
import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu  # noqa: F401

from optest import same_outcome

T = "tpu"


def same(fn, *, exact=True):
    """fn(device) on cpu and tpu: equal values (NaN where NaN), dtypes,
    shapes."""
    c = fn("cpu")
    t = fn("tpu")
    if isinstance(t, torch.Tensor):
        t = t.cpu()
        assert t.shape == c.shape and t.dtype == c.dtype, (t, c)
        if exact:
            torch.testing.assert_close(t, c, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(t, c, equal_nan=True)
    else:
        assert t == c


def test_empty_and_0d_bool_indices_write_nothing_or_all():
    def empty_long(d):
        x = torch.arange(6.0, device=d)
        x[torch.empty(0, dtype=torch.long, device=d)] = -1
        return x

    def false_0d(d):
        a = torch.arange(3.0, device=d)
        a[torch.tensor(False, device=d)] = 5
        return a

    def true_0d(d):
        a = torch.arange(3.0, device=d)
        a[torch.tensor(True, device=d)] = 5
        return a

    def empty_rows(d):
        r = torch.ones(3, 4, device=d)
        r[torch.empty(0, dtype=torch.long, device=d)] = torch.zeros(0, 4, device=d)
        return r

    for fn in (empty_long, false_0d, true_0d, empty_rows):
        same(fn)


@pytest.mark.parametrize("op", ["linspace", "logspace"])
def test_space_into_a_strided_out(op):
    def fill(d):
        base = torch.zeros(10, device=d)
        getattr(torch, op)(0, 1, 5, out=base[::2])
        return base

    same(fill, exact=False)


@pytest.mark.parametrize("dtype,start,end,steps", [
    (torch.int64, 0, 999999, 10**6),
    (torch.int64, -7, 10**9, 1000003),
    (torch.int32, 5, 70001, 70001),
    (torch.int8, -10, 10, 7),
    (torch.int16, -100, 37, 13),
    (torch.uint8, 3, 250, 9),
    (torch.float64, 0, 999999, 10**6),
])
def test_linspace_integers_and_large_ranges(dtype, start, end, steps):
    same(lambda d: torch.linspace(start, end, steps, dtype=dtype, device=d))


def test_out_of_a_wider_dtype_gets_the_rounded_result():
    def add(d):
        a = torch.tensor([60000.0, 1.0, 2049.0], dtype=torch.half, device=d)
        out = torch.empty(3, dtype=torch.float64, device=d)
        torch.add(a, a, out=out)
        return out

    def mul_bf16(d):
        a = torch.tensor([1.0 + 2**-7, 3.0], dtype=torch.bfloat16, device=d)
        out = torch.empty(2, dtype=torch.float32, device=d)
        torch.mul(a, a, out=out)
        return out

    def div(d):
        a = torch.tensor([1.0, 2.0], dtype=torch.half, device=d)
        out = torch.empty(2, dtype=torch.float64, device=d)
        torch.div(a, torch.tensor([3.0, 7.0], dtype=torch.half, device=d), out=out)
        return out

    def exp(d):
        a = torch.tensor([12.0, 0.1], dtype=torch.half, device=d)
        out = torch.empty(2, dtype=torch.float64, device=d)
        torch.exp(a, out=out)
        return out

    for fn in (add, mul_bf16, div, exp):
        same(fn)


def test_logcumsumexp_keeps_nan():
    x = [1.0, float("nan"), 2.0, 3.0]
    same(lambda d: torch.logcumsumexp(torch.tensor(x, device=d), 0), exact=False)
    y = [[-math.inf, 0.5, float("nan")], [1.0, -math.inf, -math.inf]]
    same(lambda d: torch.logcumsumexp(torch.tensor(y, device=d), 1), exact=False)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_exp_special_values(dtype):
    inf, nan = math.inf, math.nan
    z = [complex(inf, nan), complex(-inf, nan), complex(inf, inf), complex(-inf, inf),
         complex(nan, 0.0), complex(nan, -0.0), complex(inf, -0.0), complex(1, inf),
         complex(inf, 2.0), complex(-inf, 2.0), complex(nan, 1.0), complex(0.5, -1.25)]

    def exp(d):
        return torch.exp(torch.tensor(z, dtype=dtype, device=d))

    c, t = exp("cpu"), exp("tpu").cpu()
    torch.testing.assert_close(t, c, equal_nan=True)
    # the signs of zeros, which assert_close does not compare (a NaN's sign
    # means nothing)
    for part in ("real", "imag"):
        a, b = getattr(t, part), getattr(c, part)
        keep = ~b.isnan()
        assert torch.equal(torch.signbit(a[keep]), torch.signbit(b[keep])), part


def test_multilabel_margin_of_a_1d_input_is_0d():
    def loss(d):
        x = torch.tensor([0.1, 0.2, 0.4, 0.8], device=d, requires_grad=True)
        y = torch.tensor([3, 0, -1, 1], device=d)
        out = F.multilabel_margin_loss(x, y, reduction="none")
        out.backward()
        return torch.cat([out.detach().reshape(1), x.grad, torch.tensor([float(out.dim())], device=d)])

    same(loss, exact=False)
    x = torch.tensor([0.1, 0.2, 0.4, 0.8], device="tpu")
    assert F.multilabel_margin_loss(x, torch.tensor([3, 0, -1, 1], device="tpu"), reduction="none").dim() == 0


@contextlib.contextmanager
def deterministic():
    old = torch.are_deterministic_algorithms_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(old)
        torch.utils.deterministic.fill_uninitialized_memory = fill


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int8,
                                   torch.bool, torch.complex64])
def test_deterministic_fill_of_new_memory(dtype):
    def fresh(d):
        with deterministic():
            a = torch.empty(5, dtype=dtype, device=d)
            b = torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=d)
            c = torch.zeros(2, dtype=dtype, device=d)
            c.resize_(6)
        return torch.cat([a, b.flatten(), c])

    same(fresh)
    # off again: no fill
    assert torch.empty(3, device="tpu").dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint64])
def test_deterministic_fill_of_new_memory_largest_values(dtype):
    # uint64's fill is its largest value, a Scalar beyond int64's range
    def fresh(d):
        with deterministic():
            return torch.empty(4, dtype=dtype, device=d)

    torch.testing.assert_close(fresh("tpu").cpu(), fresh("cpu"), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64, torch.uint64,
                                   torch.float16, torch.float32, torch.bool, torch.complex64])
@pytest.mark.parametrize("value", [1000, -1, 2**31, 2**63 - 1, 2**64 - 1, 1e39, 1e6, 1 + 2j, float("inf")])
def test_fills_convert_their_scalar_like_cpu(dtype, value):
    # the CPU's checked conversion: an overflow (or an imaginary part for a
    # real dtype) fails, uint8 wraps -1. Left out: Boolean tensors with a
    # value beyond int64 or a complex one (the CPU takes any nonzero as
    # True), and masked_fill/index_fill of uint64, which the CPU lacks.
    if dtype == torch.bool and (value == 2**64 - 1 or isinstance(value, complex)):
        return
    same_outcome(lambda d: torch.zeros(3, dtype=dtype, device=d).fill_(value))
    if dtype == torch.uint64:
        return
    same_outcome(lambda d: torch.zeros(3, dtype=dtype, device=d).masked_fill(
        torch.tensor([True, False, True], device=d), value))
    same_outcome(lambda d: torch.zeros(3, dtype=dtype, device=d).index_fill(
        0, torch.tensor([1], device=d), value))


@pytest.mark.parametrize("dtype", [torch.bool, torch.int16, torch.float32])
def test_xlog1py_keeps_nan(dtype):
    y = torch.tensor([-1.0, 0.0, 1.0, 2.0, float("inf"), -float("inf"), float("nan"), -2.0])
    for x in (torch.zeros(8, dtype=dtype), torch.ones(8, dtype=dtype)):
        same_outcome(lambda d: torch.special.xlog1py(x.to(d), y.to(d)))
        same_outcome(lambda d: torch.xlogy(x.to(d), y.to(d)))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_pow_large_values_as_cpu(dtype):
    """pow(x, y) with large complex values: the phase of y log x is huge, so
    its last bit decides the signs of the infinite result; each product is
    rounded alone, as the C library's cpow (the CPU) rounds it."""
    import itertools
    vals = [-501, 501, -1001.2, 1001.2, -13437.7, 13437.7, -4988429.2, 4988429.2, -1e20, 1e20]
    c = torch.tensor([complex(a, b) for a, b in itertools.product(vals, vals)], dtype=dtype)
    x, y = c.repeat_interleave(len(c)), c.repeat(len(c))
    want = torch.pow(x, y)
    got = torch.pow(x.to(T), y.to(T)).cpu()
    torch.testing.assert_close(got, want, equal_nan=True)
    # the same values through a strided view, in place
    base = torch.zeros(2, len(x), dtype=dtype)
    base[1] = x
    d = base.to(T)
    d[1].pow_(y.to(T))
    torch.testing.assert_close(d[1].cpu(), want, equal_nan=True)


def test_max_pool3d_unbatched_keeps_channels_last_3d():
    """An unbatched (4-d) input whose batch of one is channels_last_3d:
    max_pool3d's output and indices keep that layout, as on the CPU."""
    def call(d):
        x = torch.randn(1, 6, 12, 13, 14, generator=torch.Generator().manual_seed(0))
        x = x.to(d).contiguous(memory_format=torch.channels_last_3d).squeeze(0)
        return torch.nn.functional.max_pool3d(x, (5, 6, 7), return_indices=True)
    (co, ci), (to, ti) = call("cpu"), call(T)
    assert to.stride() == co.stride() and ti.stride() == ci.stride()
    assert torch.equal(to.cpu(), co) and torch.equal(ti.cpu(), ci)


@pytest.mark.parametrize("shape", [(5, 0, 5), (0,), (0, 3), (2, 3)])
@pytest.mark.parametrize("size", [0, 1, 4])
def test_nonzero_static_of_empty_inputs(shape, size):
    """nonzero_static of an input with a dim of size 0 (its coordinates
    once divided by that dim's size, a constant division by zero that
    crashed the compiler): every row is the fill value, as on the CPU."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    x[x.abs() < 0.5] = 0
    assert torch.equal(torch.nonzero_static(x.to(T), size=size, fill_value=-7).cpu(),
                       torch.nonzero_static(x, size=size, fill_value=-7))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_backward_with_no_input_channels(nd):
    """A convolution with no input channels (the CPU's forward then has no
    output channels either): its bias gradient is zeros of the bias, as on
    the CPU, not an internal shape error."""
    f = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[nd]
    got = []
    for d in ("cpu", T):
        x = torch.randn(*([2, 0] + [3] * nd)).to(d).requires_grad_()
        w = torch.randn(*([2, 0] + [2] * nd)).to(d).requires_grad_()
        b = torch.ones(2).to(d).requires_grad_()
        y = f(x, w, b)
        y.sum().backward()
        got.append((y.shape, b.grad.cpu(), w.grad.shape, x.grad.shape))
    assert got[0][0] == got[1][0] and got[0][2:] == got[1][2:]
    assert torch.equal(got[0][1], got[1][1])


def test_cat_of_many_tensors():
    xs = [torch.full((2, i % 3 + 1), float(i)) for i in range(200)]
    assert torch.equal(torch.cat([x.to(T) for x in xs], 1).cpu(), torch.cat(xs, 1))
