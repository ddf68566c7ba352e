"""multi_margin_loss and multilabel_margin_loss on tpu against CPU."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, check, rand


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_loss(p, reduction):
    x = rand(4, 5, requires_grad=True)
    y = torch.tensor([0, 4, 2, 2])
    w = rand(5, low=0.5, high=2.0, seed=3)
    check(lambda a, t: F.multi_margin_loss(a, t, p=p, margin=0.7, reduction=reduction), x, y, grad=True)
    check(lambda a, t, ww: F.multi_margin_loss(a, t, p=p, weight=ww, reduction=reduction), x, y, w, grad=True)
    if reduction != "none":  # 1-d, none: PyTorch's meta function says (1,), its CPU kernel ()
        check(lambda a, t: F.multi_margin_loss(a, t, p=p, reduction=reduction), x[0].detach(), y[1])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    x = rand(3, 5, requires_grad=True)
    y = torch.tensor([[3, 0, -1, 1, 1], [0, 1, 2, 3, 4], [-1, 2, 2, 2, 2]])
    check(lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction), x, y, grad=True)
    if reduction != "none":  # as above
        check(lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction), x[0].detach(), y[0])


def test_margin_losses_reject_bfloat16():
    x = torch.ones(2, 3, dtype=torch.bfloat16)
    for dev in ("cpu", DEV):
        with pytest.raises(NotImplementedError):
            F.multi_margin_loss(x.to(dev), torch.tensor([0, 1], device=dev))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_loss_of_one_sample_is_0d_like_cpu(reduction):
    # PyTorch's meta function says (1,) for a 1-D input with reduction='none';
    # the CPU kernel returns a 0-d tensor, and so do we.
    x = torch.randn(5)
    y = torch.tensor(2)
    got = F.multi_margin_loss(x.to(DEV), y.to(DEV), reduction=reduction)
    ref = F.multi_margin_loss(x, y, reduction=reduction)
    assert got.shape == ref.shape
    check(lambda a: F.multi_margin_loss(a, y.to(a.device), reduction=reduction), x, grad=True)
