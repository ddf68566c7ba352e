"""complex64/complex128 tensors on tpu against the CPU: round trips,
view_as_real/view_as_complex (writes through either view reach the
other), lazy conjugates, arithmetic with real and complex Scalars,
reductions, complex()/polar(), copies between complex and real dtypes,
gradients, and ops without a complex lowering failing loudly."""
import warnings

import pytest
import torch

from optest import DEV

CTOL = {torch.complex64: dict(atol=1e-5, rtol=1.3e-5), torch.complex128: dict(atol=1e-12, rtol=1e-12),
        torch.float32: dict(atol=1e-5, rtol=1.3e-5), torch.float64: dict(atol=1e-12, rtol=1e-12)}
CDTYPES = [torch.complex64, torch.complex128]


def crand(*shape, dtype=torch.complex64, seed=0):
    return torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def close(a, e):
    assert a.device.type == DEV
    assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
    torch.testing.assert_close(a.cpu(), e, equal_nan=True, **CTOL.get(e.dtype, {}))


def same(fn, *args):
    close(fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]), fn(*args))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
def test_round_trip(dtype, shape):
    x = crand(*shape, dtype=dtype)
    t = x.to(DEV)
    assert t.dtype == dtype and torch.equal(t.cpu(), x)
    assert torch.equal(t.clone().cpu(), x)
    if x.dim() >= 2:
        assert torch.equal(t.transpose(0, 1).contiguous().cpu(), x.transpose(0, 1).contiguous())
        assert torch.equal(t[..., 1:3].cpu(), x[..., 1:3])


@pytest.mark.parametrize("dtype", CDTYPES)
def test_view_as_real_and_complex(dtype):
    x = crand(3, 4, dtype=dtype)
    t = x.to(DEV)
    assert torch.equal(torch.view_as_real(t).cpu(), torch.view_as_real(x))
    assert torch.equal(t.real.cpu(), x.real) and torch.equal(t.imag.cpu(), x.imag)
    # writes through the real view change the complex tensor
    torch.view_as_real(t)[:, 1:, 1].mul_(3)
    torch.view_as_real(x)[:, 1:, 1].mul_(3)
    assert torch.equal(t.cpu(), x)
    t.imag[0].fill_(7)
    x.imag[0].fill_(7)
    t.real[:, 0].add_(1)
    x.real[:, 0].add_(1)
    assert torch.equal(t.cpu(), x)
    # and the reverse: a complex view of a real tensor
    r = torch.randn(4, 3, 2, dtype=x.real.dtype)
    rt = r.to(DEV)
    ct = torch.view_as_complex(rt)
    assert torch.equal(ct.cpu(), torch.view_as_complex(r))
    ct[1:3].mul_(1j)
    torch.view_as_complex(r)[1:3].mul_(1j)
    assert torch.equal(rt.cpu(), r)


def test_view_as_complex_rejects_like_cpu():
    for bad in (torch.randn(4, 3), torch.randn(3, 2).t()):
        with pytest.raises(RuntimeError):
            torch.view_as_complex(bad)
        with pytest.raises(RuntimeError):
            torch.view_as_complex(bad.to(DEV))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_functions(dtype):
    x = crand(3, 4, dtype=dtype)
    for f in (torch.exp, torch.log, torch.sqrt, torch.sin, torch.cos, torch.tanh, torch.reciprocal):
        same(f, x)
    same(torch.sqrt, torch.tensor([-4 + 0j, -4 - 0j, 0j, -1j], dtype=dtype))  # branch cut


@pytest.mark.parametrize("dtype", CDTYPES)
def test_matmul(dtype):
    a, b = crand(3, 4, dtype=dtype), crand(4, 5, dtype=dtype, seed=1)
    same(torch.matmul, a, b)
    same(lambda p, q: p @ q.conj().t().contiguous().t(), a, b)
    same(lambda p, q: p.conj() @ q, a, b)
    same(torch.matmul, crand(2, 3, 4, dtype=dtype), crand(2, 4, 2, dtype=dtype, seed=1))
    same(torch.mv, a, b[:, 0])
    same(torch.dot, a[0], b[:, 1])
    with pytest.raises(RuntimeError):
        torch.mm(a.to(DEV), torch.randn(4, 5, device=DEV))


def test_rotary_embedding_pattern():
    # the complex rotary position embedding of LLaMA-style models
    def rope(x, theta):
        freqs = torch.polar(torch.ones_like(theta), theta)
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs).flatten(-2)

    x = torch.randn(2, 5, 8, requires_grad=True)
    theta = torch.outer(torch.arange(5.0), 1 / 10000 ** (torch.arange(0, 8, 2) / 8))
    xt = x.detach().to(DEV).requires_grad_()
    e, a = rope(x, theta), rope(xt, theta.to(DEV))
    close(a, e.detach())
    w = torch.randn(2, 5, 8)
    ge, = torch.autograd.grad((e * w).sum(), x)
    gt, = torch.autograd.grad((a * w.to(DEV)).sum(), xt)
    torch.testing.assert_close(gt.cpu(), ge, atol=1e-5, rtol=1e-5)


def test_lazy_conjugate_and_negative():
    x = crand(3, 4)
    t = x.to(DEV)
    assert t.conj().is_conj()
    assert torch.equal(t.conj().cpu(), x.conj())
    assert torch.equal(t.conj().clone().cpu(), x.conj().clone())
    assert torch.equal(t.conj().resolve_conj().cpu(), x.conj().resolve_conj())
    assert torch.equal(t.conj().imag.cpu(), x.conj().imag)  # a negative view
    assert torch.equal(t.conj().imag.resolve_neg().cpu(), x.conj().imag.resolve_neg())
    same(torch.conj_physical, x)
    same(lambda a: (a.conj() * 2).sum(0), x)
    # writing into a conjugate view
    d, dc = torch.zeros(3, 4, dtype=torch.complex64, device=DEV), torch.zeros(3, 4, dtype=torch.complex64)
    d.conj().copy_(t)
    dc.conj().copy_(x)
    assert torch.equal(d.cpu(), dc)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_arithmetic(op, dtype):
    x, y = crand(3, 4, dtype=dtype), crand(4, dtype=dtype, seed=1)
    f = getattr(torch, op)
    same(f, x, y)                         # broadcast
    same(f, x, y.real)                    # complex with real
    same(f, x.real.contiguous(), y)       # real promoted to complex
    same(lambda a: f(a, 2.5), x)          # real Scalar
    same(lambda a: f(a, 1 - 2j), x)       # complex Scalar
    same(lambda a: f(a, torch.tensor(0.5 + 1j)), x)  # CPU 0-d tensor
    if op in ("add", "sub"):
        same(lambda a, b: f(a, b, alpha=2 - 1j), x, y)
    a, b = x.to(DEV), y.to(DEV)
    getattr(a[:, 1:], op + "_")(b[1:])     # in place through a view
    getattr(x[:, 1:], op + "_")(y[1:])
    close(a, x)


def test_real_tensor_times_imaginary_unit():
    x = torch.randn(5)
    same(lambda a: a * 1j, x)
    same(lambda a: 1j * a + 2, x)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_unary(dtype):
    x = crand(3, 4, dtype=dtype)
    x[0, 0] = 0
    for f in (torch.neg, torch.abs, torch.angle, torch.sgn, torch.isnan, torch.isfinite,
              torch.real, torch.imag, torch.conj_physical):
        same(f, x)
    same(lambda a: a == a[0], x)
    same(lambda a: a != 1j, x)
    n = x.clone()
    n[1, 1] = complex(float("nan"), 0)
    same(torch.isnan, n)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_nan_and_inf_parts(dtype):
    """|z| is C's hypot of the parts (inf beside NaN, NaN beside a finite
    part), sgn NaN + NaN i where a part is not finite; XLA's own complex
    abs and sign drop a NaN part beside a finite one (|1 + NaN i| = 1)."""
    nan, inf = float("nan"), float("inf")
    z = torch.tensor([complex(0, nan), complex(nan, 0), complex(inf, nan), complex(1, nan),
                      complex(nan, -inf), complex(3, 4), complex(-inf, 2), complex(0, -0.0),
                      complex(inf, 1), complex(2, -inf)], dtype=dtype)
    for f in (torch.abs, torch.linalg.vector_norm,
              lambda a: torch.linalg.vector_norm(a, 1), lambda a: torch.linalg.vector_norm(a, inf)):
        for part in (z, z[5:6], z[7:8]):
            torch.testing.assert_close(f(part.to(DEV)).cpu(), f(part), rtol=0, atol=0, equal_nan=True)
    # the CPU's own sgn of a non-finite z is NaN + NaN i alone and may keep
    # a 0 imaginary part inside a vectorized run: its real part is NaN
    got = torch.view_as_real(torch.sgn(z.to(DEV)).cpu())
    finite = z.isfinite()
    torch.testing.assert_close(got[finite], torch.view_as_real(torch.sgn(z))[finite], rtol=0, atol=0)
    assert got[~finite].isnan().all()


def test_angle_of_real_like_cpu():
    x = torch.tensor([1.0, -2.0, 0.0, -0.0, float("nan"), float("-inf")])
    same(torch.angle, x)
    same(torch.angle, torch.tensor([3, -1, 0]))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_reductions(dtype):
    x = crand(3, 4, 5, dtype=dtype)
    same(torch.sum, x)
    same(torch.mean, x)
    same(lambda a: a.sum((0, 2)), x)
    same(lambda a: a.mean(-1, keepdim=True), x)
    same(lambda a: a.sum(1, dtype=torch.complex128), x)
    same(lambda a: a[:, ::2].sum(0), x)


def test_complex_and_polar():
    re, im = torch.randn(3, 4), torch.randn(4)
    same(torch.complex, re, im)
    same(torch.polar, re.abs(), im)
    same(torch.complex, re.double(), im.double())
    for f in (torch.complex, torch.polar):
        with pytest.raises(RuntimeError):
            f(re, im.double())
        with pytest.raises(RuntimeError):
            f(re.to(DEV), im.double().to(DEV))


def test_fill_zero_cat_stack():
    x = crand(2, 3)
    same(lambda a: torch.cat([a, a * 2], 1), x)
    same(lambda a: torch.stack([a, a.conj()]), x)
    same(lambda a: torch.zeros_like(a), x)
    same(lambda a: torch.full_like(a, 2 - 3j), x)
    same(lambda a: a.clone().fill_(1.5), x)
    same(lambda a: a.flip(0), x)
    same(lambda a: torch.where(a.real > 0, a, 0), x)
    same(lambda a: torch.nn.functional.pad(a, (1, 2)), x)


def test_copies_between_complex_and_real():
    x = crand(3, 4)
    same(lambda a: a.to(torch.complex128), x)
    same(lambda a: a.real.to(torch.complex64), x)  # real -> complex: imag 0
    same(lambda a, r: r.to(torch.complex64), x, torch.randn(3, 4))
    same(lambda a: (a.real > 0).to(torch.complex64), x)
    same(lambda a: torch.arange(6).to(a.device).to(torch.complex64), x)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        same(lambda a: a.to(torch.float32), x)       # keeps the real part
        same(lambda a: a.to(torch.int64), x * 3)
        d = torch.zeros(3, 4, device=DEV)
        d.copy_(x.to(DEV))
        assert torch.equal(d.cpu(), x.real)
    same(lambda a: a.to(torch.bool), torch.tensor([0j, 1j, 2, 0]))
    # host <-> device copies across dtypes
    assert torch.equal(x.to(DEV, torch.complex128).cpu(), x.to(torch.complex128))
    h = torch.empty(3, 4, dtype=torch.complex128)
    h.copy_(x.to(DEV))
    assert torch.equal(h, x.to(torch.complex128))


def test_gradients():
    re = torch.randn(3, 4, requires_grad=True)
    im = torch.randn(3, 4, requires_grad=True)
    rt, it = re.detach().to(DEV).requires_grad_(), im.detach().to(DEV).requires_grad_()
    w = torch.randn(3, 4, 2)

    def loss(a, b, w):
        c = torch.complex(a, b)
        d = torch.polar(a.abs() + 1, b) * (2 - 1j) + c.conj() / (c + 3)
        return (torch.view_as_real(d) * w).sum() + (c.abs() * w[..., 0]).sum() + c.angle().sum()

    ge = torch.autograd.grad(loss(re, im, w), (re, im))
    gt = torch.autograd.grad(loss(rt, it, w.to(DEV)), (rt, it))
    for a, e in zip(gt, ge):
        torch.testing.assert_close(a.cpu(), e, atol=1e-4, rtol=1e-4)


def check_out_and_empty(f, x, got):
    """f's out= form gives got exactly; f of an empty tensor as the CPU."""
    out = torch.empty(x.shape, dtype=x.dtype, device=DEV)
    f(x.to(DEV), out=out)
    torch.testing.assert_close(out.cpu(), got, equal_nan=True, rtol=0, atol=0)
    same(f, torch.empty(0, 3, dtype=x.dtype))


def check_in_place_and_grad(dtype, first, second, fs):
    """Two in-place methods through overlapping views, then each f's
    gradient of |f(a)|, against the CPU."""
    base = crand(4, 6, dtype=dtype, seed=1)
    d = base.to(DEV)
    for t in (d, base):
        getattr(t[:, ::2], first)()
        getattr(t[1], second)()
    close(d, base)
    for f in fs:
        a = crand(5, dtype=dtype, seed=2).requires_grad_()
        b = a.detach().to(DEV).requires_grad_()
        f(a).abs().sum().backward()
        f(b).abs().sum().backward()
        close(b.grad, a.grad)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_special_functions(dtype):
    """log1p, expm1, log2, log10 and sigmoid as the CPU computes them:
    near 0 (log1p keeps the digits 1 + z loses), far out, on the axes,
    with NaN and infinities; functional, out=, in place through a view,
    and gradients."""
    x = crand(40, dtype=dtype) * 3
    x[:10] = torch.tensor([1e-8 + 1e-9j, -1e-7j, 0, 1e-30, -1, -0.5 + 0.5j, 1e30 + 1j,
                           10 + 100j, complex(float("nan"), 0), complex(float("inf"), 0)],
                          dtype=dtype)
    rel = 3e-7 if dtype == torch.complex64 else 3e-15
    for f in (torch.log1p, torch.expm1, torch.log2, torch.log10, torch.sigmoid):
        got, want = f(x.to(DEV)).cpu(), f(x)
        assert got.dtype == want.dtype
        fin = torch.isfinite(want)
        assert torch.equal(torch.isfinite(got), fin), f
        err = ((got - want).abs() / want.abs().clamp_min(1e-30))[fin]
        assert err.max() <= rel, (f, err.max())
        check_out_and_empty(f, x, got)
    check_in_place_and_grad(dtype, "log1p_", "sigmoid_", (torch.log1p, torch.expm1, torch.log10, torch.sigmoid))


TRIG = (torch.tan, torch.sinh, torch.cosh, torch.asin, torch.acos, torch.atan,
        torch.asinh, torch.acosh, torch.atanh, torch.exp2)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_trigonometric_and_hyperbolic(dtype):
    """tan, sinh, cosh, the inverse functions and exp2 within a few ulp of
    the CPU over the plane (near 0, on both axes, across the branch cuts,
    far out), C99's special values (infinite and NaN parts) as the CPU
    gives them; out=, in place through a view, gradients."""
    inf, nan = float("inf"), float("nan")
    x = crand(200, dtype=dtype) * 3
    special = [1e-8 + 1e-9j, 1e-30j, 0.5, -2, 2, 1, -1, 0, -0.5j, 3j, -3j, 1.5, -1.5,
               complex(inf, 0), complex(-inf, 0), complex(inf, 1), complex(1, nan),
               complex(nan, 0), complex(0, inf), complex(-inf, nan), 30 + 1j, -40 + 0.5j]
    x[:len(special)] = torch.tensor(special, dtype=dtype)
    exact = torch.complex128 if dtype == torch.complex64 else None
    rel = 6e-7 if dtype == torch.complex64 else 2e-15
    for f in TRIG:
        got, want = f(x.to(DEV)).cpu(), f(x)
        assert got.dtype == want.dtype
        fin = torch.isfinite(want)
        assert torch.equal(torch.isfinite(got), fin), f
        # against the exact value where there is one (the CPU's own complex64
        # results are off by up to 2e-6 near exp2's large arguments)
        ref = f(x.to(exact)) if exact else want
        scale = ref.abs().clamp_min(1e-30)
        err = ((got.to(ref.dtype) - ref).abs() / scale)[fin]
        cpu_err = ((want.to(ref.dtype) - ref).abs() / scale)[fin]
        assert err.max() <= max(rel, 2 * cpu_err.max()), (f, err.max(), cpu_err.max())
        nonfinite = ~fin
        assert torch.equal(got[nonfinite].real.isnan(), want[nonfinite].real.isnan()), f
        assert torch.equal(got[nonfinite].imag.isnan(), want[nonfinite].imag.isnan()), f
        check_out_and_empty(f, x, got)
    check_in_place_and_grad(dtype, "asin_", "cosh_", TRIG)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_prod(dtype):
    x = crand(3, 5, dtype=dtype)
    same(lambda a: a.prod(), x)
    same(lambda a: a.prod(1), x)
    same(lambda a: a.prod(0, keepdim=True), x)
    same(lambda a: a.prod(dtype=torch.complex128), x)
    same(lambda a: a.prod(), torch.ones(0, dtype=dtype))
    a = x.clone().requires_grad_()
    b = x.to(DEV).requires_grad_()
    a.prod(1).abs().sum().backward()
    b.prod(1).abs().sum().backward()
    close(b.grad, a.grad)


def test_ops_without_complex_lowering_fail_loudly():
    x = crand(3, 3).to(DEV)
    for f in (lambda t: torch.logcumsumexp(t, 0), lambda t: torch.nn.functional.unfold(t[None, None], 2)):
        with pytest.raises(NotImplementedError, match="complex"):
            f(x)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_triu_tril(dtype):
    x = crand(2, 4, 5, dtype=dtype)
    for k in (-1, 0, 2):
        same(lambda t: torch.triu(t, k), x)
        same(lambda t: torch.tril(t, k), x)
        same(lambda t: t.clone().triu_(k), x)
        same(lambda t: t.clone().tril_(k), x)
        same(lambda t: torch.tril(t.mT, k), x)


def test_bad_input_like_cpu():
    x = crand(3, 4)
    # (not listed: complex floor division, which the meta kernel rejects
    # with RuntimeError where the CPU kernel says NotImplementedError)
    for bad in (lambda a: a < a, lambda a: a.max(), lambda a: torch.view_as_real(a.conj()),
                lambda a: torch.maximum(a, a), lambda a: torch.fmin(a, a), lambda a: a.clamp(0),
                lambda a: torch.remainder(a, a)):
        with pytest.raises(Exception) as cpu:
            bad(x)
        with pytest.raises(type(cpu.value)):
            bad(x.to(DEV))


@pytest.mark.parametrize("mode", ["fused", "debug"])
def test_eager_modes(mode):
    import torchtpu
    x, y = crand(4, 6), torch.randn(4, 6)

    def f(a, b):
        c = torch.fft.rfft(b) * a[:, :4] + 1j
        v = torch.view_as_real(c)
        v[..., 0].mul_(2)
        return torch.fft.irfft(c.conj(), n=6) + c.abs().sum()

    with torchtpu.set_eager_mode(mode):
        a = f(x.to(DEV), y.to(DEV))
        torch.tpu.synchronize()
    torch.testing.assert_close(a.cpu(), f(x, y), atol=1e-4, rtol=1e-4)


def test_compile():
    x = torch.randn(4, 8)

    def f(t):
        s = torch.fft.rfft(t)
        return torch.fft.irfft(s * s.conj() / 8, n=8), torch.view_as_real(s).sum()

    g = torch.compile(f, backend="tpu")
    for a, e in zip(g(x.to(DEV)), f(x)):
        torch.testing.assert_close(a.cpu(), e, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_random(dtype):
    torch.tpu.manual_seed(0)
    z = torch.randn(200, 100, dtype=dtype, device=DEV)
    assert z.dtype == dtype
    h = z.cpu()
    # each part N(0, 1/2), so E|z|^2 = 1, as on the CPU
    assert abs(h.real.mean()) < 0.02 and abs(h.imag.mean()) < 0.02
    assert abs(h.abs().square().mean() - 1) < 0.03
    assert abs(h.real.var() - 0.5) < 0.02 and abs(h.imag.var() - 0.5) < 0.02
    assert abs((h.real * h.imag).mean()) < 0.02
    u = torch.empty(200, 100, dtype=dtype, device=DEV).uniform_(-1, 3).cpu()
    assert u.real.min() >= -1 and u.real.max() < 3 and u.imag.min() >= -1 and u.imag.max() < 3
    assert abs(u.real.mean() - 1) < 0.05 and abs(u.imag.mean() - 1) < 0.05
    n = torch.empty(2000, dtype=dtype, device=DEV).normal_(2, 3).cpu()
    assert abs(n.real.mean() - 2) < 0.15 and abs(n.imag.mean() - 2) < 0.15
    with pytest.raises(RuntimeError):
        torch.empty(3, dtype=dtype, device=DEV).normal_(0, -1)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_var_std_of_complex(dtype):
    # the mean squared modulus of the deviations (real), the mean complex
    z = torch.randn(4, 5, dtype=dtype)
    cases = [lambda t: torch.var(t), lambda t: torch.std(t, 1), lambda t: torch.var_mean(t, 0, correction=0),
             lambda t: torch.std_mean(t, (0, 1), keepdim=True), lambda t: torch.var(t[:, ::2], 1, correction=2)]
    for f in cases:
        want, got = f(z), f(z.to(DEV))
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert g.dtype == w.dtype
            torch.testing.assert_close(g.cpu(), w)
    a = z.clone().requires_grad_()
    torch.std(a, 1).sum().backward()
    t = z.to(DEV).requires_grad_()
    torch.std(t, 1).sum().backward()
    torch.testing.assert_close(t.grad.cpu(), a.grad)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_indexing_fills_scans_of_complex(dtype):
    z = torch.randn(3, 4, dtype=dtype)
    t = z.to(DEV)
    idx = torch.tensor([0, 2])
    cases = [
        lambda x, i: x[i], lambda x, i: x[x.real > 0], lambda x, i: x[:, i.flip(0)],
        lambda x, i: x.masked_fill(x.real > 0, 1j), lambda x, i: x.masked_fill(x.real > 0, 2.5),
        lambda x, i: x.clone().masked_fill_(x.real < 0, torch.tensor(-1 - 1j)),
        lambda x, i: x.cumsum(1), lambda x, i: x.cumprod(0), lambda x, i: x[:, :3].trace(),
        lambda x, i: x[:, ::2].cumsum(0),
        lambda x, i: x.clone().put_(i, x[0, :2]),
        lambda x, i: x.clone().t().put_(torch.cat([i, i]), x[1], accumulate=True),
    ]
    for f in cases:
        want, got = f(z, idx), f(t, idx.to(DEV))
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)
    a = z.clone().requires_grad_()
    a.cumprod(1).abs().sum().backward()
    g = t.clone().requires_grad_()
    g.cumprod(1).abs().sum().backward()
    torch.testing.assert_close(g.grad.cpu(), a.grad)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_pow_and_logsumexp_of_complex(dtype):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(64, generator=g, dtype=dtype)
    z[0], z[1], z[2] = 0, -2, 1e-3j
    w = torch.randn(64, generator=g, dtype=dtype)
    w[0] = 0
    t = z.to(DEV)
    close = dict(rtol=2e-6, atol=1e-6, equal_nan=True)
    for k in (0, 1, 2, 3, 0.5, -0.5, -1, -2, 2.5, -1.5, 1 + 2j, 0j):
        torch.testing.assert_close(torch.pow(t, k).cpu(), torch.pow(z, k), **close)
    torch.testing.assert_close(torch.pow(t, w.to(DEV)).cpu(), torch.pow(z, w), **close)
    for base in (2, 0, 1j):
        torch.testing.assert_close(torch.pow(base, t).cpu(), torch.pow(base, z), **close)
    m = torch.randn(4, 5, generator=g, dtype=dtype)
    m[0, 2] = complex("inf")
    m[3] = complex("-inf")
    for f in (lambda x: torch.logsumexp(x, 1), lambda x: torch.logsumexp(x, (0, 1), keepdim=True),
              lambda x: torch.logsumexp(x[:, ::2], 0)):
        torch.testing.assert_close(f(m.to(DEV)).cpu(), f(m), equal_nan=True)
    a = z[3:].clone().requires_grad_()
    (a ** 2.5).abs().sum().backward()
    b = t[3:].clone().requires_grad_()
    (b ** 2.5).abs().sum().backward()
    torch.testing.assert_close(b.grad.cpu(), a.grad, **close)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_gather_scatter_family(dtype):
    """gather, scatter (src, value), scatter_add, scatter_reduce (sum,
    mean; amax/amin refused as on the CPU, products refused on tpu),
    index_add/copy/fill and masked_scatter on complex values, in place
    through a strided view too, and gather's gradient."""
    x, src = crand(5, 4, dtype=dtype, seed=1), crand(5, 4, dtype=dtype, seed=2)
    idx = torch.randint(0, 5, (3, 4), generator=torch.Generator().manual_seed(3))
    same(lambda a, i: torch.gather(a, 0, i), x, idx)
    same(lambda a, i, s: a.scatter(0, i, s), x, idx, src)
    same(lambda a, i: a.scatter(0, i, 1.5), x, idx)
    same(lambda a, i, s: a.scatter_add(0, i, s), x, idx, src)
    for r in ("sum", "mean"):
        for inc in (True, False):
            same(lambda a, i, s: a.scatter_reduce(0, i, s, r, include_self=inc), x, idx, src)
    for r in ("amax", "amin"):
        with pytest.raises(NotImplementedError, match="not implemented for 'Complex"):
            x.to(DEV).scatter_reduce(0, idx.to(DEV), src.to(DEV), r)
    # products: refused rather than rounded otherwise than the CPU
    with pytest.raises(NotImplementedError, match="by product"):
        x.to(DEV).scatter_reduce(0, idx.to(DEV), src.to(DEV), "prod")
    with pytest.raises(NotImplementedError, match="by product"):
        x.to(DEV).scatter(0, idx.to(DEV), src.to(DEV), reduce="multiply")
    i1 = torch.tensor([0, 2, 2])
    same(lambda a, i, s: a.index_add(0, i, s, alpha=2), x, i1, src[:3])
    same(lambda a, s: a.index_copy(0, torch.tensor([0, 2, 4], device=a.device), s), x, src[:3])
    same(lambda a, i: a.index_fill(0, i, 2.5), x, i1)
    same(lambda a, s: a.masked_scatter(a.real > 0, s), x, src)

    def through_view(a, i, s):  # in place into every other column of a wider tensor
        base = torch.zeros(5, 8, dtype=dtype, device=a.device)
        base[:, ::2] = a
        base[:, ::2].scatter_add_(0, i, s)
        return base
    same(through_view, x, idx, src)
    w = x.to(DEV).requires_grad_()
    g = crand(3, 4, dtype=dtype, seed=4)
    torch.gather(w, 0, idx.to(DEV)).backward(g.to(DEV))
    wc = x.clone().requires_grad_()
    torch.gather(wc, 0, idx).backward(g)
    close(w.grad, wc.grad)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_logical_ops_and_eye(dtype):
    """A complex value is true when either part is non-zero (a pure
    imaginary one too), as in the CPU's logical ops."""
    x = crand(4, 5, dtype=dtype)
    x[0, :2] = 0
    x[1, 0] = complex(0, 2)
    y = crand(4, 5, dtype=dtype, seed=1)
    y[0, 0] = 0
    for f in (torch.logical_and, torch.logical_or, torch.logical_xor):
        assert torch.equal(f(x.to(DEV), y.to(DEV)).cpu(), f(x, y))
        assert torch.equal(f(x.to(DEV).t(), torch.ones(5, 4, device=DEV)).cpu(), f(x.t(), torch.ones(5, 4)))
    assert torch.equal(torch.logical_not(x.to(DEV)).cpu(), torch.logical_not(x))
    assert torch.equal(x.to(DEV).all(1).cpu(), x.all(1))
    assert torch.equal(torch.eye(3, 4, dtype=dtype, device=DEV).cpu(), torch.eye(3, 4, dtype=dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("ord", [2, 1, 0, 3.5, float("inf"), -float("inf")])
def test_vector_norm(dtype, ord):
    x = crand(3, 4, dtype=dtype)
    same(lambda t: torch.linalg.vector_norm(t, ord), x)
    same(lambda t: torch.linalg.vector_norm(t, ord, dim=1, keepdim=True), x)
    same(lambda t: torch.linalg.vector_norm(t.t(), ord, dim=0), x)
    if ord == 2:
        same(lambda t: torch.norm(t), x)
        xs = x.requires_grad_()
        xd = x.detach().to(DEV).requires_grad_()
        torch.linalg.vector_norm(xs).backward()
        torch.linalg.vector_norm(xd).backward()
        close(xd.grad, xs.grad)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_sinc_addcmul_addcdiv(dtype):
    x = crand(3, 4, dtype=dtype)
    x[0, 0] = 0
    same(torch.sinc, x)
    a, b, c = crand(3, 4, dtype=dtype), crand(3, 4, dtype=dtype, seed=1), crand(4, dtype=dtype, seed=2)
    for v in (1, 2 - 1j):
        same(lambda s, t, u: torch.addcmul(s, t, u, value=v), a, b, c)
        same(lambda s, t, u: torch.addcdiv(s, t, u, value=v), a, b, c)
    s = a.to(DEV)
    s.addcmul_(b.to(DEV), c.to(DEV), value=0.5j)
    close(s, a.clone().addcmul_(b, c, value=0.5j))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_addcmul_with_a_complex_value_on_real_tensors(dtype):
    """A complex `value` on real tensors: the CPU's checked conversion
    (an imaginary part is an overflow error, a zero one converts)."""
    x = torch.tensor([1, 2, 3]).to(dtype)
    for v in (2 + 0j, 1 + 1j):
        try:
            want = torch.addcmul(x, x, x, value=v)
        except Exception as e:  # noqa: BLE001
            with pytest.raises(type(e), match=str(e)[:30].replace("(", ".").replace(")", ".")):
                torch.addcmul(x.to(DEV), x.to(DEV), x.to(DEV), value=v)
        else:
            assert torch.equal(torch.addcmul(x.to(DEV), x.to(DEV), x.to(DEV), value=v).cpu(), want)


def test_masked_scatter_backward():
    x = crand(3, 4)
    m = torch.tensor([True, False, True, True])
    src = crand(12, seed=1).requires_grad_()
    srcd = src.detach().to(DEV).requires_grad_()
    y = x.masked_scatter(m, src)
    yd = x.to(DEV).masked_scatter(m.to(DEV), srcd)
    g = crand(3, 4, seed=2)
    y.backward(g)
    yd.backward(g.to(DEV))
    close(srcd.grad, src.grad)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_twelve_dims(dtype):
    """A 12-d complex tensor (its real view has 13 dims) as PyTorch's
    device tests make one."""
    shape = (5, 2, 3, 1, 4, 5, 3, 2, 1, 2, 3, 4)
    x = crand(*shape, dtype=dtype)
    t = x.to(DEV)
    assert torch.equal(torch.view_as_real(t).cpu(), torch.view_as_real(x))
    close((t[:1] * t[:1]), x[:1] * x[:1])


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 5), (2, 4, 3)])
def test_svd(dtype, shape):
    """Complex SVD: the singular values are the CPU's; the vectors are
    unique only up to a phase, so U, Vh are checked by what they must be
    (A = U S Vh, orthonormal columns / rows)."""
    a = crand(*shape, dtype=dtype)
    u, s, vh = torch.linalg.svd(a.to(DEV), full_matrices=False)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.complex64 else dict(atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a), **tol)
    rec = u.cpu() @ torch.diag_embed(s.cpu()).to(dtype) @ vh.cpu()
    torch.testing.assert_close(rec, a, **tol)
    k = min(shape[-2:])
    eye = torch.eye(k, dtype=dtype).expand(*shape[:-2], k, k)
    torch.testing.assert_close(u.cpu().mH @ u.cpu(), eye, **tol)
    torch.testing.assert_close(vh.cpu() @ vh.cpu().mH, eye, **tol)
    torch.testing.assert_close(torch.linalg.matrix_norm(a.to(DEV), "nuc").cpu(),
                               torch.linalg.matrix_norm(a, "nuc"), **tol)


@pytest.mark.parametrize("op", ["mm", "bmm", "matmul", "solve_triangular", "solve_triangular_in_place"])
def test_out_into_a_conjugate_view(op):
    """out= a lazily conjugated view (z.conj()): ops that PyTorch lets handle
    the conjugate bit themselves (mm, solve_triangular) write the result
    through the bit, as on the CPU (found by PyTorch's test_linalg)."""
    torch.manual_seed(5)
    a = torch.randn(2, 4, 4, dtype=torch.complex64) + 4 * torch.eye(4)
    b = torch.randn(2, 4, 3, dtype=torch.complex64)
    results = []
    for dev in ("cpu", DEV):
        x, y = a.to(dev).triu(), b.to(dev)
        z = torch.zeros(2, 4, 3, dtype=torch.complex64, device=dev)
        out = z.conj()
        if op == "mm":
            r = torch.mm(x[0], y[0], out=out[0])
        elif op == "bmm":
            r = torch.bmm(x, y, out=out)
        elif op == "matmul":
            r = torch.matmul(x, y, out=out)
        elif op == "solve_triangular":
            r = torch.linalg.solve_triangular(x, y, upper=True, out=out)
        else:
            out.copy_(y)
            r = torch.linalg.solve_triangular(x, out, upper=True, out=out)
        assert r.is_conj() and r.data_ptr() == out.data_ptr()
        results.append((z.cpu(), out.cpu().resolve_conj()))
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
