"""Results PyTorch's own device-generic tests found wrong on tpu, each
against the CPU: indexing with empty and 0-d boolean indices, linspace and
logspace (views as out=, large integer ranges), the result type of an
out= of a wider dtype, NaN through logcumsumexp, complex exp's special
values, _lazy_clone, a 0-d loss, deterministic fills of new memory."""
import contextlib
import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu  # noqa: F401


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


def test_lazy_clone_is_a_copy():
    def lazy(d):
        a = torch.arange(8.0, device=d)
        v = a[1::2]
        b = torch._lazy_clone(v)
        a.add_(1)
        b.mul_(10)
        return torch.cat([a, b, torch.tensor([float(b.stride(0)), float(b.storage_offset())], device=d)])

    same(lazy)
    x = torch.randn(3, device="tpu", requires_grad=True)
    torch._lazy_clone(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.ones(3))


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


def test_softmax_of_integers_is_refused_as_on_cpu():
    # (log_softmax of bool stops earlier, in PyTorch's meta function, with
    # a RuntimeError about subtracting bools)
    for dtype, fns in ((torch.long, 2), (torch.int32, 2), (torch.bool, 1)):
        for f in (lambda t: torch.softmax(t, 0), lambda t: torch.log_softmax(t, 0))[:fns]:
            with pytest.raises(NotImplementedError, match="not implemented for"):
                f(torch.ones(4, dtype=dtype, device="tpu"))
    got = torch.softmax(torch.ones(4, dtype=torch.long, device="tpu"), 0, dtype=torch.float32)
    torch.testing.assert_close(got.cpu(), torch.full((4,), 0.25))
