"""Bicubic upsampling (as products with the interpolation matrices) and
its backward on tpu against CPU."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, check, rand


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(7, 9), (3, 2), (1, 1)])
def test_bicubic_size(align, size):
    x = rand(2, 3, 5, 4, requires_grad=True)
    check(lambda t: F.interpolate(t, size=size, mode="bicubic", align_corners=align), x, grad=True, atol=1e-4,
          rtol=1e-4)


@pytest.mark.parametrize("scale,recompute", [(1.7, False), (0.6, False), (2.5, True)])
def test_bicubic_scale_factor(scale, recompute):
    x = rand(1, 2, 6, 5, requires_grad=True)
    check(lambda t: F.interpolate(t, scale_factor=scale, mode="bicubic", align_corners=False,
                                  recompute_scale_factor=recompute), x, grad=True, atol=1e-4, rtol=1e-4)


def test_bicubic_other_dtypes_and_layouts():
    x = rand(2, 3, 4, 4, dtype=torch.bfloat16)
    check(lambda t: F.interpolate(t, size=(6, 5), mode="bicubic", align_corners=False), x, noncontig=False)
    check(lambda t: F.interpolate(t, size=(6, 5), mode="bicubic", align_corners=True), x.double(), noncontig=False)
    cl = rand(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    check(lambda t: F.interpolate(t, size=(5, 7), mode="bicubic", align_corners=False), cl, noncontig=False)
    same = rand(1, 1, 4, 4)  # same size: the identity
    check(lambda t: F.interpolate(t, size=(4, 4), mode="bicubic", align_corners=False), same, noncontig=False)


def test_bicubic_bad_input_raises_like_cpu():
    for x, kw, exc in [(rand(2, 3, 4), dict(size=5), NotImplementedError),
                       (rand(1, 1, 4, 4), dict(size=(0, 3)), RuntimeError)]:
        with pytest.raises(exc):
            F.interpolate(x, mode="bicubic", **kw)
        with pytest.raises(exc):
            F.interpolate(x.to(DEV), mode="bicubic", **kw)
