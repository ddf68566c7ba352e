"""Householder QR (geqrf, linalg.qr, householder_product, ormqr) on tpu
against CPU: same signs as LAPACK, so Q and R match exactly."""
import pytest
import torch

from optest import DEV, check, rand

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
