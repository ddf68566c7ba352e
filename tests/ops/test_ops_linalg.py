"""Matrix products on tpu against CPU: mm, bmm, mv, dot/vdot, addmm,
addmv, baddbmm, addbmm (functional, in-place, out=), and the composites
that decompose into them: matmul over every rank combination, linear,
outer, einsum."""
import warnings

import pytest
import torch
import torch.nn.functional as F
import torchtpu

from optest import DEV, assert_close, check, check_fb, rand, same_error

FLOATS = [torch.float32, torch.bfloat16]
ALL = FLOATS + [torch.int64]


def mk(*shape, dtype=torch.float32, seed=None):
    grad = dtype.is_floating_point
    return rand(*shape, dtype=dtype, requires_grad=grad, seed=seed)


# ------------------------------------------------------------------ products


@pytest.mark.parametrize("dtype", ALL)
def test_mm(dtype):
    check_fb(torch.mm, mk(3, 5, dtype=dtype), mk(5, 4, dtype=dtype), noncontig=True)


@pytest.mark.parametrize("dtype", ALL)
def test_bmm(dtype):
    check_fb(torch.bmm, mk(2, 3, 5, dtype=dtype), mk(2, 5, 4, dtype=dtype), noncontig=True)


@pytest.mark.parametrize("dtype", ALL)
def test_mv(dtype):
    check_fb(torch.mv, mk(3, 5, dtype=dtype), mk(5, dtype=dtype), noncontig=True)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("fn", [torch.dot, torch.vdot])
def test_dot(dtype, fn):
    check_fb(fn, mk(7, dtype=dtype), mk(7, dtype=dtype, seed=1), noncontig=True)


def test_float16_and_float64():
    for dt in (torch.float16, torch.float64):
        check_fb(torch.mm, mk(3, 5, dtype=dt), mk(5, 4, dtype=dt))


def test_large_f32_is_exact_enough():
    # HIGHEST precision: a long f32 contraction matches the CPU closely.
    a, b = rand(64, 512), rand(512, 32)
    check(torch.mm, a, b, atol=1e-4, rtol=1e-5, noncontig=False)


def test_empty_contraction():
    check(torch.mm, rand(3, 0), rand(0, 4), noncontig=False)
    check(lambda s, a, b: torch.addmm(s, a, b, beta=2), rand(3, 4), rand(3, 0), rand(0, 4), noncontig=False)


# ------------------------------------------------------------------ add forms


@pytest.mark.parametrize("dtype,beta,alpha", [(torch.float32, 0.5, -2.0), (torch.float32, 1, 1),
                                             (torch.bfloat16, 0.5, -2.0), (torch.int64, 3, -2)])
def test_addmm(dtype, beta, alpha):
    check_fb(lambda s, a, b: torch.addmm(s, a, b, beta=beta, alpha=alpha),
             mk(3, 4, dtype=dtype), mk(3, 5, dtype=dtype), mk(5, 4, dtype=dtype), noncontig=True)
    # self broadcasts (a linear layer's bias)
    check_fb(lambda s, a, b: torch.addmm(s, a, b, beta=beta, alpha=alpha),
             mk(4, dtype=dtype), mk(3, 5, dtype=dtype), mk(5, 4, dtype=dtype))


def test_addmm_int_scalars_truncate_like_cpu():
    s, a, b = rand(3, 4, dtype=torch.int64), rand(3, 2, dtype=torch.int64), rand(2, 4, dtype=torch.int64)
    check(lambda s, a, b: torch.addmm(s, a, b, beta=1.7, alpha=0.5), s, a, b)
    check(lambda s, a, b: torch.addmm(s, a, b, beta=True, alpha=True), s, a, b)


def test_zero_beta_ignores_nan_self():
    nan = torch.full((3, 4), float("nan"))
    check(lambda s, a, b: torch.addmm(s, a, b, beta=0), nan, rand(3, 5), rand(5, 4))
    check(lambda s, a, b: torch.addmv(s, a, b, beta=0), nan[0, :3], rand(3, 5), rand(5))
    check(lambda s, a, b: torch.baddbmm(s, a, b, beta=0), nan.expand(2, 3, 4).clone(), rand(2, 3, 5), rand(2, 5, 4))
    check(lambda s, a, b: torch.addbmm(s, a, b, beta=0), nan, rand(2, 3, 5), rand(2, 5, 4))
    # a zero alpha ignores the product, as BLAS does
    check(lambda s, a, b: torch.addmm(s, a, b, alpha=0), rand(3, 4), torch.full((3, 5), float("nan")), rand(5, 4))


@pytest.mark.parametrize("dtype", ALL)
def test_addmv(dtype):
    check_fb(lambda s, a, b: torch.addmv(s, a, b, beta=2, alpha=3),
          mk(3, dtype=dtype), mk(3, 5, dtype=dtype), mk(5, dtype=dtype), noncontig=True)
    check_fb(torch.addmv, mk(1, dtype=dtype), mk(3, 5, dtype=dtype), mk(5, dtype=dtype), noncontig=True)


@pytest.mark.parametrize("dtype", ALL)
def test_baddbmm(dtype):
    check_fb(lambda s, a, b: torch.baddbmm(s, a, b, beta=2, alpha=-1),
          mk(2, 3, 4, dtype=dtype), mk(2, 3, 5, dtype=dtype), mk(2, 5, 4, dtype=dtype), noncontig=True)
    check_fb(torch.baddbmm, mk(3, 1, dtype=dtype), mk(2, 3, 5, dtype=dtype), mk(2, 5, 4, dtype=dtype), noncontig=True)


@pytest.mark.parametrize("dtype", ALL)
def test_addbmm(dtype):
    check_fb(lambda s, a, b: torch.addbmm(s, a, b, beta=2, alpha=3),
          mk(3, 4, dtype=dtype), mk(2, 3, 5, dtype=dtype), mk(2, 5, 4, dtype=dtype), noncontig=True)
    check_fb(torch.addbmm, mk(4, dtype=dtype), mk(2, 3, 5, dtype=dtype), mk(2, 5, 4, dtype=dtype), noncontig=True)


# ------------------------------------------------------------------ in-place, out=


INPLACE = [
    ("addmm_", (3, 4), (3, 5), (5, 4)),
    ("addmv_", (3,), (3, 5), (5,)),
    ("baddbmm_", (2, 3, 4), (2, 3, 5), (2, 5, 4)),
    ("addbmm_", (3, 4), (2, 3, 5), (2, 5, 4)),
]


@pytest.mark.parametrize("name,s,a,b", INPLACE)
def test_inplace(name, s, a, b):
    def fn(s, a, b):
        s = s.clone()
        getattr(s, name)(a, b, beta=0.5, alpha=2)
        return s

    check(fn, rand(*s), rand(*a), rand(*b))


def test_inplace_through_view():
    base = rand(3, 4, 5)
    a, b = rand(3, 2), rand(2, 5)

    def fn(base, a, b):
        x = base.clone()
        x[:, 1].addmm_(a, b, alpha=2)   # a strided view of x
        x[1, :3].addmm_(a, b)            # a contiguous one
        return x

    check(fn, base, a, b, noncontig=False)


OUT = [
    (torch.mm, [(3, 5), (5, 4)], (3, 4)),
    (torch.bmm, [(2, 3, 5), (2, 5, 4)], (2, 3, 4)),
    (torch.mv, [(3, 5), (5,)], (3,)),
    (torch.dot, [(5,), (5,)], ()),
    (torch.vdot, [(5,), (5,)], ()),
    (torch.addmm, [(3, 4), (3, 5), (5, 4)], (3, 4)),
    (torch.addmv, [(3,), (3, 5), (5,)], (3,)),
    (torch.baddbmm, [(2, 3, 4), (2, 3, 5), (2, 5, 4)], (2, 3, 4)),
    (torch.addbmm, [(3, 4), (2, 3, 5), (2, 5, 4)], (3, 4)),
]


@pytest.mark.parametrize("fn,shapes,out_shape", OUT, ids=[o[0].__name__ for o in OUT])
def test_out(fn, shapes, out_shape):
    args = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    expected = fn(*args)
    out = torch.empty(out_shape, device=DEV)
    r = fn(*[t.to(DEV) for t in args], out=out)
    assert r.data_ptr() == out.data_ptr()
    assert_close(out, expected)
    # into a strided view of a bigger tensor
    if len(out_shape) == 2:
        big = torch.zeros(out_shape[0], out_shape[1] * 2, device=DEV)
        fn(*[t.to(DEV) for t in args], out=big[:, ::2])
        assert_close(big[:, ::2], expected)
        assert_close(big[:, 1::2], torch.zeros(out_shape))


# ------------------------------------------------------------------ composites


MATMUL_SHAPES = [
    ((5,), (5,)),
    ((3, 5), (5,)),
    ((5,), (5, 4)),
    ((3, 5), (5, 4)),
    ((2, 3, 5), (5,)),
    ((5,), (2, 5, 4)),
    ((2, 3, 5), (5, 4)),
    ((3, 5), (2, 5, 4)),
    ((2, 3, 5), (2, 5, 4)),
    ((2, 1, 3, 5), (4, 5, 2)),
    ((1, 3, 5), (2, 2, 5, 4)),
]


@pytest.mark.parametrize("a,b", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul(a, b):
    check_fb(torch.matmul, mk(*a), mk(*b, seed=1), noncontig=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_bf16(dtype):
    check_fb(torch.matmul, mk(2, 3, 5, dtype=dtype), mk(5, 4, dtype=dtype))


LINEAR = [(torch.float32, (5,), True), (torch.float32, (3, 5), True), (torch.float32, (2, 3, 5), True),
          (torch.float32, (3, 5), False), (torch.float32, (2, 3, 5), False), (torch.bfloat16, (2, 3, 5), True)]


@pytest.mark.parametrize("dtype,shape,bias", LINEAR)
def test_linear(dtype, shape, bias):
    w, b = mk(4, 5, dtype=dtype, seed=1), mk(4, dtype=dtype, seed=2) if bias else None
    check_fb(F.linear, mk(*shape, dtype=dtype), w, b, noncontig=True)


def test_outer_einsum_tensordot():
    check_fb(torch.outer, mk(3), mk(4))
    check_fb(lambda a, b: torch.einsum("bij,bjk->bik", a, b), mk(2, 3, 5), mk(2, 5, 4))
    check_fb(lambda a, b: torch.tensordot(a, b, dims=([1, 2], [0, 1])), mk(3, 4, 5), mk(4, 5, 2))


# ------------------------------------------------------------------ errors


def test_errors_like_cpu():
    cases = [
        (torch.mm, (rand(3, 4), rand(5, 2))),                                   # shapes
        (torch.mm, (rand(3, 4), rand(4, 2, dtype=torch.float64))),              # dtypes
        (torch.mm, (rand(2, 2, dtype=torch.bool), rand(2, 2, dtype=torch.bool))),  # no bool kernel
        (torch.dot, (rand(3, dtype=torch.bool), rand(3, dtype=torch.bool))),
        (torch.bmm, (rand(2, 3, 4), rand(3, 4, 2))),
        (torch.mv, (rand(3, 4), rand(3))),
        (torch.matmul, (rand(2, 3, 4), rand(5, 2))),
    ]
    for fn, args in cases:
        with pytest.raises(RuntimeError) as cpu:
            fn(*args)
        with pytest.raises(RuntimeError) as tpu:
            fn(*[a.to(DEV) for a in args])
        assert type(tpu.value) is type(cpu.value), (fn, cpu.value, tpu.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16,
                                   torch.int64, torch.bool])
@pytest.mark.parametrize("beta,alpha", [(1j, 1), (1, 0.2 - 0.2j), (0.1j, 0.2 - 0.2j), (True, 1), (2, True),
                                        (2.5, 1), (1, 0.5), (1e300, 1)])
def test_addr_scalars_as_cpu(beta, alpha, dtype):
    """addr's CPU kernel refuses a scalar its result dtype cannot take
    (complex for a real result, Boolean for a non-Boolean one, float for
    an integral one, a value out of range), in the functional, out= and
    in-place forms alike; the ones it takes give its values."""
    m, v1, v2 = (rand(*s, seed=i).to(dtype) for i, s in enumerate([(3, 4), (3,), (4,)]))

    def forms(d):
        yield lambda: torch.addr(m.to(d), v1.to(d), v2.to(d), beta=beta, alpha=alpha)
        yield lambda: torch.addr(m.to(d), v1.to(d), v2.to(d), beta=beta, alpha=alpha,
                                 out=torch.empty(3, 4, dtype=dtype, device=d))
        yield lambda: m.clone().to(d).addr_(v1.to(d), v2.to(d), beta=beta, alpha=alpha)

    for i in range(3):
        try:
            expected = list(forms("cpu"))[i]()
        except RuntimeError:
            same_error(lambda d: list(forms(d))[i]())
            continue
        assert_close(list(forms(DEV))[i]().cpu(), expected)


def test_addr_promotes_before_checking():
    # an int self with float vectors is a float result: a float beta is fine
    m, v1, v2 = rand(3, 4).long(), rand(3), rand(4)
    check(lambda a, b, c: torch.addr(a, b, c, beta=0.5), m, v1, v2)
    same_error(lambda d: torch.addr(m.to(d), v1.long().to(d), v2.long().to(d), beta=0.5))


def test_kron_out_resize_warns_as_cpu():
    """PyTorch's test_kron_errors_and_warnings: a non-empty out of another
    shape is resized with one warning per call; an out of a dtype the
    result cannot be cast to is refused."""
    def warned(d):
        a, b = torch.eye(3, device=d), torch.ones(2, 2, device=d)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = torch.kron(a, b, out=torch.empty(3, 3, device=d))
        return [str(x.message).split(".")[0] for x in w], out.cpu()
    cpu_warnings, cpu_out = warned("cpu")
    assert len(cpu_warnings) == 1 and "An output with one or more elements was resized" in cpu_warnings[0]
    for _ in range(2):  # the second call is answered from the caches
        dev_warnings, dev_out = warned(DEV)
        assert dev_warnings == cpu_warnings
        assert torch.equal(dev_out, cpu_out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_error(lambda d: torch.kron(torch.eye(3, device=d), torch.ones(2, 2, device=d),
                                        out=torch.empty(3, 3, dtype=torch.int32, device=d)))


# ------------------------------------------------ Cholesky, complex; the _ex contract

CPLX = [torch.complex64, torch.complex128]
DTOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.complex64: dict(atol=1e-4, rtol=1e-4),
        torch.float64: dict(atol=1e-10, rtol=1e-10), torch.complex128: dict(atol=1e-10, rtol=1e-10)}


def hpd(n, batch=(), dtype=torch.complex64, seed=0):
    """A Hermitian (symmetric) positive-definite matrix, well conditioned."""
    a = rand(*batch, n, n, dtype=dtype, seed=seed)
    return a @ a.mH + n * torch.eye(n, dtype=dtype)


def not_pd(n, order, dtype=torch.float32, seed=0):
    """Hermitian, positive-definite up to its leading minor of order `order`."""
    a = hpd(n, dtype=dtype, seed=seed)
    j = order - 1
    # make the Schur complement's diagonal at j exactly non-positive
    a[j, j] = a[j, j] - 2 * (n + 4) * (1 + n)
    return a


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("n,batch", [(1, ()), (3, (2,)), (16, ())])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_complex(dtype, n, batch, upper):
    a = hpd(n, batch, dtype)
    check(lambda t: torch.linalg.cholesky_ex(t, upper=upper), a, **DTOL[dtype])
    check(lambda t: torch.linalg.cholesky(t, upper=upper), a, **DTOL[dtype])
    f = torch.linalg.cholesky(a, upper=upper)
    rhs = rand(*batch, n, 2, dtype=dtype, seed=1)
    check(lambda b, u: torch.cholesky_solve(b, u, upper=upper), rhs, f, **DTOL[dtype])
    check(lambda u: torch.cholesky_inverse(u, upper=upper), f, **DTOL[dtype])


def test_cholesky_complex_backward():
    a = hpd(3, (2,), torch.complex128).requires_grad_()
    check(torch.linalg.cholesky, a, grad=True, noncontig=False, **DTOL[torch.complex128])
    x = hpd(3, dtype=torch.complex128).to(DEV).requires_grad_()
    b = rand(3, 2, dtype=torch.complex128, seed=1).to(DEV).requires_grad_()
    herm = lambda t: (t + t.mH) / 2  # noqa: E731  (the gradient lives on Hermitian inputs)
    assert torch.autograd.gradcheck(lambda t: torch.linalg.cholesky(herm(t)), (x,))
    assert torch.autograd.gradcheck(lambda t, y: torch.cholesky_solve(y, torch.linalg.cholesky(herm(t))), (x, b))
    assert torch.autograd.gradcheck(lambda t: torch.cholesky_inverse(torch.linalg.cholesky(herm(t))), (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
@pytest.mark.parametrize("n", [1, 3, 16, 40])
def test_cholesky_ex_not_positive_definite(dtype, n):
    """info, and the factor the CPU leaves: the columns before the failing
    one, the failing diagonal entry, the input's lower triangle after."""
    order = max(1, n // 2)
    a = torch.stack([hpd(n, dtype=dtype), not_pd(n, order, dtype), -torch.eye(n, dtype=dtype)])
    for upper in (False, True):
        check(lambda t: torch.linalg.cholesky_ex(t, upper=upper), a, **DTOL[dtype])
    l, info = torch.linalg.cholesky_ex(a.to(DEV))
    assert info.tolist() == [0, order, 1]


def test_ex_forms_return_info_and_non_ex_raise():
    sing = torch.stack([torch.eye(3) + 1, torch.zeros(3, 3), torch.tensor([[1.0, 2, 3], [2, 4, 6], [0, 1, 1]])])
    for dtype in (torch.float32, torch.complex128):
        a = sing.to(dtype)
        for fn in (lambda t: torch.linalg.inv_ex(t).info, lambda t: torch.linalg.lu_factor_ex(t),
                   lambda t: torch.linalg.solve_ex(t, torch.ones(3, 1, dtype=dtype, device=t.device)).info,
                   lambda t: torch.linalg.inv_ex(t[:1]).inverse):
            check(fn, a, noncontig=False)
        # the invertible element's inverse is the CPU's whatever the others are
        torch.testing.assert_close(torch.linalg.inv_ex(a.to(DEV)).inverse[0].cpu(), torch.linalg.inv(a[0]),
                                   **DTOL[dtype])
    non_pd = torch.stack([torch.eye(3), -torch.eye(3)])
    cases = [(torch.linalg.cholesky, non_pd), (torch.linalg.cholesky, non_pd[1]),
             (lambda t: torch.linalg.cholesky_ex(t, check_errors=True), non_pd),
             (torch.linalg.inv, sing), (torch.linalg.inv, sing[1]),
             (lambda t: torch.linalg.inv_ex(t, check_errors=True), sing),
             (lambda t: torch.linalg.lu_factor_ex(t, check_errors=True), sing),
             (lambda t: torch.linalg.solve_ex(t, t[..., :1], check_errors=True), sing),
             (torch.cholesky_inverse, sing), (torch.cholesky_inverse, sing[1])]
    for fn, x in cases:
        with pytest.raises(RuntimeError) as cpu:
            fn(x)
        with pytest.raises(RuntimeError) as dev:
            r = fn(x.to(DEV))
            (r[0] if isinstance(r, tuple) else r).cpu()
        # the CPU's exception (torch.linalg.LinAlgError but for lu_factor's
        # RuntimeError) and message (a RuntimeError's may name the aten op
        # first; a LinAlgError's is the CPU's word for word)
        assert type(dev.value) is type(cpu.value)
        assert str(dev.value).endswith(str(cpu.value))
        if isinstance(cpu.value, torch.linalg.LinAlgError):
            assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation(dtype, use_gelu):
    """_addmm_activation (what Linear + relu/gelu fuse into): addmm rounded
    to the dtype, then relu or exact gelu; out= and non-contiguous forms."""
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.bfloat16 else {}
    s, a, b = mk(3, 5, dtype=dtype, seed=1), mk(3, 4, dtype=dtype, seed=2), mk(4, 5, dtype=dtype, seed=3)
    check(lambda x, y, z: torch._addmm_activation(x, y, z, use_gelu=use_gelu), s, a, b, **tol)
    check(lambda x, y, z: torch._addmm_activation(x, y, z, beta=0.5, alpha=2, use_gelu=use_gelu),
          s[0], a, b, **tol)
    out_c = torch.empty(3, 5, dtype=dtype)
    out_t = out_c.to(DEV)
    s, a, b = s.detach(), a.detach(), b.detach()
    torch._addmm_activation(s, a, b, use_gelu=use_gelu, out=out_c)
    torch._addmm_activation(s.to(DEV), a.to(DEV), b.to(DEV), use_gelu=use_gelu, out=out_t)
    torch.testing.assert_close(out_t.cpu(), out_c, **tol)


# ------------------------------------------------------------------ complex add forms


ADD_FORMS = [
    (torch.addmm, (3, 4), (3, 5), (5, 4)),
    (torch.addmv, (3,), (3, 5), (5,)),
    (torch.baddbmm, (2, 3, 4), (2, 3, 5), (2, 5, 4)),
    (torch.addbmm, (3, 4), (2, 3, 5), (2, 5, 4)),
]


@pytest.mark.parametrize("dtype", CPLX)
@pytest.mark.parametrize("fn,s,a,b", ADD_FORMS, ids=[f[0].__name__ for f in ADD_FORMS])
def test_add_forms_complex(dtype, fn, s, a, b):
    tol = DTOL[dtype]
    args = [rand(*x, dtype=dtype, seed=i).requires_grad_() for i, x in enumerate((s, a, b))]
    for beta, alpha in ((1, 1), (0.5j, 2 - 1j), (0, 1j)):
        check_fb(lambda s, a, b: fn(s, a, b, beta=beta, alpha=alpha), *args, noncontig=True, **tol)
    # self broadcast, in-place and out=
    check(lambda s, a, b: fn(s, a, b, alpha=1j), rand(*s[-1:], dtype=dtype), *args[1:], **tol)
    name = fn.__name__ + "_"

    def inplace(s, a, b):
        s = s.clone()
        getattr(s, name)(a, b, beta=0.5j, alpha=2)
        return s

    check(inplace, *[t.detach() for t in args], **tol)
    out = torch.empty(0, dtype=dtype, device=DEV)
    fn(*[t.detach().to(DEV) for t in args], beta=1j, out=out)
    assert_close(out, fn(*[t.detach() for t in args], beta=1j), **tol)
    # beta 0 ignores a NaN self, as on the CPU
    nan = torch.full(s, complex(float("nan"), 0), dtype=dtype)
    check(lambda s, a, b: fn(s, a, b, beta=0), nan, *[t.detach() for t in args[1:]], noncontig=False, **tol)


@pytest.mark.parametrize("fn,s,a,b", ADD_FORMS, ids=[f[0].__name__ for f in ADD_FORMS])
@pytest.mark.parametrize("which", ["alpha", "beta"])
def test_add_forms_refuse_complex_scalar_for_real_tensors(fn, s, a, b, which):
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int64):
        # (read back: a data-dependent refusal, raised where fused mode runs it)
        same_error(lambda d: fn(*[rand(*x, dtype=dtype, seed=i).to(d) for i, x in enumerate((s, a, b))],
                                **{which: 1j}).cpu())
    # a complex value without an imaginary part is a real one
    check(lambda s, x, y: fn(s, x, y, **{which: 2 + 0j}), rand(*s), rand(*a), rand(*b), noncontig=False)


# ------------------------------------------------------------------ operand layouts


def _programs(op):
    return sum(1 for c in torchtpu.debug.compiles() if c["what"] == op)


def test_product_layouts_compile_few_programs():
    """Every permutation of a bmm's operands and of its out= gives the CPU's
    values through one program per pair of operand layouts the product
    reads directly (row- or column-major, batch outermost or broadcast);
    the other layouts are copied, and so is a strided out=."""

    B, M, N, O = 3, 7, 11, 13  # sizes no other test uses: every program here is new
    a, b = rand(B, M, N, seed="perm-a"), rand(B, N, O, seed="perm-b")
    want = torch.bmm(a, b)
    with torchtpu.set_eager_mode("strict"):  # one program per op, to count
        _bmm_layouts(a, b, want, B, M, N, O)


def _bmm_layouts(a, b, want, B, M, N, O):
    import itertools

    torchtpu.debug.compiles(clear=True)
    for pa, pb, po in itertools.product(itertools.permutations(range(3)), repeat=3):
        if pb != (0, 1, 2) and pa != (0, 1, 2):
            continue
        inv = lambda p: tuple(p.index(i) for i in range(3))  # noqa: E731
        x = a.permute(pa).contiguous().permute(inv(pa)).to(DEV)
        y = b.permute(pb).contiguous().permute(inv(pb)).to(DEV)
        out = torch.full((B, M, O), float("nan")).permute(po).contiguous().permute(inv(po)).to(DEV)
        assert_close(torch.bmm(x, y), want)
        r = torch.bmm(x, y, out=out)
        assert r is out and out.stride() == torch.empty(B, M, O).permute(po).contiguous().permute(inv(po)).stride()
        assert_close(out, want)
    # broadcast batches and rows
    for x, y in ((a[:1].expand(B, M, N), b), (a, b[:, :1].expand(B, N, O)), (a[:, :, :1].expand(B, M, N), b)):
        assert_close(torch.bmm(x.to(DEV), y.to(DEV)), torch.bmm(x, y))
    torch.tpu.synchronize()
    # (row, row), (row, column), (column, row), and the broadcast batch:
    # 4, where every stride pattern would compile 6 x 6 x 6
    assert _programs("bmm") <= 4, torchtpu.debug.compiles()
    # the same pairs into an out= that holds values or a fresh stand-in
    assert _programs("bmm.out") <= 6, torchtpu.debug.compiles()


def test_solve_triangular_layouts_compile_one_program():
    a = torch.linalg.qr(rand(9, 9, seed="st-a", dtype=torch.float64)).R + 4 * torch.eye(9, dtype=torch.float64)
    b = rand(2, 9, 5, seed="st-b", dtype=torch.float64)
    with torchtpu.set_eager_mode("strict"):  # one program per op, to count
        _solve_layouts(a, b)


def _solve_layouts(a, b):
    want = torch.linalg.solve_triangular(a, b, upper=True)
    torchtpu.debug.compiles(clear=True)
    for x in (a, a.mT.contiguous().mT, a.expand(2, 9, 9)):
        for y in (b, b.mT.contiguous().mT, b[:1].expand(2, 9, 5)):
            w = torch.linalg.solve_triangular(x, y, upper=True)
            got = torch.linalg.solve_triangular(x.to(DEV), y.to(DEV), upper=True)
            assert_close(got, w, atol=1e-10, rtol=1e-10)
            out = y.clone().to(DEV) if y.is_contiguous() or y.mT.is_contiguous() else y.to(DEV).clone()
            torch.linalg.solve_triangular(x.to(DEV), y.to(DEV), upper=True, out=out)
            assert_close(out, w, atol=1e-10, rtol=1e-10)
    assert_close(torch.linalg.solve_triangular(a.to(DEV), b.to(DEV), upper=True), want, atol=1e-10, rtol=1e-10)
    torch.tpu.synchronize()
    # a 9x9 solve of a (2, 9, 5) and of a (9, 5) right-hand side (the
    # broadcast batch's storage), nothing per stride pattern
    assert _programs("linalg_solve_triangular") <= 3, torchtpu.debug.compiles()


def test_product_into_strided_out_and_inplace_views():
    """The contiguous stand-in of a strided written operand is copied into
    place: the rest of the base tensor is untouched, in-place reads self."""
    base = torch.zeros(4, 6, 5)
    a, b = rand(4, 3, 2, seed="ip-a"), rand(4, 2, 5, seed="ip-b")

    def fn(base, a, b):
        x = base.clone()
        torch.bmm(a, b, out=x[:, ::2])             # a strided out=
        x[:, 1::2].baddbmm_(a, b, alpha=2)          # an in-place self with gaps
        x.transpose(0, 1)[3:].baddbmm_(a.transpose(0, 1), b[:1].expand(3, 2, 5))
        return x

    check(fn, base, a, b, noncontig=False)


@pytest.mark.parametrize("dtype", CPLX)
def test_cross_complex(dtype):
    tol = DTOL[dtype]
    a = rand(4, 3, dtype=dtype, seed="cx-a").requires_grad_()
    b = rand(4, 3, dtype=dtype, seed="cx-b").requires_grad_()
    check_fb(torch.linalg.cross, a, b, noncontig=True, **tol)
    check(lambda x, y: torch.linalg.cross(x, y, dim=0), a.detach().mT, b.detach()[:1].mT, **tol)
    check(lambda x, y: torch.cross(x, y, dim=1), a.detach(), b.detach(), **tol)


@pytest.mark.parametrize("dtype", CPLX)
def test_vdot_complex_conjugates_first(dtype):
    tol = DTOL[dtype]
    a = rand(7, dtype=dtype, seed="vd-a").requires_grad_()
    b = rand(7, dtype=dtype, seed="vd-b").requires_grad_()
    check_fb(torch.vdot, a, b, noncontig=True, **tol)
    check(lambda x, y: torch.vdot(x.conj(), y), a.detach(), b.detach(), **tol)
    out = torch.empty((), dtype=dtype, device=DEV)
    torch.vdot(a.detach().to(DEV), b.detach().to(DEV), out=out)
    assert_close(out, torch.vdot(a.detach(), b.detach()), **tol)
