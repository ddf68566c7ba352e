"""SVD (one-sided Jacobi) on tpu against CPU, through what is unique:
singular values, pinv, ranks, norms, and U S Vh itself."""
import pytest
import torch

from optest import DEV, check, rand

TOL = dict(atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_svdvals_pinv(shape):
    a = rand(*shape, requires_grad=True)
    check(torch.linalg.svdvals, a, grad=True, **TOL)
    check(torch.linalg.pinv, a, grad=True, atol=1e-3, rtol=1e-3)  # pinv amplifies rounding by cond(a)^2
    check(lambda t: torch.linalg.matrix_norm(t, "nuc"), a, grad=True, **TOL)
    check(lambda t: torch.linalg.matrix_norm(t, 2), a, **TOL)
    check(torch.linalg.matrix_rank, a.detach())


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


def test_svd_full_matrices_wide_unsupported():
    with pytest.raises(NotImplementedError):
        torch.linalg.svd(torch.ones(3, 5, device=DEV), full_matrices=True)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4)])
def test_svd_without_singular_values_keeps_full_bases(shape):
    a = torch.randn(*shape)
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=True)
    ue, se, vhe = torch.linalg.svd(a, full_matrices=True)
    for got, ref in ((u, ue), (s, se), (vh, vhe)):
        assert got.shape == ref.shape
        torch.testing.assert_close(got.cpu(), ref)
