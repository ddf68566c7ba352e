"""Special functions on tpu against CPU: lgamma, digamma, polygamma, Hurwitz
zeta, i1/i1e, nextafter, xlog1py, entr, angle."""
import pytest
import torch

from optest import DEV, check, rand

FLOATS = [torch.float32, torch.bfloat16]


def grad_ok(dtype):
    return dtype == torch.float32


# Values away from the poles (CPU and XLA both exact there), plus negative
# non-integers, where the reflection / shifted series are used.
def pts(dtype, requires_grad=False):
    x = rand(3, 8, dtype=torch.float32, low=-6.0, high=6.0, seed=7)
    x = torch.where((x - x.round()).abs() < 0.05, x + 0.25, x)
    return x.to(dtype).requires_grad_(requires_grad and dtype.is_floating_point)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", [torch.lgamma, torch.digamma, lambda t: torch.polygamma(1, t),
                                lambda t: torch.polygamma(2, t), lambda t: torch.polygamma(3, t)],
                         ids=["lgamma", "digamma", "polygamma1", "polygamma2", "polygamma3"])
def test_gamma_family(fn, dtype):
    check(fn, pts(dtype, True), grad=grad_ok(dtype), rtol=1e-4 if dtype == torch.float32 else None,
          atol=1e-4 if dtype == torch.float32 else None)


def test_gamma_family_special_points():
    x = torch.tensor([0.0, -0.0, -1.0, -3.0, 0.5, 10.0, float("inf"), float("nan")])
    check(torch.lgamma, x)
    check(torch.digamma, x)
    check(lambda t: torch.polygamma(1, t), x[[0, 4, 5, 7]])


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_gamma_integer_inputs(dtype):
    x = torch.tensor([1, 2, 3, 7]).to(dtype)
    check(torch.lgamma, x)
    check(torch.digamma, x)


def test_in_place_and_out():
    x = pts(torch.float32)
    check(lambda t: t.clone().lgamma_(), x)
    check(lambda t: t.clone().digamma_(), x)
    check(lambda t: t.clone().polygamma_(2), x)
    check(lambda t: torch.lgamma(t, out=torch.empty_like(t)), x)

    def through_view(t):
        t = t.clone()
        t[:, 1].lgamma_()
        return t
    check(through_view, x)


def test_zeta_half_types_not_implemented():
    x = torch.ones(3, dtype=torch.bfloat16)
    with pytest.raises(NotImplementedError):
        torch.special.zeta(x, x)
    with pytest.raises(NotImplementedError):
        torch.special.zeta(x.to(DEV), x.to(DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_zeta(dtype):
    s = rand(3, 8, low=1.5, high=5.0, seed=1)
    q = pts(torch.float32)
    if dtype == torch.int64:
        s, q = s.round().clamp(min=2).long(), q.round().clamp(min=1).long()
    check(torch.special.zeta, s, q, rtol=1e-4, atol=1e-4)
    check(lambda a: torch.special.zeta(a, 2.5), s)
    check(lambda b: torch.special.zeta(3.0, b), q, rtol=1e-4, atol=1e-4)
    check(torch.special.zeta, torch.tensor([1.0, 0.5, 2.0]), torch.tensor([2.0, 2.0, -1.0]))


@pytest.mark.parametrize("dtype", FLOATS)
def test_i1_i1e(dtype):
    x = rand(4, 6, low=-10.0, high=10.0, dtype=dtype)
    check(torch.special.i1e, x)
    check(torch.special.i1, x, rtol=1e-4 if dtype == torch.float32 else None,
          atol=1e-5 if dtype == torch.float32 else None)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nextafter(dtype):
    x, y = rand(4, 6, dtype=dtype), rand(4, 6, dtype=dtype, seed=3)
    check(torch.nextafter, x, y)
    check(torch.nextafter, x, x[0])  # broadcast, equal values
    check(lambda a, b: a.clone().nextafter_(b), x, y)


def test_nextafter_rejects_integers():
    a = torch.tensor([1, 2])
    with pytest.raises(RuntimeError):
        torch.nextafter(a, a)
    with pytest.raises(RuntimeError):
        torch.nextafter(a.to(DEV), a.to(DEV))
    # CPU's NotImplementedError, its message as CPU words it
    for x in (a, torch.ones(2, dtype=torch.bool)):
        with pytest.raises(NotImplementedError) as cpu:
            torch.nextafter(x, x)
        with pytest.raises(NotImplementedError) as tpu:
            torch.nextafter(x.to(DEV), x.to(DEV)).cpu()
        assert str(cpu.value) in str(tpu.value)


@pytest.mark.parametrize("dtype", FLOATS)
def test_xlog1py_entr(dtype):
    x = rand(4, 6, dtype=dtype, requires_grad=True)
    y = rand(4, 6, low=-0.9, high=3.0, dtype=dtype, requires_grad=True, seed=2)
    g = grad_ok(dtype)
    check(torch.special.xlog1py, x, y, grad=g)
    check(lambda a: torch.special.xlog1py(a, 2.0), x, grad=g)
    check(lambda b: torch.special.xlog1py(3.0, b), y, grad=g)
    check(torch.special.xlog1py, torch.tensor([0.0, 0.0, 1.0]), torch.tensor([float("nan"), -1.0, -1.0]))
    check(torch.special.entr, x, grad=g)
    check(torch.special.entr, torch.tensor([0.0, -1.0, 2.0, float("nan")]))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_angle(dtype):
    x = rand(4, 6, dtype=dtype, requires_grad=dtype.is_floating_point)
    check(torch.angle, x, grad=grad_ok(dtype))
    if dtype.is_floating_point:
        check(torch.angle, torch.tensor([-1.0, 0.0, -0.0, float("nan"), float("-inf")], dtype=dtype))


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_frexp(dtype):
    x = rand(4, 6, low=-50.0, high=50.0, dtype=dtype)
    check(torch.frexp, x)
    special = torch.tensor([0.0, -0.0, 1e-40, float("inf"), float("-inf"), float("nan"), -3.5, 8.0, 0.5])
    check(torch.frexp, special.to(dtype) if dtype != torch.bfloat16 else special[[0, 1, 3, 4, 5, 6, 7, 8]].to(dtype))
    check(lambda t: torch.frexp(t, out=(torch.empty_like(t), torch.empty(t.shape, dtype=torch.int32, device=t.device))),
          x, noncontig=False)


def test_frexp_rejects_integers():
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            torch.frexp(torch.ones(2, dtype=torch.int64, device=dev))


@pytest.mark.parametrize("fn", [torch.special.log_ndtr, torch.special.erfcx, torch.special.spherical_bessel_j0,
                                torch.special.modified_bessel_i1], ids=lambda f: f.__name__)
def test_normal_and_bessel_extras(fn):
    x = rand(4, 6, low=-8.0, high=8.0)
    check(fn, x, rtol=1e-5, atol=1e-6)
    tails = torch.tensor([-50.0, -38.0, -36.0, -10.0, -0.2, 0.0, 0.3, 30.0, float("inf"), float("-inf"),
                          float("nan")])
    check(fn, tails, rtol=1e-5, atol=1e-6)
    check(fn, rand(3, 4, dtype=torch.int64, low=-3, high=3), rtol=1e-5, atol=1e-6)


def test_ndtri():
    p = rand(4, 6, low=0.0, high=1.0)
    check(torch.special.ndtri, p, rtol=1e-5, atol=1e-6)
    edge = torch.tensor([0.0, 1e-30, 1e-12, 1e-5, 0.5, 1 - 1e-6, 1.0, 1.5, -0.1])
    check(torch.special.ndtri, edge, rtol=1e-5, atol=1e-6)


def test_digamma_close_to_the_poles():
    # x - floor(x) would round away the digits of a small negative x
    # before the reflection's tan: 412.19 instead of 412.18 at -0.0024227
    x = torch.cat([torch.tensor([-0.0024227, -1.5e-3, -1e-6, -2.999, -3.001]),
                   torch.rand(1000, generator=torch.Generator().manual_seed(0)) * 0.01 - 0.005])
    want = torch.digamma(x.double())
    got = torch.digamma(x.to("tpu")).cpu().double()
    assert ((got - want).abs() / want.abs().clamp(min=1)).max() < 4e-6
    torch.testing.assert_close(torch.polygamma(0, x.to("tpu")).cpu(), torch.polygamma(0, x))
