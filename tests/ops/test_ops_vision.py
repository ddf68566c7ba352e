"""torchvision's detection ops on tpu (nms, roi_align, roi_pool and their
backwards) against the CPU.

With torchvision installed the reference is torchvision's own CPU kernel
and autograd runs through torchvision's Autograd kernels; without it,
torchvision's schemas are defined here with plain-PyTorch references as
their CPU kernels (tests/vision_reference.py) and the backwards are
compared with autograd through those references.
"""
import importlib.util

import pytest
import torch

import torchtpu  # noqa: F401
import vision_reference as ref

HAVE_TORCHVISION = importlib.util.find_spec("torchvision") is not None
if HAVE_TORCHVISION:
    import torchvision  # noqa: F401
else:
    _LIBS = ref.define_ops()

OPS = torch.ops.torchvision
DEV = "tpu"


def boxes(n, size=40.0, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * size
    wh = torch.rand(n, 2, generator=g) * size / 2 + 1
    return torch.cat([xy, xy + wh], 1).to(dtype)


def rois(k, batch, size, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    b = torch.randint(0, batch, (k, 1), generator=g).to(dtype)
    # some rois reach past the image and some are degenerate
    xy = torch.rand(k, 2, generator=g) * (size * 1.2) - size * 0.1
    wh = torch.rand(k, 2, generator=g) * size * 0.8
    wh[0] = 0
    return torch.cat([b, xy.to(dtype), (xy + wh).to(dtype)], 1)


# ---------------------------------------------------------------- nms


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("thr", [0.0, 0.3, 0.5, 0.7, 1.0])
def test_nms_matches_cpu(dtype, thr):
    b = boxes(300, dtype=dtype)
    s = torch.rand(300, generator=torch.Generator().manual_seed(1)).to(dtype)
    s[10:20] = 0.5  # ties keep the stable descending order
    want = OPS.nms(b, s, thr)
    got = OPS.nms(b.to(DEV), s.to(DEV), thr)
    assert got.device.type == DEV and got.dtype == torch.long
    torch.testing.assert_close(got.cpu(), want)


def test_nms_threshold_between_floats():
    # 0.1 is not a float32: the CPU compares the float IoU with the double
    b = torch.tensor([[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 1.0], [0.0, 0.0, 1.0, 10.0]])
    s = torch.tensor([0.9, 0.8, 0.7])
    for thr in (0.1, 0.09999999, 0.1000001, 1 / 3):
        torch.testing.assert_close(OPS.nms(b.to(DEV), s.to(DEV), thr).cpu(), OPS.nms(b, s, thr))


def test_nms_empty_and_views():
    e = torch.empty(0, 4)
    assert OPS.nms(e.to(DEV), torch.empty(0).to(DEV), 0.5).shape == (0,)
    b = boxes(64)
    s = torch.rand(128)[::2]
    bt = b.t().contiguous().to(DEV).t()  # a transposed view
    torch.testing.assert_close(OPS.nms(bt, s.to(DEV)[:], 0.4).cpu(), OPS.nms(b, s, 0.4))


def test_nms_bad_input():
    b, s = boxes(4), torch.rand(4)
    cases = [
        (b[:, :3], s), (b.flatten(), s), (b, s[:3]), (b, s[:, None]), (b, s.double()),
        (b.half(), s.half()),
    ]
    for bb, ss in cases:
        _same_error(lambda: OPS.nms(bb, ss, 0.5), lambda: OPS.nms(bb.to(DEV), ss.to(DEV), 0.5))


def _same_error(cpu_call, tpu_call):
    """The tpu call raises the CPU's exception type, with the CPU's message
    (which torchvision prefixes with its kernel's name and source line)."""
    if not HAVE_TORCHVISION:  # the references do not check their input
        with pytest.raises(RuntimeError):
            tpu_call()
        return
    with pytest.raises(Exception) as cpu:
        cpu_call()
    with pytest.raises(type(cpu.value)) as tpu:
        tpu_call()
    assert str(tpu.value).split("\n")[0] in str(cpu.value), (str(tpu.value), str(cpu.value))


@pytest.mark.skipif(not HAVE_TORCHVISION, reason="torchvision's Python ops")
def test_batched_nms_matches_cpu():
    from torchvision.ops import batched_nms
    b = boxes(200)
    s = torch.rand(200)
    idx = torch.randint(0, 5, (200,))
    torch.testing.assert_close(batched_nms(b.to(DEV), s.to(DEV), idx.to(DEV), 0.5).cpu(), batched_nms(b, s, idx, 0.5))


# ---------------------------------------------------------- roi_align

RA_CASES = [
    # (spatial_scale, pooled h, pooled w, sampling_ratio, aligned)
    (1.0, 3, 4, 2, False),
    (0.5, 2, 2, 0, False),
    (0.25, 3, 3, -1, True),
    (1.0, 7, 7, 2, True),
    (0.5, 1, 5, 3, False),
]


def _roi_align_ref(x, r, case):
    scale, ph, pw, sr, aligned = case
    return OPS.roi_align(x, r, scale, ph, pw, sr, aligned)


@pytest.mark.parametrize("case", RA_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_roi_align_forward(case, dtype):
    x = torch.randn(2, 3, 11, 13, dtype=dtype)
    r = rois(9, 2, 13 / case[0], dtype=dtype)
    want = _roi_align_ref(x, r, case)
    got = _roi_align_ref(x.to(DEV), r.to(DEV), case)
    torch.testing.assert_close(got.cpu(), want)


def test_roi_align_half_and_views():
    case = RA_CASES[0]
    x = torch.randn(2, 4, 9, 9)
    r = rois(5, 2, 9)
    xl = x.to(DEV).to(memory_format=torch.channels_last)
    torch.testing.assert_close(_roi_align_ref(xl, r.to(DEV), case).cpu(), _roi_align_ref(x, r, case))
    xs = torch.randn(2, 8, 9, 9)[:, ::2]
    torch.testing.assert_close(_roi_align_ref(xs.to(DEV)[:], r.to(DEV), case).cpu(), _roi_align_ref(xs, r, case))
    got = _roi_align_ref(x.half().to(DEV), r.half().to(DEV), case).cpu()
    torch.testing.assert_close(got, _roi_align_ref(x.half(), r.half(), case), atol=2e-2, rtol=1e-2)


def test_roi_align_adaptive_grid_large_roi():
    # adaptive sampling on a roi covering the map: an 8x8 grid per bin
    x = torch.randn(1, 2, 32, 32)
    r = torch.tensor([[0, 0.0, 0.0, 31.0, 31.0], [0, 3.0, 2.0, 6.0, 5.0]])
    torch.testing.assert_close(OPS.roi_align(x.to(DEV), r.to(DEV), 1.0, 4, 4, 0, False).cpu(),
                               OPS.roi_align(x, r, 1.0, 4, 4, 0, False))


def test_roi_align_empty():
    x = torch.randn(1, 2, 5, 5)
    assert OPS.roi_align(x.to(DEV), torch.empty(0, 5).to(DEV), 1.0, 2, 2, 2, False).shape == (0, 2, 2, 2)


@pytest.mark.parametrize("case", RA_CASES[:3])
def test_roi_align_backward(case):
    scale, ph, pw, sr, aligned = case
    x = torch.randn(2, 3, 11, 13, dtype=torch.float64)
    r = rois(9, 2, 13 / scale, dtype=torch.float64)
    g = torch.randn(9, 3, ph, pw, dtype=torch.float64)
    if HAVE_TORCHVISION:
        xc = x.clone().requires_grad_()
        OPS.roi_align(xc, r, scale, ph, pw, sr, aligned).backward(g)
        want = xc.grad
        xt = x.to(DEV).requires_grad_()
        OPS.roi_align(xt, r.to(DEV), scale, ph, pw, sr, aligned).backward(g.to(DEV))
        got = xt.grad
    else:
        xc = x.clone().requires_grad_()
        ref.roi_align(xc, r, scale, ph, pw, sr, aligned).backward(g)
        want = xc.grad
        got = OPS._roi_align_backward(g.to(DEV), r.to(DEV), scale, ph, pw, 2, 3, 11, 13, sr, aligned)
    torch.testing.assert_close(got.cpu(), want)


def test_roi_align_bad_input():
    x, r = torch.randn(1, 2, 5, 5), rois(3, 1, 5)
    cases = [(x, r[:, :4]), (x, r.double()), (x.bfloat16(), r.bfloat16())]
    for xx, rr in cases:
        _same_error(lambda: OPS.roi_align(xx, rr, 1.0, 2, 2, 2, False),
                    lambda: OPS.roi_align(xx.to(DEV), rr.to(DEV), 1.0, 2, 2, 2, False))
    g = torch.ones(3, 2, 2, 2)
    for gg, rr in [(g, r.double()), (g.bfloat16(), r.bfloat16())]:
        _same_error(lambda: OPS._roi_align_backward(gg, rr, 1.0, 2, 2, 1, 2, 5, 5, 2, False),
                    lambda: OPS._roi_align_backward(gg.to(DEV), rr.to(DEV), 1.0, 2, 2, 1, 2, 5, 5, 2, False))


# ----------------------------------------------------------- roi_pool


@pytest.mark.parametrize("scale,ph,pw", [(1.0, 3, 4), (0.5, 2, 2), (0.25, 7, 7), (1.0, 1, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_roi_pool_forward(scale, ph, pw, dtype):
    x = torch.randn(2, 3, 11, 13, dtype=dtype)
    r = rois(9, 2, 13 / scale, dtype=dtype)
    want_out, want_arg = OPS.roi_pool(x, r, scale, ph, pw)
    got_out, got_arg = OPS.roi_pool(x.to(DEV), r.to(DEV), scale, ph, pw)
    assert got_arg.dtype == torch.int32
    torch.testing.assert_close(got_out.cpu(), want_out)
    torch.testing.assert_close(got_arg.cpu(), want_arg)


def test_roi_pool_half_and_empty_bins():
    x = torch.randn(2, 3, 11, 13)
    r = rois(9, 2, 13)
    for g, w in zip(OPS.roi_pool(x.half().to(DEV), r.half().to(DEV), 1.0, 3, 4), OPS.roi_pool(x.half(), r.half(), 1.0, 3, 4)):
        torch.testing.assert_close(g.cpu(), w)
    assert OPS.roi_pool(x.to(DEV), r.to(DEV), 1.0, 0, 4)[0].shape == (9, 3, 0, 4)
    assert OPS.roi_align(x.to(DEV), r.to(DEV), 1.0, 0, 4, 2, False).shape == (9, 3, 0, 4)


def test_roi_pool_ties_take_the_first():
    x = torch.zeros(1, 1, 6, 6)
    x[0, 0, 1:4, 1:4] = 1.0
    r = torch.tensor([[0, 0.0, 0.0, 5.0, 5.0], [0, -3.0, -3.0, -1.0, -1.0]])
    want = OPS.roi_pool(x, r, 1.0, 2, 2)
    got = OPS.roi_pool(x.to(DEV), r.to(DEV), 1.0, 2, 2)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w)


def test_roi_pool_backward():
    x = torch.randn(2, 3, 11, 13, dtype=torch.float64)
    r = rois(9, 2, 13, dtype=torch.float64)
    g = torch.randn(9, 3, 3, 4, dtype=torch.float64)
    if HAVE_TORCHVISION:
        xc = x.clone().requires_grad_()
        OPS.roi_pool(xc, r, 1.0, 3, 4)[0].backward(g)
        xt = x.to(DEV).requires_grad_()
        OPS.roi_pool(xt, r.to(DEV), 1.0, 3, 4)[0].backward(g.to(DEV))
        got, want = xt.grad, xc.grad
    else:
        xc = x.clone().requires_grad_()
        ref.roi_pool(xc, r, 1.0, 3, 4)[0].backward(g)
        want = xc.grad
        _, arg = OPS.roi_pool(x.to(DEV), r.to(DEV), 1.0, 3, 4)
        got = OPS._roi_pool_backward(g.to(DEV), r.to(DEV), arg, 1.0, 3, 4, 2, 3, 11, 13)
    torch.testing.assert_close(got.cpu(), want)


def test_roi_pool_bad_input():
    x, r = torch.randn(1, 2, 5, 5), rois(3, 1, 5)
    for xx, rr in [(x, r.double()), (x.bfloat16(), r.bfloat16())]:
        _same_error(lambda: OPS.roi_pool(xx, rr, 1.0, 2, 2), lambda: OPS.roi_pool(xx.to(DEV), rr.to(DEV), 1.0, 2, 2))
    _, arg = OPS.roi_pool(x, r, 1.0, 2, 2)
    g = torch.ones(3, 2, 2, 2)
    for gg, rr in [(g, r.double()), (g, r[:, :4]), (g.bfloat16(), r.bfloat16())]:
        _same_error(lambda: OPS._roi_pool_backward(gg, rr, arg, 1.0, 2, 2, 1, 2, 5, 5),
                    lambda: OPS._roi_pool_backward(gg.to(DEV), rr.to(DEV), arg.to(DEV), 1.0, 2, 2, 1, 2, 5, 5))
    # the CPU kernel reads rois as rows of 5 unchecked; tpu refuses others
    with pytest.raises(RuntimeError, match=r"rois must have shape as Tensor\[K, 5\]"):
        OPS.roi_pool(x.to(DEV), r[:, :4].to(DEV), 1.0, 2, 2)


# ------------------------------------------------ a detection model


def _deterministic_sampler(monkeypatch):
    """The box samplers draw with torch.randperm, whose tpu stream is not
    the CPU's: take the first candidates instead, on both devices."""
    from torchvision.models.detection import _utils

    def first(self, matched_idxs):
        pos, neg = [], []
        for m in matched_idxs:
            p = torch.where(m >= 1)[0]
            n = torch.where(m == 0)[0]
            num_pos = min(p.numel(), int(self.batch_size_per_image * self.positive_fraction))
            num_neg = min(n.numel(), self.batch_size_per_image - num_pos)
            pm = torch.zeros_like(m, dtype=torch.uint8)
            nm = torch.zeros_like(m, dtype=torch.uint8)
            pm[p[:num_pos]] = 1
            nm[n[:num_neg]] = 1
            pos.append(pm)
            neg.append(nm)
        return pos, neg

    monkeypatch.setattr(_utils.BalancedPositiveNegativeSampler, "__call__", first)


@pytest.mark.skipif(not HAVE_TORCHVISION, reason="needs torchvision's models")
def test_faster_rcnn_matches_cpu(monkeypatch):
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

    _deterministic_sampler(monkeypatch)
    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=4,
                                                  box_score_thresh=0.0)
    images = [torch.rand(3, 160, 200), torch.rand(3, 180, 150)]
    targets = [{"boxes": torch.tensor([[10.0, 20.0, 90.0, 120.0], [50.0, 30.0, 140.0, 100.0]]),
                "labels": torch.tensor([1, 3])},
               {"boxes": torch.tensor([[5.0, 5.0, 100.0, 60.0]]), "labels": torch.tensor([2])}]
    tpu_model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=4,
                                                      box_score_thresh=0.0)
    tpu_model.load_state_dict(model.state_dict())
    tpu_model.to(DEV)

    model.eval()
    tpu_model.eval()
    with torch.no_grad():
        want = model(images)
        got = tpu_model([i.to(DEV) for i in images])
    for w, g in zip(want, got):
        assert g["boxes"].shape == w["boxes"].shape
        torch.testing.assert_close(g["boxes"].cpu(), w["boxes"], atol=1e-3, rtol=1e-4)
        torch.testing.assert_close(g["scores"].cpu(), w["scores"], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(g["labels"].cpu(), w["labels"])

    model.train()
    tpu_model.train()
    want = model(images, targets)
    got = tpu_model([i.to(DEV) for i in images], [{k: v.to(DEV) for k, v in t.items()} for t in targets])
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k].cpu(), want[k], atol=1e-4, rtol=1e-4)
    sum(want.values()).backward()
    sum(got.values()).backward()
    # Gradients by their norm. Proposals with nearly equal objectness can
    # come in another order after float32 rounding of the backbone (the CPU
    # in float32 and float64 differ the same way), so a few of the 512
    # sampled rois differ: the box head's gradients move by ~1e-3, the
    # backbone's by ~5e-3 (the CPU's own float32 error there is ~3e-3).
    total = torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]).norm()
    for (name, p), q in zip(model.named_parameters(), tpu_model.parameters()):
        if p.grad is not None:
            # (some batch-norm biases have a gradient of nearly 0: relative
            # to their own norm, only rounding would be left)
            err = (q.grad.cpu() - p.grad).norm() / (p.grad.norm() + 1e-3 * total)
            assert err < 2e-2, (name, float(err))


def test_autocast_runs_in_float32():
    x = torch.randn(2, 3, 11, 13)
    r = rois(9, 2, 13)
    with torch.autocast("tpu"):
        got = OPS.roi_align(x.to(DEV).bfloat16(), r.to(DEV), 1.0, 3, 4, 2, False)
        out, arg = OPS.roi_pool(x.to(DEV).bfloat16(), r.to(DEV), 1.0, 3, 4)
        keep = OPS.nms(r[:, 1:].to(DEV).bfloat16(), torch.rand(9).to(DEV).bfloat16(), 0.5)
    assert got.dtype == out.dtype == torch.bfloat16 and arg.dtype == torch.int32
    torch.testing.assert_close(got.cpu(), OPS.roi_align(x.bfloat16().float(), r, 1.0, 3, 4, 2, False).bfloat16())
    torch.testing.assert_close(out.cpu(), OPS.roi_pool(x.bfloat16().float(), r, 1.0, 3, 4)[0].bfloat16())
    assert keep.dtype == torch.long
