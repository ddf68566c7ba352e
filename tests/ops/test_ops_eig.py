"""General (non-symmetric) eigendecomposition (Hessenberg reduction and
shifted QR in while loops) on tpu against CPU. Eigenvalues compare as sets
(their order is the Schur form's, not necessarily LAPACK's); eigenvectors
through A V = V diag(w) and the CPU's scaling (unit norm, largest component
real)."""
import pytest
import torch

from optest import DEV, rand

REAL = [torch.float32, torch.float64]
CPLX = [torch.complex64, torch.complex128]
EPS = {torch.float32: 1e-6, torch.complex64: 1e-6, torch.float64: 1e-14, torch.complex128: 1e-14}


def match(w, want, tol):
    """Each eigenvalue of `want` has its own one in w, within tol."""
    w, want = w.reshape(-1, w.shape[-1]), want.reshape(-1, want.shape[-1])
    for a, e in zip(w, want):
        free = list(range(len(a)))
        for x in e.tolist():
            d = [abs(a[i].item() - x) for i in free]
            k = min(range(len(free)), key=d.__getitem__)
            assert d[k] <= tol * max(1.0, abs(x)), (x, a)
            free.pop(k)


def check_eig(a, cond=1.0):
    """eig and eigvals of a on tpu against the CPU's; cond scales the
    tolerance for ill-conditioned eigenvalues."""
    n = a.shape[-1]
    tol = 200 * n * EPS[a.dtype] * cond
    wc = torch.linalg.eigvals(a)
    w, v = torch.linalg.eig(a.to(DEV))
    assert w.device.type == DEV and w.dtype == wc.dtype and v.dtype == wc.dtype
    w, v = w.cpu(), v.cpu()
    match(w, wc, tol)
    match(torch.linalg.eigvals(a.to(DEV)).cpu(), wc, tol)
    ac = a.to(wc.dtype)
    scale = torch.linalg.matrix_norm(ac, keepdim=True).clamp_min(1)
    res = torch.linalg.matrix_norm(ac @ v - v * w.unsqueeze(-2), keepdim=True) / scale
    assert float(res.max()) <= tol, float(res.max())
    torch.testing.assert_close(torch.linalg.vector_norm(v, dim=-2), torch.ones(w.shape, dtype=w.real.dtype),
                               atol=tol, rtol=0)
    top = v.gather(-2, v.abs().argmax(-2, keepdim=True))
    assert float(top.imag.abs().max()) <= tol


@pytest.mark.parametrize("dtype", REAL + CPLX)
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 3, 3), (16, 16), (40, 40)])
def test_eig_random(dtype, shape):
    check_eig(rand(*shape, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128])
def test_eig_noncontiguous_and_batched(dtype):
    a = rand(2, 2, 5, 5, dtype=dtype)
    check_eig(a.mT)  # a transposed view
    check_eig(a[:, 1])


def test_eig_structured_inputs():
    rot = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # real, eigenvalues +-i
    check_eig(rot)
    check_eig(torch.zeros(3, 3))
    check_eig(torch.eye(4, dtype=torch.float64))
    check_eig(torch.triu(rand(6, 6, dtype=torch.float64)))  # already triangular
    s = rand(5, 5, dtype=torch.float64)
    check_eig(s + s.mT)  # symmetric: real eigenvalues
    perm = torch.eye(5)[[1, 2, 3, 4, 0]]  # the 5th roots of unity
    check_eig(perm)
    # clustered eigenvalues
    q, _ = torch.linalg.qr(rand(6, 6, dtype=torch.float64, seed=1))
    check_eig(q @ torch.diag(torch.tensor([1.0, 1.0 + 1e-6, 1.0 - 1e-6, 2.0, 3.0, 3.0], dtype=torch.float64)) @ q.mT)


def test_eig_ill_conditioned():
    # a perturbed Jordan block: eigenvalues as sensitive as eps^(1/n)
    j = torch.diag(torch.ones(3, dtype=torch.float64), 1) + 2 * torch.eye(4, dtype=torch.float64)
    j[3, 0] = 1e-8
    check_eig(j, cond=1e8)
    g = rand(8, 8, dtype=torch.float64, seed=2)
    d = torch.diag(torch.logspace(0, 6, 8, dtype=torch.float64))
    check_eig(g @ d @ torch.linalg.inv(g), cond=1e4)  # spread over 6 decades


def test_eig_backward():
    a = rand(3, 3, dtype=torch.complex128, seed=4).to(DEV).requires_grad_()
    assert torch.autograd.gradcheck(torch.linalg.eigvals, (a,))
    # |V|-invariant quantity: V diag(w) V^-1 = A
    x = rand(3, 3, dtype=torch.float64, seed=5)
    xc, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    torch.linalg.eigvals(xc).abs().sum().backward()
    torch.linalg.eigvals(xd).abs().sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, atol=1e-8, rtol=1e-8)


def test_eig_rejects_like_cpu():
    for bad in (torch.ones(3, 4), torch.ones(3, 3, dtype=torch.bfloat16), torch.ones(3, 3, dtype=torch.int64)):
        with pytest.raises(Exception) as cpu:
            torch.linalg.eig(bad)
        with pytest.raises(type(cpu.value)):
            torch.linalg.eig(bad.to(DEV))


@pytest.mark.parametrize("dtype", REAL + CPLX)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 5, 5)])
@pytest.mark.parametrize("val", [float("inf"), float("nan")])
def test_eig_refuses_non_finite_input_like_cpu(dtype, shape, val):
    a = rand(*shape, dtype=dtype)
    a[..., -1, -1] = val
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.eig(a)
    with pytest.raises(RuntimeError) as dev:
        torch.linalg.eig(a.to(DEV))
    assert str(cpu.value) == "torch.linalg.eig: input tensor should not contain infs or NaNs."
    assert str(cpu.value) in str(dev.value)


@pytest.mark.parametrize("dtype", REAL)
def test_eig_real_input_pairs_exactly_conjugate(dtype):
    """As LAPACK leaves them: a real matrix's complex eigenvalues come in
    exactly conjugate pairs and its real ones have a zero imaginary part,
    so sorting them (as NumPy users do) gives the CPU's order."""
    a = rand(6, 7, 7, dtype=dtype, seed="pairs")
    w = torch.linalg.eig(a.to(DEV))[0].cpu()
    wv = torch.linalg.eigvals(a.to(DEV)).cpu()
    want = torch.linalg.eigvals(a)
    for got in (w, wv):
        for x, e in zip(got, want):
            assert sorted(x.imag.tolist()) == sorted((-x.imag).tolist())  # pairs, exactly
            real = x[x.imag == 0]
            assert len(real) == int((e.imag == 0).sum())
            paired = x[x.imag > 0]
            for z in paired.tolist():
                assert complex(z.real, -z.imag) in x.tolist()
            key = lambda z: (z.real, z.imag)  # noqa: E731
            s, t = sorted(x.tolist(), key=key), sorted(e.tolist(), key=key)
            assert max(abs(p - q) for p, q in zip(s, t)) <= 1e3 * EPS[dtype] * max(1, max(map(abs, t)))


def test_eigvals_out_dtype_refused_with_cpu_message():
    from optest import same_error
    for dtype in (torch.float32, torch.int32):
        same_error(lambda d: torch.linalg.eigvals(torch.tensor([[3., -2.], [4., -1.]], device=d),
                                                  out=torch.empty(0, dtype=dtype, device=d)))
    a = rand(3, 3)
    out = torch.empty(0, dtype=torch.complex128, device=DEV)
    torch.linalg.eigvals(a.to(DEV), out=out)
    want = torch.linalg.eigvals(a).to(torch.complex128)
    assert out.dtype == torch.complex128 and out.shape == want.shape
