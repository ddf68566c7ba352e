"""trace and the 3-vector cross product on tpu against CPU."""
import pytest
import torch

from optest import DEV, check, rand

FLOATS = [torch.float32, torch.bfloat16]


def test_trace_bool_not_implemented():
    for dev in ("cpu", DEV):
        with pytest.raises(NotImplementedError):
            torch.trace(torch.ones(2, 2, dtype=torch.bool, device=dev))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_trace(dtype):
    fl = dtype.is_floating_point
    try:
        torch.trace(torch.ones(2, 2, dtype=dtype))
    except NotImplementedError:
        # torch 2.11's CPU has no bfloat16 trace: the float32 one of the
        # same values is the reference
        x = rand(4, 6, dtype=dtype)
        want = torch.trace(x.float()).to(dtype)
        torch.testing.assert_close(torch.trace(x.to(DEV)).cpu(), want)
        return
    check(torch.trace, rand(4, 6, dtype=dtype, requires_grad=fl), grad=dtype == torch.float32)
    check(torch.trace, rand(5, 3, dtype=dtype))


def test_trace_rejects_non_matrix():
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            torch.trace(torch.ones(2, 3, 4, device=dev))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_cross(dtype):
    fl = dtype.is_floating_point
    a = rand(4, 3, dtype=dtype, requires_grad=fl)
    b = rand(4, 3, dtype=dtype, requires_grad=fl, seed=1)
    g = dtype == torch.float32
    check(torch.linalg.cross, a, b, grad=g)
    check(lambda x, y: torch.linalg.cross(x, y, dim=0), a.T.contiguous().detach(), b.T.contiguous().detach())
    check(lambda x, y: torch.linalg.cross(x, y[:1]), a, b, grad=g)  # broadcast
    check(lambda x, y: torch.cross(x, y, dim=1), a, b, grad=g)


def test_cross_rejects_wrong_size():
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            torch.linalg.cross(torch.ones(2, 4, device=dev), torch.ones(2, 4, device=dev))


def spd(n, batch=(), seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*batch, n, n, generator=g)
    return a @ a.mT + n * torch.eye(n)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper):
    a = spd(4, (2,)).requires_grad_(True)
    check(lambda t: torch.linalg.cholesky(t, upper=upper), a, grad=True, atol=1e-4, rtol=1e-4)
    check(lambda t: torch.linalg.cholesky_ex(t, upper=upper), a, atol=1e-4, rtol=1e-4)
    # torch.cholesky (deprecated since 1.9) raises from torch 2.14 on.
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 14):
        check(lambda t: torch.cholesky(t, upper=upper), a, atol=1e-4, rtol=1e-4)


def test_cholesky_not_positive_definite():
    a = torch.stack([spd(3), -torch.eye(3)])
    check(lambda t: torch.linalg.cholesky_ex(t)[1], a)
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            torch.linalg.cholesky(a.to(dev))
        with pytest.raises(RuntimeError):
            torch.linalg.cholesky_ex(a.to(dev), check_errors=True)[0].cpu()


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_inverse(upper):
    f = torch.linalg.cholesky(spd(4, (2,)), upper=upper).requires_grad_(True)
    rhs = rand(2, 4, 3, requires_grad=True)
    check(lambda b, u: torch.cholesky_solve(b, u, upper=upper), rhs, f, grad=True, atol=1e-4, rtol=1e-4)
    check(lambda u: torch.cholesky_inverse(u, upper=upper), f[0], grad=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("upper,left,unit", [(False, True, False), (True, True, True), (True, False, False)])
def test_solve_triangular(upper, left, unit):
    a = (rand(2, 4, 4) + 4 * torch.eye(4)).requires_grad_(True)
    b = rand(2, 4, 3, requires_grad=True, seed=1) if left else rand(2, 3, 4, requires_grad=True, seed=1)
    check(lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit),
          a, b, grad=True, atol=1e-4, rtol=1e-4)
    check(lambda x, y: torch.linalg.solve_triangular(x[0], y, upper=upper, left=left), a, b,
          atol=1e-4, rtol=1e-4)  # broadcast batch
    if left:
        check(lambda x, y: torch.triangular_solve(y, x, upper=upper, transpose=unit), a, b, grad=True,
              atol=1e-4, rtol=1e-4)


def test_lapack_ops_reject_bfloat16():
    a = spd(3).to(torch.bfloat16)
    for dev in ("cpu", DEV):
        with pytest.raises(NotImplementedError):
            torch.linalg.cholesky(a.to(dev))
        with pytest.raises(NotImplementedError):
            torch.linalg.solve_triangular(a.to(dev), a.to(dev), upper=True)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, float("inf")])
@pytest.mark.parametrize("dtype", FLOATS)
def test_renorm(p, dtype):
    x = rand(4, 5, 3, dtype=dtype, requires_grad=True)
    check(lambda t: torch.renorm(t, p, 1, 1.5), x, grad=dtype == torch.float32,
          atol=1e-4 if dtype == torch.float32 else None)
    check(lambda t: t.clone().renorm_(p, 0, 100.0), x)  # nothing to scale


def test_renorm_bad_input_raises():
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError):
            torch.renorm(torch.ones(3, 2, device=dev), -1.0, 0, 1.0)


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_cdist(p):
    a = rand(2, 4, 3, requires_grad=True)
    b = rand(2, 5, 3, requires_grad=True, seed=1)
    check(lambda x, y: torch.cdist(x, y, p=p), a, b, grad=p != 0.5, atol=1e-4, rtol=1e-4)
    check(lambda x, y: torch.cdist(x, y, p=p), a, b[:1], grad=p != 0.5, atol=1e-4, rtol=1e-4)  # broadcast batch
    check(lambda x, y: torch.cdist(x, y, p=p), a[0], b[0], atol=1e-4, rtol=1e-4)


def test_cdist_rejects_bfloat16():
    for dev in ("cpu", DEV):
        x = torch.ones(2, 3, dtype=torch.bfloat16, device=dev)
        with pytest.raises(NotImplementedError):
            torch.cdist(x, x)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_pdist(p):
    x = rand(5, 3, requires_grad=True)
    check(lambda t: torch.nn.functional.pdist(t, p=p), x, grad=p != 0.0, atol=1e-4, rtol=1e-4)
    check(lambda t: torch.nn.functional.pdist(t, p=p), x[:1].detach())
