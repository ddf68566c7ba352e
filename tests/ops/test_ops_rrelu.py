"""rrelu on tpu: the evaluation form against CPU; the training form by what
it promises (the device's generator draws other numbers than the CPU's)."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, check, rand


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rrelu_eval(dtype):
    x = rand(4, 6, dtype=dtype, requires_grad=True)
    check(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x, grad=dtype == torch.float32)


def test_rrelu_training_slopes_and_gradient():
    x = rand(8, 9)
    xt = x.to(DEV).requires_grad_(True)
    y = F.rrelu(xt, 0.1, 0.3, training=True)
    y.sum().backward()
    yc, gc = y.detach().cpu(), xt.grad.cpu()
    neg = x <= 0
    slope = yc[neg] / x[neg]
    assert bool((slope >= 0.1).all()) and bool((slope <= 0.3).all())
    assert torch.equal(yc[~neg], x[~neg])
    torch.testing.assert_close(gc[neg], slope)  # the gradient is the drawn slope
    assert bool((gc[~neg] == 1).all())


def test_rrelu_in_place_through_view():
    x = rand(4, 6)
    check(lambda t: F.rrelu(t.clone()[:, 1:4], training=False), x)
    def f(t):
        t = t.clone()
        F.rrelu(t[:, 1:4], 0.1, 0.3, training=False, inplace=True)
        return t
    check(f, x)
