"""Householder QR (geqrf, linalg.qr, householder_product, ormqr) on tpu
against CPU: same signs as LAPACK, so Q and R match exactly."""
import pytest
import torch

from optest import DEV, check, rand, same_error

TOL = dict(atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_linalg_qr(shape, mode):
    a = rand(*shape, requires_grad=True)
    check(lambda t: torch.linalg.qr(t, mode=mode), a, grad=mode == "reduced" and shape[-2] >= shape[-1], **TOL)


def test_qr_zero_column_and_orthogonal_init():
    a = torch.tensor([[0.0, 1.0], [0.0, 2.0], [0.0, 3.0]])
    check(torch.linalg.qr, a, **TOL)
    # orthogonal_ draws on the device's generator: check what it promises
    wt = torch.nn.init.orthogonal_(torch.empty(6, 4, device=DEV)).cpu()
    torch.testing.assert_close(wt.T @ wt, torch.eye(4), **TOL)


def test_geqrf_householder_ormqr():
    a = rand(2, 5, 3)
    check(torch.geqrf, a, **TOL)
    f, tau = torch.geqrf(a)
    check(torch.linalg.householder_product, f, tau, **TOL)
    c = rand(2, 5, 4, seed=1)
    for left, tr in [(True, False), (True, True)]:
        check(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=tr), f, tau, c, **TOL)
    cr = rand(2, 4, 5, seed=2)
    for tr in (False, True):
        check(lambda x, t, y: torch.ormqr(x, t, y, left=False, transpose=tr), f, tau, cr, **TOL)


def test_qr_rejects_bfloat16():
    for dev in ("cpu", DEV):
        with pytest.raises(NotImplementedError):
            torch.linalg.qr(torch.ones(3, 3, dtype=torch.bfloat16, device=dev))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sizes", [
    # PyTorch's test_ormqr_errors_and_warnings: input, tau, other
    ((10,), (2,), (2,)),
    ((2, 2), (2,), (2,)),
    ((10, 6), (20,), (10, 6)),
    ((6, 6), (5,), (5, 5)),
    ((1, 2, 2), (2, 2), (1, 2, 2)),
    ((1, 2, 2), (1, 2), (2, 2, 2)),
])
def test_ormqr_argument_errors_as_cpu(sizes, dtype):
    a, t, c = (rand(*s, seed=i).to(dtype) for i, s in enumerate(sizes))
    same_error(lambda d: torch.ormqr(a.to(d), t.to(d), c.to(d)))


def test_ormqr_dtype_and_out_errors_as_cpu():
    a, t, c = rand(4, 3), rand(3, seed=1), rand(4, 2, seed=2)
    same_error(lambda d: torch.ormqr(a.to(d), t.double().to(d), c.to(d)))
    same_error(lambda d: torch.ormqr(a.to(d), t.to(d), c.double().to(d)))
    same_error(lambda d: torch.ormqr(a.int().to(d), t.int().to(d), c.int().to(d)))
    same_error(lambda d: torch.ormqr(a.to(d), t.to(d), c.to(d), out=torch.empty(0, dtype=torch.int32, device=d)))
    same_error(lambda d: torch.ormqr(a.to(d), t.to(d), rand(4, 2, seed=3).to(d), left=False))


# shapes with a dimension of 1 (a [2, 1] operand once failed to lower)
ONES = [(1, 1), (2, 1), (3, 1), (1, 3), (2, 3, 1), (2, 1, 3), (2, 1, 1)]


@pytest.mark.parametrize("shape", ONES)
def test_dimension_of_one(shape):
    a = rand(*shape, requires_grad=True)
    for mode in ("reduced", "complete", "r"):
        check(lambda t: torch.linalg.qr(t, mode=mode), a, grad=mode == "reduced" and shape[-2] >= shape[-1],
              **TOL)
    check(torch.geqrf, a.detach(), **TOL)
    f, tau = torch.geqrf(a.detach())
    k = min(shape[-2:])
    check(torch.linalg.householder_product, f[..., :k], tau, **TOL)
    c = rand(*shape[:-2], shape[-2], 2, seed=1)
    check(lambda x, t, y: torch.ormqr(x, t, y, transpose=True), f, tau, c, **TOL)
    check(lambda x, t, y: torch.ormqr(x, t, y, left=False), f, tau, c.mT.contiguous(), **TOL)


CTOL = {torch.complex64: dict(atol=1e-4, rtol=1e-4), torch.complex128: dict(atol=1e-10, rtol=1e-10)}


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (5, 3), (3, 5), (2, 4, 4), (16, 16)])
def test_complex_qr(dtype, shape):
    """zgeqrf's conventions (real beta, complex tau): Q, R, the reflectors
    and tau are the CPU's, not only up to phase."""
    a = rand(*shape, dtype=dtype)
    tol = CTOL[dtype]
    if shape[-1] >= 16:  # one program per op: the one that matters
        check(torch.linalg.qr, a, noncontig=False, **tol)
        return
    for mode in ("reduced", "complete", "r"):
        check(lambda t: torch.linalg.qr(t, mode=mode), a, **tol)
    check(torch.geqrf, a, **tol)
    f, tau = torch.geqrf(a)
    check(torch.linalg.householder_product, f[..., :min(shape[-2:])], tau, **tol)
    c = rand(*shape[:-2], shape[-2], 2, dtype=dtype, seed=1)
    for left, tr in [(True, False), (True, True), (False, False), (False, True)]:
        cc = c if left else c.mT.contiguous()
        check(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=tr), f, tau, cc, **tol)
    q, r = torch.linalg.qr(a.to(DEV))
    torch.testing.assert_close((q @ r).cpu(), a, **tol)


def test_complex_qr_backward():
    a = rand(4, 3, dtype=torch.complex128, requires_grad=True)
    check(torch.linalg.qr, a, grad=True, noncontig=False, **CTOL[torch.complex128])
    f, tau = torch.geqrf(a.detach())
    check(torch.linalg.householder_product, f.requires_grad_(), tau.requires_grad_(), grad=True, noncontig=False,
          **CTOL[torch.complex128])
    x = rand(3, 2, dtype=torch.complex128, seed=1).to(DEV).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: torch.linalg.qr(t).R, (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_geqrf_is_column_major_and_ormqr_takes_it(dtype):
    """geqrf leaves the reflectors in LAPACK's column-major order, as the
    CPU does (PyTorch's test_ormqr asserts it), batched ones per matrix;
    ormqr takes them either way, over every batch PyTorch's test uses."""
    tol = CTOL.get(dtype, TOL)
    for batch in [(), (0,), (2,), (2, 1)]:
        for m, n in [(5, 5), (5, 2), (2, 5), (5, 0), (0, 5)]:
            a = rand(*batch, m, n, dtype=dtype)
            f_c, _ = torch.geqrf(a)
            f_t, tau = torch.geqrf(a.to(DEV))
            assert f_t.stride() == f_c.stride() and f_t.mT.is_contiguous()
            c = rand(*batch, m, 3, dtype=dtype, seed=1).to(DEV)
            for fac in (f_t, f_t.contiguous()):
                for tr in (False, True):
                    want = torch.ormqr(fac.cpu(), tau.cpu(), c.cpu(), left=True, transpose=tr)
                    got = torch.ormqr(fac, tau, c, left=True, transpose=tr)
                    torch.testing.assert_close(got.cpu(), want, **tol)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_qr_large(dtype):
    """The factorization loops at run time: sizes past the old 256-column
    limit, Q and R the CPU's."""
    a = rand(300, 280, dtype=dtype)
    check(torch.linalg.qr, a, noncontig=False, atol=1e-9, rtol=1e-9)
