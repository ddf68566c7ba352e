"""CTC loss (_ctc_loss and _ctc_loss_backward through F.ctc_loss) on tpu
vs CPU: padded and concatenated targets, every reduction, zero_infinity,
repeated labels, empty targets and inputs, float32/float64, gradients."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, check

T, N, C = 12, 4, 6


def _inputs(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randn(T, N, C, generator=g, dtype=dtype).log_softmax(2)
    tg = torch.randint(1, C, (N, 5), generator=g)
    tg[0, 1] = tg[0, 0]                      # a repeated label: no skip
    return lp, tg


IL, TL = [12, 10, 7, 12], [5, 3, 0, 4]


def _concat(tg, tl):
    return torch.cat([tg[i, :tl[i]] for i in range(len(tl))])


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss(reduction, layout, zero_infinity):
    lp, tg = _inputs()
    targets = tg if layout == "padded" else _concat(tg, TL)
    lp.requires_grad_()
    check(F.ctc_loss, lp, targets, IL, TL, reduction=reduction, zero_infinity=zero_infinity,
          grad=True, noncontig=layout == "padded", atol=1e-5, rtol=1e-5)


def test_float64_and_int32_targets_and_blank():
    lp, tg = _inputs(torch.float64, seed=1)
    lp.requires_grad_()
    # blank = C - 1: labels drawn below it
    tg = tg.clamp(max=C - 2).to(torch.int32)
    check(F.ctc_loss, lp, tg, IL, TL, blank=C - 1, reduction="sum", grad=True)


def test_tensor_lengths_and_unbatched():
    lp, tg = _inputs(seed=2)
    lp.requires_grad_()
    check(F.ctc_loss, lp, tg, torch.tensor(IL), torch.tensor(TL), grad=True, noncontig=False)
    one = lp[:, 0].detach().clone().requires_grad_()
    check(F.ctc_loss, one, tg[0], torch.tensor(12), torch.tensor(5), grad=True, noncontig=False)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_infeasible_and_empty_inputs(zero_infinity):
    # sample 0 cannot fit its 5 labels in 2 steps (inf loss); sample 2 has
    # no input at all and no target (loss 0)
    lp, tg = _inputs(seed=3)
    il, tl = [2, 10, 0, 12], [5, 3, 0, 4]
    out_c = F.ctc_loss(lp, tg, il, tl, reduction="none", zero_infinity=zero_infinity)
    out_t = F.ctc_loss(lp.to(DEV), tg.to(DEV), il, tl, reduction="none", zero_infinity=zero_infinity)
    torch.testing.assert_close(out_t.cpu(), out_c)
    if zero_infinity:
        x = lp.clone().requires_grad_()
        check(F.ctc_loss, x, tg, il, tl, reduction="sum", zero_infinity=True, grad=True,
              noncontig=False)


def test_raw_outputs():
    lp, tg = _inputs(seed=4)
    nll_c, la_c = torch.ops.aten._ctc_loss(lp, tg, IL, TL, 0, False)
    nll_t, la_t = torch.ops.aten._ctc_loss(lp.to(DEV), tg.to(DEV), IL, TL, 0, False)
    torch.testing.assert_close(nll_t.cpu(), nll_c)
    assert la_t.shape == la_c.shape
    # log_alpha where the CPU writes it: t < input length, s <= 2 L
    for b in range(N):
        torch.testing.assert_close(la_t.cpu()[b, :IL[b], :2 * TL[b] + 1], la_c[b, :IL[b], :2 * TL[b] + 1])
    g = torch.randn(N)
    gc = torch.ops.aten._ctc_loss_backward(g, lp, tg, IL, TL, nll_c, la_c, 0, False)
    gt = torch.ops.aten._ctc_loss_backward(g.to(DEV), lp.to(DEV), tg.to(DEV), IL, TL, nll_t, la_t, 0, False)
    torch.testing.assert_close(gt.cpu(), gc)


def test_errors():
    lp, tg = _inputs(seed=5)
    for il, tl, exc in [([13, 10, 7, 12], TL, RuntimeError),    # input length > T
                        (IL, [6, 3, 0, 4], RuntimeError),        # target length > padded width
                        (IL[:3], TL, RuntimeError)]:              # wrong count
        with pytest.raises(exc):
            F.ctc_loss(lp, tg, il, tl)
        with pytest.raises(exc):
            F.ctc_loss(lp.to(DEV), tg.to(DEV), il, tl)
    with pytest.raises(NotImplementedError):
        F.ctc_loss(lp.bfloat16(), tg, IL, TL)
    with pytest.raises(NotImplementedError):
        F.ctc_loss(lp.bfloat16().to(DEV), tg.to(DEV), IL, TL)
