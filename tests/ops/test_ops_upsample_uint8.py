"""uint8 bilinear and bicubic resizing (upsample_bilinear2d,
upsample_bicubic2d, _upsample_bilinear2d_aa, _upsample_bicubic2d_aa) on
tpu vs the CPU, bit for bit.

The CPU resizes uint8 in fixed point (int16 weights with a per-call
precision, int32 sums, a rounding shift, a clamp to [0, 255]), width pass
then height pass through a uint8 intermediate, skipping a pass whose dim
keeps its size. With AVX2 (or AVX-512) and at most 4 channels it runs a
SIMD kernel; otherwise a generic one with the same arithmetic, except that
the generic one's height pass gives every row the first row's weights
when the output's height is its innermost dim (width 1, channels-first):
tpu raises NotImplementedError there. The SIMD kernel fails its packing
check on a 3-channel channels-first input resized in height into a dense
channels-last output (a 1x1 one is both), and so does tpu.
"""
import random

import pytest
import torch
import torch.nn.functional as F

from optest import DEV

MODES = ["bilinear", "bicubic"]
# the SIMD kernel serves <= 4 channels only where the CPU has AVX2
SIMD = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def _pixels(shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
    x.view(-1)[0] = 0
    x.view(-1)[-1] = 255
    x.view(-1)[x.numel() // 2] = 255
    return x


def _layout(x, layout):
    """x and the same view of the same values on tpu."""
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    if layout != "view":
        return x, x.to(DEV)
    # a window of a wider tensor: strided, offset
    n, c, h, w = x.shape
    wide = torch.zeros(n, c, h + 1, w + 3, dtype=torch.uint8)
    wide[:, :, 1:, 2:w + 2] = x
    wide_dev = wide.to(DEV)
    return wide[:, :, 1:, 2:w + 2], wide_dev[:, :, 1:, 2:w + 2]


def _cpu_buggy(x, out_shape):
    """The CPU's generic kernel (more than 4 channels, or no AVX2) on a
    resized height into a width-1 channels-first output."""
    generic = x.shape[1] > 4 or not SIMD
    return generic and out_shape[2] != x.shape[2] and out_shape[3] == 1


def _compare(fn, x, x_dev=None):
    x_dev = x.to(DEV) if x_dev is None else x_dev
    try:
        exp = fn(x)
    except RuntimeError:
        # e.g. 3 channels-first channels into a 1x1 output (also dense
        # channels-last): the SIMD kernel's packing check fails
        with pytest.raises(RuntimeError):
            fn(x_dev)
        return
    got = fn(x_dev)
    assert got.dtype == torch.uint8 and got.shape == exp.shape
    assert torch.equal(got.cpu(), exp), (got.cpu().int() - exp.int()).abs().max()


def _cases():
    rng = random.Random(1234)
    cases = []
    for k in range(96):
        mode = MODES[k % 2]
        antialias = (k // 2) % 2 == 1
        align = (k // 4) % 2 == 1
        c = [1, 3, 4, 5, 8][k % 5]
        n = 1 + (k // 5) % 2
        layout = ["contiguous", "channels_last", "view"][k % 3]
        h, w = rng.randint(1, 24), rng.randint(2, 24)
        if k % 3 == 1:
            kw = dict(scale_factor=(rng.choice([0.3, 0.5, 0.75, 1.5, 2.0, 2.6]),
                                    rng.choice([0.4, 0.5, 1.25, 1.7, 3.0])))
        else:
            kw = dict(size=(rng.choice([1, h, rng.randint(1, 40)]), rng.choice([2, w, rng.randint(2, 40)])))
        cases.append((mode, antialias, align, (n, c, h, w), layout, kw))
    return cases


@pytest.mark.parametrize("mode,antialias,align,shape,layout,kw", _cases())
def test_interpolate_uint8(mode, antialias, align, shape, layout, kw):
    x, x_dev = _layout(_pixels(shape, seed=sum(shape)), layout)
    fn = lambda t: F.interpolate(t, mode=mode, antialias=antialias, align_corners=align, **kw)  # noqa: E731
    try:
        exp_shape = fn(x).shape
    except RuntimeError:  # an empty output, or the SIMD kernel's packing check (see _compare)
        with pytest.raises(RuntimeError):
            fn(x_dev)
        return
    # bilinear's out= form copies the functional result, so tpu cannot
    # tell a width-1 result's final layout: it refuses channels-last too
    refused = _cpu_buggy(x, exp_shape) and (layout != "channels_last" or (mode == "bilinear" and not antialias))
    if refused:
        with pytest.raises(NotImplementedError):
            fn(x_dev)
        return
    _compare(fn, x, x_dev)


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_edge_sizes(mode, antialias):
    # no resize, one dim only, to and from 1, strong downscaling (wide
    # antialias windows and a high weight precision), align_corners to 1
    x = _pixels((2, 3, 37, 41), seed=7)
    for size, align in [((37, 41), False), ((37, 13), False), ((90, 41), True), ((1, 1), False),
                        ((3, 2), False), ((1, 5), True), ((120, 130), False)]:
        _compare(lambda t: F.interpolate(t, size=size, mode=mode, antialias=antialias, align_corners=align), x)
    one = _pixels((1, 4, 1, 1), seed=8)
    _compare(lambda t: F.interpolate(t, size=(5, 3), mode=mode, antialias=antialias), one)


@pytest.mark.parametrize("mode", MODES)
def test_explicit_scales(mode):
    # the ops' scales_h/scales_w choose the filter independently of the size
    x = _pixels((1, 3, 10, 12), seed=3)
    for aa in [False, True]:
        op = getattr(torch.ops.aten, f"_upsample_{mode}2d_aa" if aa else f"upsample_{mode}2d")
        _compare(lambda t: op(t, [7, 19], False, 0.6, 1.7), x)
        _compare(lambda t: op(t, [15, 5], True, 1.9, 0.35), x)


def test_large_image():
    x = _pixels((2, 3, 160, 200), seed=5)
    _compare(lambda t: F.interpolate(t, size=(64, 77), mode="bicubic", antialias=True), x)
    xc = _pixels((1, 6, 96, 80), seed=6)
    _compare(lambda t: F.interpolate(t, scale_factor=1.7, mode="bilinear"), xc)


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_width_one(mode, antialias):
    fn = lambda t: F.interpolate(t, size=(13, 1), mode=mode, antialias=antialias)  # noqa: E731
    for c in [3, 4, 5]:
        x = _pixels((2, c, 9, 7), seed=c)
        if not _cpu_buggy(x, (2, c, 13, 1)):
            _compare(fn, x)
        else:
            # the CPU gives every row the first row's weights
            assert bool((fn(x) == fn(x)[:, :, :1]).all())
            with pytest.raises(NotImplementedError):
                fn(x.to(DEV))
    # keeping the height, or channels-last, the generic kernel is right
    x = _pixels((1, 5, 9, 7), seed=1)
    _compare(lambda t: F.interpolate(t, size=(9, 1), mode=mode, antialias=antialias), x)
    if mode == "bicubic" or antialias:
        cl = x.contiguous(memory_format=torch.channels_last)
        _compare(fn, cl)


@pytest.mark.parametrize("op", ["upsample_bilinear2d", "upsample_bicubic2d", "_upsample_bilinear2d_aa",
                                "_upsample_bicubic2d_aa"])
def test_out(op):
    f = getattr(torch.ops.aten, op)
    x = _pixels((1, 5, 9, 7), seed=2)
    exp = torch.empty(1, 5, 4, 11, dtype=torch.uint8)
    f.out(x, [4, 11], False, None, None, out=exp)
    got = torch.empty(1, 5, 4, 11, dtype=torch.uint8, device=DEV)
    f.out(x.to(DEV), [4, 11], False, None, None, out=got)
    assert torch.equal(got.cpu(), exp)


@pytest.mark.parametrize("fn", [
    lambda t: F.interpolate(t[:, :, 0], size=7, mode="linear"),
    lambda t: F.interpolate(t[:, :, None], size=(2, 7, 6), mode="trilinear"),
    lambda t: F.interpolate(t, size=(3, 7), mode="area"),
    lambda t: F.interpolate(t.to(torch.int16), size=(3, 7), mode="bilinear"),
    lambda t: F.interpolate(t.to(torch.int8), size=(3, 7), mode="bicubic"),
    lambda t: F.interpolate(t.to(torch.int32), size=(3, 7), mode="bicubic", antialias=True),
], ids=["linear1d", "trilinear3d", "area", "bilinear_int16", "bicubic_int8", "bicubic_aa_int32"])
def test_cpu_refusals(fn):
    x = _pixels((1, 3, 4, 5), seed=0)
    with pytest.raises(NotImplementedError):
        fn(x)
    with pytest.raises(NotImplementedError):
        fn(x.to(DEV))
