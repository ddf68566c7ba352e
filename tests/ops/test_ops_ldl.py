"""linalg.ldl_factor_ex / ldl_factor / ldl_solve (Bunch-Kaufman, LAPACK's
sytrf/hetrf conventions) on tpu against the CPU: the same factors and the
same pivots, 2x2 blocks included."""
import pytest
import torch

from optest import DEV, check

TOL = dict(atol=1e-5, rtol=1e-5)


def sym(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*shape, generator=g, dtype=dtype)
    return a + a.mT


# Indefinite matrices whose pivot search takes 2x2 blocks, with and without
# interchanges; the zero diagonal forces one at the first step.
HAND = torch.tensor([[0.0, 1, 2], [1, 0, 3], [2, 3, 0]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [(5, 5), (4, 6, 6), (2, 3, 12, 12), (40, 40), (1, 1), (0, 0), (3, 0, 0)])
def test_factor_matches_cpu(dtype, shape):
    a = sym(*shape, dtype=dtype)
    hermitians = (False, True) if dtype.is_complex else (False,)
    for herm in hermitians:
        tol = TOL if dtype in (torch.float64, torch.complex128) else dict(atol=2e-4, rtol=2e-4)
        check(lambda t: torch.linalg.ldl_factor_ex(t, hermitian=herm), a, **tol)


def test_two_by_two_pivots_and_lower_triangle_only():
    lu, piv, info = torch.linalg.ldl_factor_ex(HAND.to(DEV))
    assert piv.tolist() == [-3, -3, 3] and info.item() == 0
    check(lambda t: torch.linalg.ldl_factor_ex(t), HAND)
    # only the lower triangle is read: garbage above the diagonal changes nothing
    junk = HAND.tril() + torch.full((3, 3), 7.0).triu(1)
    check(lambda t: torch.linalg.ldl_factor(t), junk)
    # a Hermitian input's diagonal is taken real, as hetrf does
    h = sym(5, 5, dtype=torch.complex128) + 0.5j * torch.eye(5)
    check(lambda t: torch.linalg.ldl_factor(t, hermitian=True), h)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_solve_matches_cpu(dtype):
    a = sym(4, 7, 7, dtype=dtype, seed=1)
    g = torch.Generator().manual_seed(2)
    b = torch.randn(4, 7, 3, generator=g, dtype=dtype)
    for herm in ((False, True) if dtype.is_complex else (False,)):
        ld, piv = torch.linalg.ldl_factor(a, hermitian=herm)
        tol = TOL if dtype in (torch.float64, torch.complex128) else dict(atol=1e-3, rtol=1e-3)
        check(lambda f, p, y: torch.linalg.ldl_solve(f, p, y, hermitian=herm), ld, piv, b, **tol)
        # the solution solves the system
        x = torch.linalg.ldl_solve(ld.to(DEV), piv.to(DEV), b.to(DEV), hermitian=herm).cpu()
        full = a.tril() + (a.tril(-1).mH if herm else a.tril(-1).mT)
        if herm:
            full = full - 1j * torch.diag_embed(full.diagonal(0, -2, -1).imag)
        assert torch.allclose(full @ x, b, **tol)


def test_solve_broadcasts_and_writes_out():
    a = sym(6, 6)
    ld, piv = torch.linalg.ldl_factor(a)
    b = torch.randn(3, 6, 2, dtype=torch.float64)
    check(lambda f, p, y: torch.linalg.ldl_solve(f, p, y), ld, piv, b, **TOL)
    out = torch.empty(0, dtype=torch.float64, device=DEV)
    torch.linalg.ldl_solve(ld.to(DEV), piv.to(DEV), b.to(DEV), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.ldl_solve(ld, piv, b), **TOL)
    outs = (torch.empty(0, device=DEV), torch.empty(0, dtype=torch.int32, device=DEV),
            torch.empty(0, dtype=torch.int32, device=DEV))
    torch.linalg.ldl_factor_ex(HAND.to(DEV), out=outs)
    exp = torch.linalg.ldl_factor_ex(HAND)
    for o, e in zip(outs, exp):
        torch.testing.assert_close(o.cpu(), e)


def test_singular_info_and_errors():
    z = torch.zeros(2, 3, 3)
    check(lambda t: torch.linalg.ldl_factor_ex(t), z)
    with pytest.raises(RuntimeError, match="ldl_factor_ex: \\(Batch element 0\\): Unknown error code: 1"):
        torch.linalg.ldl_factor_ex(z.to(DEV), check_errors=True)
    with pytest.raises(RuntimeError, match="Unknown error code: 1"):
        torch.linalg.ldl_factor(z[0].to(DEV))
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
        torch.linalg.ldl_factor(torch.zeros(3, 3, dtype=torch.int64, device=DEV))
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        torch.linalg.ldl_factor(torch.zeros(3, 2, device=DEV))
    ld, piv = torch.linalg.ldl_factor(HAND.to(DEV))
    with pytest.raises(RuntimeError, match="Incompatible matrix sizes for torch.linalg.ldl_solve"):
        torch.linalg.ldl_solve(ld, piv, torch.zeros(4, 2, device=DEV))
    with pytest.raises(RuntimeError, match="Expected b and A to have the same dtype"):
        torch.linalg.ldl_solve(ld, piv, torch.zeros(3, 2, dtype=torch.float64, device=DEV))



def test_half_dtypes_refused_as_on_cpu():
    for dev in ("cpu", DEV):
        with pytest.raises(NotImplementedError, match="\"ldl_factor_kernel_cpu\" not implemented for 'BFloat16'"):
            torch.linalg.ldl_factor(torch.eye(3, dtype=torch.bfloat16, device=dev))
        with pytest.raises(NotImplementedError, match="\"ldl_solve_kernel_cpu\" not implemented for 'BFloat16'"):
            torch.linalg.ldl_solve(torch.eye(3, dtype=torch.bfloat16, device=dev),
                                   torch.ones(3, dtype=torch.int32, device=dev),
                                   torch.ones(3, 1, dtype=torch.bfloat16, device=dev))
