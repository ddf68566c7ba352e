"""torch._weight_norm's fused kernels (_weight_norm_interface and its
backward) against the CPU: dim 0 and the last dim, float dtypes,
non-contiguous weights, the weight_norm parametrization of a convolution
(as wav2vec2's positional embedding uses it), gradcheck."""
import pytest
import torch
from torch.nn.utils import parametrizations

import torchtpu  # noqa: F401


def g_shape(v, dim):
    return [v.shape[d] if d == dim % v.dim() else 1 for d in range(v.dim())]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("dim", [0, 2])
def test_interface_forward_backward(dtype, dim):
    torch.manual_seed(0)
    v = torch.randn(6, 4, 5).to(dtype)
    g = torch.randn(g_shape(v, dim)).to(dtype)
    gw = torch.randn(6, 4, 5).to(dtype)
    outs = {}
    for d in ("cpu", "tpu"):
        vv = v.detach().to(d).requires_grad_()
        gg = g.detach().to(d).requires_grad_()
        w, n = torch._weight_norm_interface(vv, gg, dim)
        w.backward(gw.to(d))
        outs[d] = (w.detach(), n, vv.grad, gg.grad)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    for a, b in zip(outs["tpu"], outs["cpu"]):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a.cpu(), b, **tol)


def test_non_contiguous_weight():
    # The CPU kernel reads its input as contiguous (torch._weight_norm hands
    # it a contiguous one), so the reference is the contiguous copy's.
    v = torch.randn(5, 8).t()  # (8, 5), strided
    g = torch.randn(8, 1)
    w, n = torch._weight_norm_interface(v.to("tpu"), g.to("tpu"), 0)
    wc, nc = torch._weight_norm_interface(v.contiguous(), g, 0)
    torch.testing.assert_close(w.cpu(), wc)
    torch.testing.assert_close(n.cpu(), nc)


def test_weight_norm_parametrized_conv_trains_like_cpu():
    torch.manual_seed(0)
    ref = parametrizations.weight_norm(torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), name="weight", dim=2)
    ours = parametrizations.weight_norm(torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), name="weight", dim=2)
    ours.load_state_dict(ref.state_dict())
    ours.to("tpu")
    x = torch.randn(2, 8, 16)
    for m, d in ((ref, "cpu"), (ours, "tpu")):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            loss = m(x.to(d)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, a), b in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-4, atol=1e-5, msg=name)


def test_gradcheck():
    v = torch.randn(3, 4, dtype=torch.float64, device="tpu", requires_grad=True)
    g = torch.randn(3, 1, dtype=torch.float64, device="tpu", requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: torch._weight_norm(a, b, 0), (v, g))
