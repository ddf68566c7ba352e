"""fractional_max_pool2d/3d (+ backward) on tpu vs CPU, with the same
random samples on both sides (the window positions come from them)."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, check

FMP = {2: F.fractional_max_pool2d, 3: F.fractional_max_pool3d}


def _samples(x, nsp, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = x.shape[0] if x.dim() == nsp + 2 else 1
    return torch.rand(n, x.shape[-nsp - 1], nsp, generator=g).to(x.dtype)


def _run(x, nsp, ks, u, **kw):
    return FMP[nsp](x, ks, return_indices=True, _random_samples=u, **kw)


CASES = [
    (2, (2, 3, 9, 11), (2, 3), dict(output_size=(4, 5))),
    (2, (3, 10, 7), 3, dict(output_size=(5, 3))),
    (2, (2, 2, 12, 10), 2, dict(output_ratio=(0.5, 0.7))),
    (3, (2, 2, 7, 8, 9), (2, 3, 2), dict(output_size=(3, 4, 5))),
    (3, (2, 6, 6, 7), 2, dict(output_size=(3, 3, 2))),
    (3, (1, 2, 8, 8, 8), 2, dict(output_ratio=0.5)),
]


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("nsp,shape,ks,kw", CASES)
def test_forward(nsp, shape, ks, kw, dt):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g).to(dt)
    check(_run, x, nsp, ks, _samples(x, nsp), **kw)


@pytest.mark.parametrize("nsp,shape,ks,kw", CASES)
def test_gradients(nsp, shape, ks, kw):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(*shape, generator=g).requires_grad_()
    check(_run, x, nsp, ks, _samples(x, nsp), grad=True, **kw)


def test_overlapping_windows_gradient():
    # ties between overlapping windows add into the same input element
    x = torch.zeros(1, 1, 6, 6)
    x[0, 0, 2, 2] = 5
    x.requires_grad_()
    check(_run, x, 2, 3, _samples(x, 2), grad=True, output_size=4)


def test_bfloat16_interval_rounding():
    # long rows: (i + u) * alpha rounds to bfloat16 at every step on the
    # CPU, which moves windows against a float32 computation
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 2, 6, 300, generator=g).to(torch.bfloat16)
    check(_run, x, 2, 2, _samples(x, 2, seed=4), output_size=(3, 97))
    check(_run, x.float(), 2, 2, _samples(x, 2, seed=4).float(), output_size=(3, 97))


def test_nan_and_inf_picks():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[[[1., nan, 3, nan], [-inf, 2, 3, 3], [-inf, -inf, 0, 0],
                        [-inf, -inf, 5, 5]]]])
    check(_run, x, 2, 2, torch.tensor([[[0.3, 0.6]]]), output_size=2)


def test_out_forms_and_backward_ops():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 9, 9, generator=g)
    u = _samples(x, 2)
    oc, ic = torch.empty(0), torch.empty(0, dtype=torch.long)
    ot, it = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.long, device=DEV)
    torch.ops.aten.fractional_max_pool2d.output(x, (2, 2), (4, 4), u, output=oc, indices=ic)
    torch.ops.aten.fractional_max_pool2d.output(x.to(DEV), (2, 2), (4, 4), u.to(DEV), output=ot, indices=it)
    assert torch.equal(ot.cpu(), oc) and torch.equal(it.cpu(), ic)
    go = torch.randn(2, 3, 4, 4, generator=g)
    gc = torch.ops.aten.fractional_max_pool2d_backward(go, x, [2, 2], [4, 4], ic)
    gt = torch.ops.aten.fractional_max_pool2d_backward(go.to(DEV), x.to(DEV), [2, 2], [4, 4], it)
    torch.testing.assert_close(gt.cpu(), gc)
    x3 = torch.randn(2, 5, 6, 7, generator=g)
    oc3, ic3 = torch.ops.aten.fractional_max_pool3d(x3, [2, 2, 2], [3, 3, 4], _samples(x3, 3))
    go3 = torch.randn(2, 3, 3, 4, generator=g)
    gc3 = torch.ops.aten.fractional_max_pool3d_backward(go3, x3, [2, 2, 2], [3, 3, 4], ic3)
    gt3 = torch.ops.aten.fractional_max_pool3d_backward(go3.to(DEV), x3.to(DEV), [2, 2, 2], [3, 3, 4],
                                                        ic3.to(DEV))
    torch.testing.assert_close(gt3.cpu(), gc3)
    with pytest.raises(RuntimeError):
        torch.ops.aten.fractional_max_pool3d_backward(go3.to(DEV), x3.to(DEV), [2, 2, 2], [3, 3, 5],
                                                      ic3.to(DEV))


def test_unseeded_draws_valid_windows():
    # without _random_samples the samples are drawn on the device: check
    # the result is a max over some window of the right size
    x = torch.randn(1, 2, 10, 10)
    out, idx = F.fractional_max_pool2d(x.to(DEV), 3, output_size=4, return_indices=True)
    out, idx = out.cpu(), idx.cpu()
    assert out.shape == (1, 2, 4, 4)
    assert torch.equal(x.flatten(2).gather(2, idx.flatten(2)).view_as(out), out)


@pytest.mark.parametrize("fn,args,exc", [
    (F.fractional_max_pool2d, ((1, 1, 4, 4), 3, dict(output_size=3)), RuntimeError),
    (F.fractional_max_pool2d, ((4, 4), 2, dict(output_size=2)), (RuntimeError, ValueError)),
    (F.fractional_max_pool3d, ((1, 1, 4, 4, 4), 3, dict(output_size=3)), RuntimeError),
])
def test_errors(fn, args, exc):
    shape, ks, kw = args
    x = torch.randn(*shape)
    u = torch.rand(1, 1, 3 if fn is F.fractional_max_pool3d else 2)
    with pytest.raises(exc):
        fn(x, ks, _random_samples=u, **kw)
    with pytest.raises(exc):
        fn(x.to(DEV), ks, _random_samples=u.to(DEV), **kw)


def test_integer_input_rejected():
    x = torch.arange(64).view(1, 1, 8, 8)
    u = torch.rand(1, 1, 2)
    with pytest.raises(RuntimeError):
        torch.ops.aten.fractional_max_pool2d(x, [2, 2], [4, 4], u)
    with pytest.raises(RuntimeError):
        torch.ops.aten.fractional_max_pool2d(x.to(DEV), [2, 2], [4, 4], u.to(DEV))
