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
