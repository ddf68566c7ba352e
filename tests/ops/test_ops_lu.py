"""LU factorization and what is built on it (solve, inv, det, slogdet,
lu_solve, lu_unpack) on tpu against CPU."""
import pytest
import torch

from optest import DEV, check, rand

TOL = dict(atol=1e-4, rtol=1e-4)


def mat(*shape, seed=0, requires_grad=False):
    n = shape[-1]
    a = rand(*shape, seed=seed) + 2 * torch.eye(shape[-2], n)
    return a.requires_grad_(requires_grad)


def test_lu_factor_and_unpack():
    a = mat(2, 5, 5)
    check(lambda t: torch.linalg.lu_factor_ex(t), a, **TOL)
    check(lambda t: torch.linalg.lu(t), mat(2, 5, 5, requires_grad=True), grad=True, **TOL)
    check(lambda t: torch.linalg.lu(t), mat(4, 6), **TOL)  # wide
    check(lambda t: torch.linalg.lu(t), mat(6, 4), **TOL)  # tall
    lu, piv = torch.linalg.lu_factor(a)
    check(lambda x, p: torch.lu_unpack(x, p), lu, piv, **TOL)
    check(lambda x, p: torch.lu_unpack(x, p, unpack_data=False), lu, piv, noncontig=False)


def test_lu_zero_pivot_info():
    a = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    check(lambda t: torch.linalg.lu_factor_ex(t), torch.stack([a, torch.eye(2)]))


@pytest.mark.parametrize("left,adjoint", [(True, False), (True, True), (False, False), (False, True)])
def test_lu_solve(left, adjoint):
    lu, piv = torch.linalg.lu_factor(mat(2, 4, 4))
    b = rand(2, 4, 3, seed=1) if left else rand(2, 3, 4, seed=1)
    check(lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint), lu, piv, b, **TOL)


@pytest.mark.parametrize("left", [True, False])
def test_solve(left):
    a = mat(2, 4, 4, requires_grad=True)
    b = rand(2, 4, 3, seed=1, requires_grad=True) if left else rand(2, 3, 4, seed=1, requires_grad=True)
    check(lambda x, y: torch.linalg.solve(x, y, left=left), a, b, grad=True, **TOL)
    check(lambda x, y: torch.linalg.solve(x, y), a, rand(2, 4, seed=2, requires_grad=True), grad=True, **TOL)
    check(lambda x, y: torch.linalg.solve(x[0], y, left=left), a, b, **TOL)  # broadcast batch


def test_inv_det_slogdet():
    a = mat(3, 4, 4, requires_grad=True)
    check(torch.linalg.inv, a, grad=True, **TOL)
    check(torch.linalg.det, a, grad=True, **TOL)
    check(torch.linalg.slogdet, a, grad=True, **TOL)
    check(torch.logdet, a @ a.mT, **TOL)
    check(torch.linalg.det, torch.zeros(0, 0))
    neg = torch.tensor([[0.0, 1.0], [1.0, 0.0]])  # one row swap: det -1
    check(torch.linalg.det, neg)


def test_singular_inverse_raises():
    a = torch.zeros(3, 3)
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            torch.linalg.inv(a.to(dev))
    check(lambda t: torch.linalg.inv_ex(t)[1], a)


def test_lu_rejects_bfloat16_and_no_pivot():
    a = mat(3, 3)
    for dev in ("cpu", DEV):
        with pytest.raises(NotImplementedError):
            torch.linalg.lu_factor(a.to(torch.bfloat16).to(dev))
        with pytest.raises(RuntimeError):
            torch.linalg.lu_factor(a.to(dev), pivot=False)


CTOL = {torch.complex64: dict(atol=1e-4, rtol=1e-4), torch.complex128: dict(atol=1e-9, rtol=1e-9)}


def cmat(*shape, dtype=torch.complex64, seed=0):
    return rand(*shape, dtype=dtype, seed=seed) + 2 * torch.eye(shape[-2], shape[-1], dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3, 3), (16, 16)])
def test_complex_lu_family(dtype, shape):
    """Pivots on |re| + |im| as LAPACK: LU, pivots, P L U are the CPU's."""
    a, tol = cmat(*shape, dtype=dtype), CTOL[dtype]
    if shape[-1] >= 16:  # every op compiles a program of its own: the two that matter
        check(torch.linalg.lu_factor_ex, a, noncontig=False, **tol)
        check(torch.linalg.slogdet, a, noncontig=False, **tol)
        return
    check(torch.linalg.lu_factor_ex, a, **tol)
    check(torch.linalg.lu, a, **tol)
    check(torch.linalg.inv, a, **tol)
    check(torch.linalg.inv_ex, a, **tol)
    check(torch.linalg.det, a, **tol)
    check(torch.linalg.slogdet, a, **tol)
    lu, piv = torch.linalg.lu_factor(a)
    b = rand(*shape[:-1], 2, dtype=dtype, seed=1)
    for left, adjoint in [(True, False), (True, True), (False, False), (False, True)]:
        bb = b if left else b.mT.contiguous()
        check(lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint), lu, piv, bb, **tol)
    check(torch.linalg.solve, a, b, **tol)


def test_complex_lu_size_40():
    check(torch.linalg.lu_factor_ex, cmat(40, 40, dtype=torch.complex64), **CTOL[torch.complex64])


def test_lu_past_256_columns():
    """The factorization loops at run time: no size limit, the CPU's
    pivots, solve, inverse and determinant at n = 300."""
    a = rand(300, 300, dtype=torch.float64) + 4 * torch.eye(300, dtype=torch.float64)
    check(torch.linalg.lu_factor_ex, a, noncontig=False, atol=1e-9, rtol=1e-9)
    b = rand(300, 2, dtype=torch.float64, seed=1)
    check(torch.linalg.solve, a, b, noncontig=False, atol=1e-9, rtol=1e-9)
    check(torch.linalg.slogdet, a, noncontig=False, atol=1e-9, rtol=1e-9)
    c = cmat(2, 260, 260, dtype=torch.complex64)
    check(torch.linalg.inv_ex, c, noncontig=False, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128])
def test_lu_solve_broadcasting_and_out(dtype):
    """Batch broadcasting between the factorization and B, as PyTorch's
    test_lu_solve_batched_broadcasting does; the out= form."""
    tol = CTOL.get(dtype, TOL)
    a = cmat(2, 1, 5, 5, dtype=dtype) if dtype.is_complex else mat(2, 1, 5, 5)
    lu, piv = torch.linalg.lu_factor(a)
    b = rand(3, 5, 4, dtype=dtype, seed=2)
    for left, adjoint in [(True, False), (True, True)]:
        check(lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint), lu, piv, b, **tol)
    check(lambda x, p, y: torch.linalg.lu_solve(x[0, 0], p[0, 0], y), lu, piv, b, **tol)
    out_c = torch.empty(0, dtype=dtype)
    out_t = out_c.to(DEV)
    torch.linalg.lu_solve(lu, piv, b, out=out_c)
    torch.linalg.lu_solve(lu.to(DEV), piv.to(DEV), b.to(DEV), out=out_t)
    torch.testing.assert_close(out_t.cpu(), out_c, **tol)


def test_complex_lu_wide_tall_singular():
    dt = torch.complex64
    check(torch.linalg.lu, cmat(4, 6, dtype=dt), **CTOL[dt])
    check(torch.linalg.lu, cmat(6, 4, dtype=dt), **CTOL[dt])
    sing = torch.stack([cmat(3, 3, dtype=dt), torch.zeros(3, 3, dtype=dt)])
    check(torch.linalg.lu_factor_ex, sing)
    check(torch.linalg.det, sing, **CTOL[dt])
    check(torch.linalg.slogdet, sing, **CTOL[dt])


def test_complex_lu_backward():
    dt = torch.complex128
    a = cmat(2, 3, 3, dtype=dt).requires_grad_()
    for fn in (torch.linalg.inv, torch.linalg.det, lambda t: torch.linalg.slogdet(t)[1], torch.linalg.lu):
        check(fn, a, grad=True, noncontig=False, **CTOL[dt])
    x = cmat(3, 3, dtype=dt).to(DEV).requires_grad_()
    b = rand(3, 2, dtype=dt, seed=1).to(DEV).requires_grad_()
    assert torch.autograd.gradcheck(torch.linalg.inv, (x,))
    assert torch.autograd.gradcheck(torch.linalg.det, (x,))
    assert torch.autograd.gradcheck(torch.linalg.solve, (x, b))


@pytest.mark.parametrize("n,dtype", [(128, torch.float64), (130, torch.float32), (160, torch.complex128)])
def test_blocked_lu_matches_cpu(n, dtype):
    # order 128 and up factor in panels; the pivots and factors are the CPU's
    g = torch.Generator().manual_seed(n)
    a = torch.randn(2, n, n, generator=g, dtype=dtype)
    lu_c, piv_c, info_c = torch.linalg.lu_factor_ex(a)
    lu_t, piv_t, info_t = torch.linalg.lu_factor_ex(a.to(DEV))
    assert torch.equal(piv_t.cpu(), piv_c) and torch.equal(info_t.cpu(), info_c)
    tol = 1e-9 if dtype in (torch.float64, torch.complex128) else 2e-3
    torch.testing.assert_close(lu_t.cpu(), lu_c, atol=tol, rtol=tol)
    b = torch.randn(2, n, 3, generator=g, dtype=dtype)
    x = torch.linalg.solve(a.to(DEV), b.to(DEV)).cpu()
    torch.testing.assert_close(a @ x, b, atol=100 * tol, rtol=100 * tol)
    torch.testing.assert_close(torch.linalg.det(a.to(DEV)).cpu(), torch.linalg.det(a), atol=0, rtol=1e3 * tol)


def test_blocked_lu_singular_info():
    # a zero column in the second panel: info names it, as the CPU's does
    a = torch.randn(140, 140, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    a[:, 50] = 0
    check(lambda t: torch.linalg.lu_factor_ex(t), a, atol=1e-9, rtol=1e-9)
    inv, info = torch.linalg.inv_ex(a.to(DEV))
    assert info.item() == torch.linalg.inv_ex(a)[1].item() == 51
