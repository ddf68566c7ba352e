"""Matrix exponential (scaling and squaring, Taylor degree 18, squarings
in a while loop) on tpu against CPU. exp(A) is accurate relative to its
norm, so entries are compared with a tolerance scaled by the result's
largest entry."""
import pytest
import torch

from optest import DEV, check, rand


def close_normwise(actual, expected, rtol):
    scale = expected.abs().amax(dim=(-1, -2), keepdim=True).clamp_min(1.0)
    torch.testing.assert_close(actual.cpu() / scale, expected / scale, atol=rtol, rtol=0)


@pytest.mark.parametrize("scale", [0.0, 0.01, 1.0, 4.0])
def test_matrix_exp_float32(scale):
    # one batch holds matrices needing different numbers of squarings;
    # against float64 (the CPU's own float32 result is up to 2e-5 off it)
    a = rand(3, 4, 4) * scale * torch.tensor([1.0, 0.1, 10.0]).view(3, 1, 1)
    expected = torch.linalg.matrix_exp(a.double()).float()
    close_normwise(torch.linalg.matrix_exp(a.to(DEV)), expected, 1e-5)
    close_normwise(torch.linalg.matrix_exp(a.mT.to(DEV)), torch.linalg.matrix_exp(a.mT.double()).float(), 1e-5)


def test_matrix_exp_known_values():
    t = torch.tensor([[0.0, 1.0], [-1.0, 0.0]]) * 0.7  # a rotation generator
    c, s = torch.cos(torch.tensor(0.7)), torch.sin(torch.tensor(0.7))
    torch.testing.assert_close(torch.linalg.matrix_exp(t.to(DEV)).cpu(), torch.stack([torch.stack([c, s]), torch.stack([-s, c])]))
    x = torch.tensor([[3.0]], device=DEV)
    torch.testing.assert_close(torch.linalg.matrix_exp(x).cpu(), torch.tensor([[3.0]]).exp())
    n = torch.triu(torch.ones(4, 4), 1)  # nilpotent: the series ends
    torch.testing.assert_close(torch.linalg.matrix_exp(n.to(DEV)).cpu(), torch.linalg.matrix_exp(n))


def test_matrix_exp_float64_and_bfloat16():
    a = rand(2, 5, 5, dtype=torch.float64)
    check(torch.linalg.matrix_exp, a, atol=1e-12, rtol=1e-12)
    b = rand(3, 3, dtype=torch.bfloat16)
    # the CPU's bfloat16 kernel returns NaNs on such inputs: compare with
    # float32 rounded once, which is what we compute
    out = torch.linalg.matrix_exp(b.to(DEV))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), torch.linalg.matrix_exp(b.float()).bfloat16(), atol=1e-2, rtol=1.6e-2)


def test_matrix_exp_grad():
    a = rand(2, 4, 4, requires_grad=True)
    check(torch.linalg.matrix_exp, a, grad=True, atol=1e-4, rtol=1e-4)


def test_matrix_exp_edge_cases():
    assert torch.linalg.matrix_exp(torch.empty(0, 3, 3, device=DEV)).shape == (0, 3, 3)
    check(torch.linalg.matrix_exp, torch.tensor([[float("inf")]]))
    check(torch.linalg.matrix_exp, torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]))
    out = torch.empty(0, device=DEV)
    torch.ops.aten.linalg_matrix_exp.out(torch.eye(2, device=DEV), out=out)
    torch.testing.assert_close(out.cpu(), torch.eye(2) * torch.e)


def test_matrix_exp_bad_input_raises_like_cpu():
    for bad in [torch.ones(3, 4), torch.ones(3, 3, dtype=torch.int64), torch.ones(3)]:
        with pytest.raises(RuntimeError):
            torch.linalg.matrix_exp(bad)
        with pytest.raises(RuntimeError):
            torch.linalg.matrix_exp(bad.to(DEV))


@pytest.mark.parametrize("dtype,rtol", [(torch.complex64, 2e-5), (torch.complex128, 1e-12)])
def test_matrix_exp_complex(dtype, rtol):
    g = torch.Generator().manual_seed(3)
    for scale in (0.01, 1.0, 6.0):
        a = (torch.randn(3, 5, 5, generator=g, dtype=torch.complex128) * scale)
        expected = torch.linalg.matrix_exp(a).to(dtype)
        close_normwise(torch.linalg.matrix_exp(a.to(dtype).to(DEV)), expected, rtol)
        close_normwise(torch.linalg.matrix_exp(a.to(dtype).mT.to(DEV)), expected.mT, rtol)
    # exp(i theta J) for a Hermitian generator is unitary
    h = torch.randn(4, 4, generator=g, dtype=torch.complex128)
    u = torch.linalg.matrix_exp(1j * (h + h.mH)).to(DEV) if dtype == torch.complex128 else None
    if u is not None:
        torch.testing.assert_close((u @ u.mH).cpu(), torch.eye(4, dtype=dtype), atol=1e-12, rtol=0)
    check(lambda t: torch.linalg.matrix_exp(t), (torch.randn(2, 3, 3, generator=g) * 0.5).to(dtype).requires_grad_(),
          grad=True, atol=1e-4 if dtype == torch.complex64 else 1e-10, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.int64, torch.bool])
def test_compute_linear_combination(dtype):
    g = torch.Generator().manual_seed(4)
    x = (torch.rand(3, 4, 5, generator=g) * 4).to(dtype)
    c = (torch.rand(2, 3, generator=g) * 3).to(dtype if not dtype.is_complex else torch.float32)
    check(lambda t, k: torch._compute_linear_combination(t, k), x, c, atol=1e-5, rtol=1e-5)
    # out= adds into out, as the CPU's kernel does
    for fill in (0, 1):
        out_c = torch.full((2, 4, 5), fill).to(dtype)
        out_t = out_c.to(DEV)
        torch._compute_linear_combination(x, c, out=out_c)
        torch._compute_linear_combination(x.to(DEV), c.to(DEV), out=out_t)
        torch.testing.assert_close(out_t.cpu(), out_c, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="Empty tensor not supported"):
        torch._compute_linear_combination(torch.rand([], device=DEV), torch.rand(2, 2, device=DEV))
