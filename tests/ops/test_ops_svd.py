"""SVD (one-sided Jacobi in a loop) on tpu against CPU, through what is
unique: singular values, pinv, ranks, norms, U S Vh itself, and the
singular vectors up to sign or phase."""
import pytest
import torch

from optest import DEV, check, noncontiguous, rand

TOL = dict(atol=1e-4, rtol=1e-4)
F64 = dict(atol=1e-10, rtol=1e-10)


def crand(*shape, dtype=torch.complex64, seed=None):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    return torch.complex(rand(*shape, dtype=real, seed=seed), rand(*shape, dtype=real, seed=(seed, "im")))


def eye_like(k, batch, dtype):
    return torch.eye(k, dtype=dtype).expand(*batch, k, k)


def check_svd(a, full_matrices=False, tol=None):
    """U S Vh reconstructs a, U and Vh are orthonormal, S matches the CPU,
    and the singular vectors match the CPU's up to sign or phase (where the
    singular values are distinct)."""
    tol = tol or (F64 if a.dtype in (torch.float64, torch.complex128) else TOL)
    u, s, vh = (t.cpu() for t in torch.linalg.svd(a.to(DEV), full_matrices=full_matrices))
    ue, se, vhe = torch.linalg.svd(a, full_matrices=full_matrices)
    assert (u.shape, s.shape, vh.shape) == (ue.shape, se.shape, vhe.shape)
    scale = max(se.max().item(), 1.0) if se.numel() else 1.0
    torch.testing.assert_close(s / scale, se / scale, **tol)
    k = s.shape[-1]
    batch = a.shape[:-2]
    torch.testing.assert_close((u[..., :k] * s[..., None, :].to(u.dtype)) @ vh[..., :k, :] / scale, a / scale, **tol)
    torch.testing.assert_close(u.mH @ u, eye_like(u.shape[-1], batch, u.dtype), **tol)
    torch.testing.assert_close(vh @ vh.mH, eye_like(vh.shape[-2], batch, vh.dtype), **tol)
    # vectors of well separated singular values: |<u, u_cpu>| = 1
    gaps = torch.ones_like(se, dtype=torch.bool)
    if k > 1:
        rel = (se[..., :-1] - se[..., 1:]) / scale
        gaps[..., :-1] &= rel > 1e-2
        gaps[..., 1:] &= rel > 1e-2
    gaps &= se / scale > 1e-3
    dots = ((u[..., :k].mH @ ue[..., :k]).diagonal(dim1=-2, dim2=-1)).abs()
    torch.testing.assert_close(dots[gaps], torch.ones_like(dots[gaps]), atol=1e-3, rtol=0)
    return u, s, vh


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_svdvals_pinv(shape):
    a = rand(*shape, requires_grad=True)
    check(torch.linalg.svdvals, a, grad=True, **TOL)
    check(torch.linalg.pinv, a, grad=True, atol=1e-3, rtol=1e-3)  # pinv amplifies rounding by cond(a)^2
    check(lambda t: torch.linalg.matrix_norm(t, "nuc"), a, grad=True, **TOL)
    check(lambda t: torch.linalg.matrix_norm(t, 2), a, **TOL)
    check(torch.linalg.matrix_rank, a.detach())


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (5, 1), (16, 16), (17, 17), (40, 23), (23, 40), (100, 100), (3, 6, 5), (2, 2, 9, 7)])
def test_svd_against_cpu(shape):
    check_svd(rand(*shape))


@pytest.mark.parametrize("shape", [(17, 17), (31, 12), (12, 31), (2, 20, 20)])
def test_svd_float64(shape):
    check_svd(rand(*shape, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [(4, 3), (19, 19), (30, 21), (2, 13, 24)])
def test_svd_complex(shape, dtype):
    check_svd(crand(*shape, dtype=dtype))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (24, 17), (17, 24), (2, 20, 19)])
def test_svd_full_matrices(shape):
    check_svd(rand(*shape), full_matrices=True)


def test_svd_full_matrices_complex():
    check_svd(crand(21, 9, dtype=torch.complex128), full_matrices=True)


def test_svd_noncontiguous():
    a = rand(2, 30, 20)
    check_svd(noncontiguous(a))
    check_svd(a[:, ::2, 1:])


def test_svd_rank_deficient_and_ill_conditioned():
    a = rand(30, 3, seed=1) @ rand(3, 25, seed=2)  # rank 3
    check_svd(a, full_matrices=True)
    check_svd(a.mT.to(torch.float64), full_matrices=True)
    z = torch.zeros(20, 18)
    z[:, :5] = rand(20, 5)  # zero columns: U completed to a basis
    check_svd(z)
    check_svd(torch.zeros(3, 18, 18))
    # condition number 1e6 (float64: singular values to relative rounding)
    g = torch.Generator().manual_seed(0)
    q1, _ = torch.linalg.qr(torch.randn(40, 40, generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(30, 30, generator=g, dtype=torch.float64))
    s = torch.logspace(0, -6, 30, dtype=torch.float64)
    ill = q1[:, :30] * s @ q2.mT
    sv = torch.linalg.svdvals(ill.to(DEV)).cpu()
    torch.testing.assert_close(sv, torch.linalg.svdvals(ill), atol=0, rtol=1e-9)


def test_svd_rank_and_pinv_and_norms_above_16():
    a = rand(30, 4, seed=3) @ rand(4, 24, seed=4)  # rank 4
    check(torch.linalg.matrix_rank, a)
    check(torch.linalg.pinv, a, atol=1e-3, rtol=1e-3)
    b = rand(2, 26, 19, requires_grad=True)
    check(torch.linalg.pinv, b, grad=True, atol=1e-3, rtol=1e-3)
    check(lambda t: torch.linalg.matrix_norm(t, 2), b, grad=True, **TOL)
    check(lambda t: torch.linalg.matrix_norm(t, "nuc"), b, grad=True, **TOL)
    check(torch.linalg.cond, rand(20, 20) + 5 * torch.eye(20), **TOL)


def test_svd_reconstructs_and_is_orthonormal():
    a = rand(2, 5, 3)
    u, s, vh = torch.linalg.svd(a.to(DEV), full_matrices=False)
    u, s, vh = u.cpu(), s.cpu(), vh.cpu()
    torch.testing.assert_close(s, torch.linalg.svdvals(a), **TOL)
    torch.testing.assert_close(u @ torch.diag_embed(s) @ vh, a, **TOL)
    torch.testing.assert_close(u.mT @ u, torch.eye(3).expand(2, 3, 3), **TOL)
    torch.testing.assert_close(vh @ vh.mT, torch.eye(3).expand(2, 3, 3), **TOL)


def test_svd_rank_deficient_and_cond():
    a = rand(4, 2) @ rand(2, 4, seed=1)  # rank 2
    check(torch.linalg.matrix_rank, a)
    check(torch.linalg.pinv, a, **TOL)
    check(torch.linalg.cond, rand(3, 3) + 3 * torch.eye(3), **TOL)


def test_svd_gradcheck_float64():
    a = rand(4, 3, dtype=torch.float64).to(DEV).requires_grad_()

    def f(t):
        u, s, vh = torch.linalg.svd(t, full_matrices=False)
        return s, u @ vh  # gauge invariant

    assert torch.autograd.gradcheck(f, (a,))
    c = crand(3, 3, dtype=torch.complex128).to(DEV).requires_grad_()
    assert torch.autograd.gradcheck(torch.linalg.svdvals, (c,))


@pytest.mark.parametrize("shape", [(20, 12), (12, 20), (2, 17, 17)])
def test_svd_gauge_invariant_gradients_above_16(shape):
    a = rand(*shape, dtype=torch.float64, requires_grad=True)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(shape, generator=g, dtype=torch.float64)

    def loss(t, w):
        u, s, vh = torch.linalg.svd(t, full_matrices=False)
        return torch.linalg.svdvals(t).sum() + ((u * s[..., None, :]) @ vh * w).sum() + (u @ vh * w).sum()

    check(loss, a, w, grad=True, noncontig=False, atol=1e-8, rtol=1e-8)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4)])
def test_svd_without_singular_values_keeps_full_bases(shape):
    a = torch.randn(*shape)
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=True)
    ue, se, vhe = torch.linalg.svd(a, full_matrices=True)
    for got, ref in ((u, ue), (s, se), (vh, vhe)):
        assert got.shape == ref.shape
        torch.testing.assert_close(got.cpu(), ref)
