"""Symmetric eigendecomposition (parallel-order Jacobi in a while loop) on
tpu against CPU. Eigenvalues, and everything built from the vectors that
does not depend on their sign (V diag(w) V^T, pinv, gauge-invariant
gradients), compare with the CPU; the vectors themselves are checked for
what defines them (A V = V diag(w), V^T V = I), not entry by entry."""
import pytest
import torch

from optest import DEV, check, rand

TOL = dict(atol=1e-4, rtol=1e-4)


def sym(*shape, seed=0):
    a = rand(*shape, seed=seed)
    return a + a.mT


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(5, 5), (2, 3, 4, 4), (1, 1)])
def test_eigvalsh(shape, uplo):
    a = rand(*shape).requires_grad_()  # not symmetric: only one triangle is read
    check(lambda t: torch.linalg.eigvalsh(t, UPLO=uplo), a, grad=True, **TOL)


@pytest.mark.parametrize("n", [2, 7, 24])
def test_eigh_defines_the_decomposition(n):
    a = sym(3, n, n, seed=n)
    w, v = torch.linalg.eigh(a.to(DEV))
    assert v.device.type == DEV
    w, v = w.cpu(), v.cpu()
    torch.testing.assert_close(w, torch.linalg.eigvalsh(a), **TOL)
    assert bool((w[..., 1:] >= w[..., :-1]).all())  # ascending, as LAPACK
    torch.testing.assert_close(a @ v, v * w.unsqueeze(-2), **TOL)
    torch.testing.assert_close(v.mT @ v, torch.eye(n).expand(3, n, n), **TOL)


def test_eigh_upper_noncontiguous_and_out():
    a = rand(4, 6, 6).transpose(-1, -2)  # non-contiguous
    w, v = torch.linalg.eigh(a.to(DEV), UPLO="U")
    s = a.triu() + a.triu(1).mT
    torch.testing.assert_close(w.cpu(), torch.linalg.eigvalsh(s), **TOL)
    torch.testing.assert_close((v * w.unsqueeze(-2)) @ v.mT, s.to(DEV), **TOL)
    ow, ov = torch.empty(0, device=DEV), torch.empty(0, device=DEV)
    torch.linalg.eigh(a.to(DEV), UPLO="U", out=(ow, ov))
    torch.testing.assert_close(ow.cpu(), w.cpu())
    assert v.stride() == torch.linalg.eigh(a, UPLO="U")[1].stride()  # column-major, as LAPACK


def test_eigh_repeated_eigenvalues():
    q, _ = torch.linalg.qr(rand(6, 6, seed=3))
    a = q @ torch.diag(torch.tensor([1.0, 1.0, 1.0, 2.0, -3.0, -3.0])) @ q.mT
    a = (a + a.mT) / 2
    w, v = torch.linalg.eigh(a.to(DEV))
    torch.testing.assert_close(w.cpu(), torch.tensor([-3.0, -3.0, 1.0, 1.0, 1.0, 2.0]), **TOL)
    torch.testing.assert_close((v * w.unsqueeze(-2) @ v.mT).cpu(), a, **TOL)
    w, _ = torch.linalg.eigh(torch.eye(3, device=DEV))  # already diagonal: no rotation at all
    torch.testing.assert_close(w.cpu(), torch.ones(3))


def test_eigh_gradients_gauge_invariant():
    a = sym(2, 5, 5).requires_grad_()
    # |V| and V diag(w) V^T do not depend on the vectors' signs
    check(lambda t: (lambda w, v: (w, v.abs(), v @ torch.diag_embed(w.exp()) @ v.mT))(*torch.linalg.eigh(t)),
          a, grad=True, noncontig=False, **TOL)


def test_hermitian_pinv_and_rank():
    a = sym(2, 5, 5)
    check(lambda t: torch.linalg.pinv(t, hermitian=True), a.requires_grad_(), grad=True, atol=1e-3, rtol=1e-3)
    low = rand(5, 2) @ rand(2, 5, seed=1)
    check(lambda t: torch.linalg.matrix_rank(t, hermitian=True), low + low.mT)


def test_float64_and_empty():
    a = sym(3, 3).double()
    check(torch.linalg.eigvalsh, a, atol=1e-10, rtol=1e-10)
    for shape in [(0, 0), (2, 0, 0), (0, 4, 4)]:
        w, v = torch.linalg.eigh(torch.zeros(shape, device=DEV))
        assert w.shape == shape[:-1] and v.shape == shape


def test_bad_input_raises_like_cpu():
    for bad, exc in [(torch.ones(3, 4), RuntimeError), (torch.ones(4), RuntimeError),
                     (torch.ones(3, 3, dtype=torch.bfloat16), NotImplementedError),
                     (torch.ones(3, 3, dtype=torch.int64), NotImplementedError)]:
        with pytest.raises(exc):
            torch.linalg.eigh(bad)
        with pytest.raises(exc):
            torch.linalg.eigh(bad.to(DEV))
    with pytest.raises(RuntimeError):
        torch.linalg.eigh(torch.ones(3, 3, device=DEV), UPLO="X")


def herm(*shape, dtype=torch.complex64, seed=0):
    a = rand(*shape, dtype=dtype, seed=seed)
    return a + a.mH


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3, 3), (16, 16), (40, 40)])
def test_complex_hermitian(dtype, shape):
    tol = TOL if dtype == torch.complex64 else dict(atol=1e-9, rtol=1e-9)
    a = herm(*shape, dtype=dtype)
    n = shape[-1]
    for uplo in ("L", "U"):
        check(lambda t: torch.linalg.eigvalsh(t, UPLO=uplo), rand(*shape, dtype=dtype), **tol)  # one triangle read
    w, v = torch.linalg.eigh(a.to(DEV))
    assert v.dtype == dtype and w.dtype == dtype.to_real()
    w, v = w.cpu(), v.cpu()
    torch.testing.assert_close(w, torch.linalg.eigvalsh(a), **tol)
    torch.testing.assert_close(a @ v, v * w.unsqueeze(-2).to(dtype), **tol)
    torch.testing.assert_close(v.mH @ v, torch.eye(n, dtype=dtype).expand_as(v), **tol)


def test_complex_hermitian_repeated_and_backward():
    q, _ = torch.linalg.qr(rand(5, 5, dtype=torch.complex128, seed=3))
    a = q @ torch.diag(torch.tensor([1.0, 1.0, 2.0, -3.0, -3.0], dtype=torch.complex128)) @ q.mH
    a = (a + a.mH) / 2
    w, v = torch.linalg.eigh(a.to(DEV))
    torch.testing.assert_close(w.cpu(), torch.tensor([-3.0, -3.0, 1.0, 1.0, 2.0], dtype=torch.float64))
    torch.testing.assert_close(((v * w.unsqueeze(-2)) @ v.mH).cpu(), a)
    x = herm(3, 3, dtype=torch.complex128).to(DEV).requires_grad_()
    sym = lambda t: (t + t.mH) / 2  # noqa: E731
    assert torch.autograd.gradcheck(lambda t: torch.linalg.eigvalsh(sym(t)), (x,))
    # V diag(f(w)) V^H does not depend on the vectors' phases
    assert torch.autograd.gradcheck(
        lambda t: (lambda w, v: v @ torch.diag_embed(w.exp().to(t.dtype)) @ v.mH)(*torch.linalg.eigh(sym(t))), (x,))
