"""Bessel-family special functions and the regularized incomplete gamma
functions (csrc/core/ops/bessel.c) against PyTorch's CPU results: special
values (NaN, +-inf, +-0), negative arguments, large magnitudes, every
branch point of the CPU kernels, float32/float64/bfloat16/int64/bool
inputs, non-contiguous inputs, out=, in-place through a view, gradients."""
import functools

import pytest
import torch

from optest import DEV, assert_close, check, rand

NAN, INF = float("nan"), float("inf")

# The CPU kernels' branch points (Ai: 2.09, 8.32, 103.892; J/Y: 5, 1e-5;
# I0: 8; K: 2) on both sides, special values, magnitudes up to 1e30.
_EDGES = [NAN, INF, -INF, 0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 1e-5, 2.0, 2.09, -2.09, 5.0, -5.0,
          8.0, -8.0, 8.3203353, 103.9, -103.9, 1e4, -1e4, 1e6, -1e6, 1e30, -1e30, 4.999, -2.0899]


def grid(dtype=torch.float32):
    """400 arguments as a 16 x 25 matrix (non-contiguous runs transpose it)."""
    wide = torch.logspace(-3, 4, 59, dtype=torch.float64)
    t = torch.cat([torch.tensor(_EDGES, dtype=torch.float64), torch.linspace(-12, 12, 254, dtype=torch.float64),
                   wide, -wide])
    return t.reshape(16, 25).to(dtype)


def fn_of(name):
    return functools.reduce(getattr, name.split("."), torch)


# Entries the CPU computes in bfloat16 too (through float32).
HALF_OK = ["i0", "special.i0e", "special.i0"]
FLOAT_ONLY = ["special.modified_bessel_i0", "special.modified_bessel_k0", "special.modified_bessel_k1",
              "special.scaled_modified_bessel_k0", "special.scaled_modified_bessel_k1", "special.bessel_j0",
              "special.bessel_j1", "special.bessel_y0", "special.bessel_y1", "special.airy_ai"]
UNARY = HALF_OK + FLOAT_ONLY


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_float(name, dtype):
    check(fn_of(name), grid(dtype))


def test_airy_large_negative():
    # Ai oscillates with phase 2/3 |x|^1.5: an ulp in the phase shows, so
    # the phase is rounded exactly as the CPU rounds it.
    x = -torch.logspace(0.3, 6, 400).reshape(16, 25)
    check(torch.special.airy_ai, x, noncontig=False)
    check(torch.special.airy_ai, x.double(), noncontig=False)


@pytest.mark.parametrize("name", UNARY)
def test_unary_int_bool(name):
    fn = fn_of(name)
    check(fn, torch.arange(-20, 20, dtype=torch.int64).reshape(8, 5))
    check(fn, rand(4, 5, dtype=torch.bool), noncontig=False)


@pytest.mark.parametrize("name", HALF_OK)
def test_bfloat16(name):
    check(fn_of(name), grid(torch.bfloat16))


@pytest.mark.parametrize("name", FLOAT_ONLY)
def test_bfloat16_unsupported(name):
    fn = fn_of(name)
    x = torch.ones(3, dtype=torch.bfloat16)
    with pytest.raises(NotImplementedError):
        fn(x)
    with pytest.raises(NotImplementedError):
        fn(x.to(DEV))


@pytest.mark.parametrize("name", ["i0", "special.i0e", "special.bessel_y1", "special.scaled_modified_bessel_k1"])
def test_out(name):
    fn = fn_of(name)
    x = grid()
    for out_dtype in (torch.float32, torch.float64):
        # float32 input into a float64 out: computed in float32 as on the CPU
        exp = fn(x, out=torch.empty(0, dtype=out_dtype))
        out = torch.empty(0, dtype=out_dtype, device=DEV)
        got = fn(x.to(DEV), out=out)
        assert got is out
        assert_close(out, exp, dtype=torch.float32)  # float32 values, an ulp apart
    # an integer input computes in float32, then rounds to the out dtype
    xi = torch.arange(-6, 6)
    assert_close(fn(xi.to(DEV), out=torch.empty(12, dtype=torch.float64, device=DEV)),
                 fn(xi, out=torch.empty(12, dtype=torch.float64)), dtype=torch.float32)
    with pytest.raises(RuntimeError):
        fn(x, out=torch.empty(0, dtype=torch.int64))
    with pytest.raises(RuntimeError):
        fn(x.to(DEV), out=torch.empty(0, dtype=torch.int64, device=DEV))


def test_i0_inplace_through_view():
    base = grid()
    exp = base.clone()
    exp[:, 1].i0_()
    exp[3].i0_()
    x = base.clone().to(DEV)
    x[:, 1].i0_()
    x[3].i0_()
    assert_close(x, exp)
    xi = torch.arange(4).to(DEV)
    with pytest.raises(RuntimeError):
        xi.i0_()


@pytest.mark.parametrize("name", ["i0", "special.i0e", "special.i1", "special.i1e"])
def test_grad(name):
    x = rand(4, 5, low=-12, high=12, requires_grad=True, seed=name)
    with torch.no_grad():
        x[0, 0] = 0.0  # i1/i1e's gradient is special-cased at 0
        x[1, 1] = 1e-9
    check(fn_of(name), x, grad=True)


# ---------------------------------------------------------------- igamma

# a down the rows, x across the columns: every method's region and the
# boundaries between them (a = 20, 200; x/a = 0.3, 2.36; x = a + 1, 3).
_A = [0.0, 1e-20, 1e-4, 0.1, 0.5, 1.0, 1.5, 2.5, 5.0, 10.0, 19.9, 20.0, 20.5, 50.0, 100.0, 199.0, 200.0,
      250.0, 1e3, 1e4, 1e5, 1e6, INF, NAN, -1.0]
_X = [0.0, 1e-10, 1e-3, 0.1, 0.5, 1.0, 1.05, 1.1, 2.0, 2.9, 3.0, 3.1, 5.0, 6.0, 9.0, 10.0, 15.0, 20.0,
      21.0, 25.0, 30.0, 47.0, 60.0, 100.0, 150.0, 200.0, 210.0, 300.0, 500.0, 1e3, 2e3, 1e4, 1.03e4, 1e5,
      1e6, 1.001e6, 1e7, INF, NAN, -1.0]


def ax_grid(dtype):
    return (torch.tensor(_A, dtype=torch.float64).reshape(-1, 1).to(dtype),
            torch.tensor(_X, dtype=torch.float64).to(dtype))


def ax_random(dtype, n=1000):
    # a log-uniform over [1e-3, 1e6], x/a uniform over [0, 3] and
    # log-uniform over [1e-4, 1e2]
    g = torch.Generator().manual_seed(3)
    a = 10 ** (torch.rand(n, generator=g, dtype=torch.float64) * 9 - 3)
    lam = torch.cat([torch.rand(n // 2, generator=g, dtype=torch.float64) * 3,
                     10 ** (torch.rand(n - n // 2, generator=g, dtype=torch.float64) * 6 - 4)])
    return a.to(dtype), (a * lam).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_grid(name, dtype):
    a, x = ax_grid(dtype)
    check(getattr(torch, name), a, x)  # broadcasting (25, 1) with (40,)
    if dtype == torch.float32:  # the arguments swapped: x below a, NaN for negative ones
        check(getattr(torch, name), x.reshape(-1, 1), a.reshape(-1), noncontig=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_random(name, dtype):
    a, x = ax_random(dtype)
    check(getattr(torch, name), a, x, noncontig=False)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_dtypes(name):
    fn = getattr(torch, name)
    # mixed float32 / int64 promotes to float32; a 0-d CPU tensor is a scalar
    check(fn, rand(3, 4, low=0.1, high=5), torch.arange(12).reshape(3, 4), noncontig=False)
    check(fn, rand(3, 4, low=0.1, high=5), torch.tensor(2.5, dtype=torch.float64), noncontig=False)
    for a, x in [(torch.arange(4), torch.arange(4)), (torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))]:
        with pytest.raises(NotImplementedError):
            fn(a, x)
        with pytest.raises(NotImplementedError):
            fn(a.to(DEV), x.to(DEV))
    # the message names CPU's kernel and dtype as CPU does
    a = torch.arange(4)
    with pytest.raises(NotImplementedError) as cpu:
        fn(a, a)
    with pytest.raises(NotImplementedError) as tpu:
        fn(a.to(DEV), a.to(DEV)).cpu()
    assert str(cpu.value) in str(tpu.value)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_out_and_inplace(name):
    fn = getattr(torch, name)
    a, x = ax_grid(torch.float32)
    a2, x2 = a.expand(25, 40), x.expand(25, 40)
    exp = fn(a2, x2, out=torch.empty(0, dtype=torch.float64))
    out = torch.empty(0, dtype=torch.float64, device=DEV)
    assert fn(a2.to(DEV), x2.to(DEV), out=out) is out
    assert_close(out, exp, dtype=torch.float32)
    base = a2.contiguous()
    e = base.clone()
    getattr(e[:, 3], name + "_")(x2[:, 7])
    t = base.clone().to(DEV)
    getattr(t[:, 3], name + "_")(x2[:, 7].to(DEV))
    assert_close(t, e)
    with pytest.raises(RuntimeError):  # the result does not fit self's shape
        getattr(torch.ones(3, device=DEV), name + "_")(torch.ones(2, 3, device=DEV))


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_grad(name):
    fn = getattr(torch, name)
    a = rand(3, 4, low=0.2, high=6, seed=1)
    x = rand(3, 4, low=0.1, high=8, requires_grad=True, seed=2)
    check(fn, a, x, grad=True)
    # the derivative in a is not implemented on the CPU either
    for dev in ("cpu", DEV):
        aa = a.to(dev).requires_grad_(True)
        with pytest.raises(NotImplementedError):
            fn(aa, x.detach().to(dev)).sum().backward()


@pytest.mark.parametrize("m", [0, 1, 2, 5, 12])
@pytest.mark.parametrize("sym", [True, False])
def test_kaiser_window(m, sym):
    for beta in (0.0, 1.5, 12.0):
        exp = torch.signal.windows.kaiser(m, beta=beta, sym=sym)
        got = torch.signal.windows.kaiser(m, beta=beta, sym=sym, device=DEV)
        assert got.device.type == DEV
        assert_close(got, exp)
