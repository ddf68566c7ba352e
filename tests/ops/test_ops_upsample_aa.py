"""Antialiased resizing (_upsample_bilinear2d_aa, _upsample_bicubic2d_aa and
their backward) on tpu vs the CPU.

F.interpolate(..., antialias=True) reaches the ops through their .vec
forms (composite: output size and scales from scale_factor); the ops'
own scales_h/scales_w args choose the filter's scale independently of
the output size. The CPU kernel refuses bfloat16; the tpu computes it in
float32 and rounds once, compared here with the CPU's float32 answer
rounded.
"""
import itertools

import pytest
import torch
import torch.nn.functional as F

from optest import DEV, assert_close, check

MODES = ["bilinear", "bicubic"]
# downsampling (the filter widens), upsampling, mixed, to 1x1
SIZES = [dict(size=(4, 3)), dict(size=(13, 23)), dict(size=(5, 17)), dict(size=(1, 1)),
         dict(scale_factor=(0.45, 1.7)), dict(scale_factor=0.3)]


def _input(shape, seed=0, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _resize(mode, align, kw):
    return lambda x: F.interpolate(x, mode=mode, antialias=True, align_corners=align, **kw)


@pytest.mark.parametrize("mode,align,kw", list(itertools.product(MODES, [False, True], SIZES)))
def test_interpolate_antialias(mode, align, kw):
    x = _input((2, 3, 9, 11)).requires_grad_()
    # one case per mode also runs non-contiguous (each layout compiles anew)
    noncontig = not align and "scale_factor" in kw and kw["scale_factor"] == 0.3
    check(_resize(mode, align, kw), x, grad=True, noncontig=noncontig, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", MODES)
def test_weights_bit_exact(mode, dtype):
    # resizing the rows of an identity reads the weights out: they are
    # computed with the CPU kernel's arithmetic (its float/double steps and
    # the fused multiply-adds its build contracts the cubic filter into),
    # so they match bit for bit
    fwd = getattr(torch.ops.aten, f"_upsample_{mode}2d_aa")
    for n_in, n_out, scale, align in [(20, 7, None, False), (13, 5, 0.37, True), (10, 23, None, False),
                                      (100, 9, None, True)]:
        eye = torch.eye(n_in, dtype=dtype).reshape(n_in, 1, 1, n_in)
        exp = fwd(eye, (1, n_out), align, None, scale)
        assert_close(fwd(eye.to(DEV), (1, n_out), align, None, scale), exp, atol=0, rtol=0)


@pytest.mark.parametrize("mode", MODES)
def test_float64(mode):
    x = _input((1, 2, 12, 7), dtype=torch.float64).requires_grad_()
    check(_resize(mode, False, dict(size=(5, 16))), x, grad=True)


@pytest.mark.parametrize("mode", MODES)
def test_ops_direct(mode):
    # explicit scales (also on a dim whose size does not change: the
    # forward leaves it, the backward applies its weights, like the CPU),
    # out= forms and the backward op itself
    fwd = getattr(torch.ops.aten, f"_upsample_{mode}2d_aa")
    bwd = getattr(torch.ops.aten, f"_upsample_{mode}2d_aa_backward")
    x = _input((2, 3, 10, 20))
    for size, sh, sw, align in [((3, 3), 1.7, 0.9, False), ((3, 3), 1.7, 0.9, True),
                                ((10, 7), None, 0.5, False), ((10, 20), 1.7, 0.9, False)]:
        exp = fwd(x, size, align, sh, sw)
        assert_close(fwd(x.to(DEV), size, align, sh, sw), exp, atol=1e-5, rtol=1e-4)
        out = torch.empty(0, device=DEV)
        fwd.out(x.to(DEV), size, align, sh, sw, out=out)
        assert_close(out, exp, atol=1e-5, rtol=1e-4)
        go = _input(exp.shape, seed=5)
        e = bwd(go, size, list(x.shape), align, sh, sw)
        assert_close(bwd(go.to(DEV), size, list(x.shape), align, sh, sw), e, atol=1e-4, rtol=1e-4)
        gi = torch.empty(0, device=DEV)
        bwd.grad_input(go.to(DEV), size, list(x.shape), align, sh, sw, grad_input=gi)
        assert_close(gi, e, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_bfloat16(mode):
    x = _input((2, 3, 9, 11))
    for kw in (dict(size=(4, 5)), dict(size=(13, 6))):
        got = F.interpolate(x.bfloat16().to(DEV), mode=mode, antialias=True, **kw)
        exp = F.interpolate(x.bfloat16().float(), mode=mode, antialias=True, **kw).bfloat16()
        assert_close(got, exp)
    xt = x.bfloat16().to(DEV).requires_grad_()
    F.interpolate(xt, size=(4, 5), mode=mode, antialias=True).sum().backward()
    xc = x.bfloat16().float().requires_grad_()
    F.interpolate(xc, size=(4, 5), mode=mode, antialias=True).sum().backward()
    assert_close(xt.grad, xc.grad.bfloat16())


def test_channels_last_and_noncontiguous():
    x = _input((2, 3, 9, 11)).contiguous(memory_format=torch.channels_last).requires_grad_()
    check(_resize("bilinear", False, dict(size=(4, 6))), x, grad=True, atol=1e-5, rtol=1e-4)
    base = _input((2, 3, 9, 22))
    check(_resize("bicubic", False, dict(size=(5, 4))), base[..., ::2], noncontig=False)


def test_bad_input():
    def raises_like_cpu(fn, x):
        with pytest.raises(Exception) as cpu:
            fn(x)
        with pytest.raises(Exception) as dev:
            fn(x.to(DEV))
        assert dev.type is cpu.type, (dev.value, cpu.value)

    raises_like_cpu(lambda x: F.interpolate(x, size=3, mode="bilinear", antialias=True), torch.randint(0, 5, (1, 1, 5, 5)))
    raises_like_cpu(lambda x: F.interpolate(x, size=3, mode="linear", antialias=True), _input((1, 2, 5)))
    raises_like_cpu(lambda x: F.interpolate(x, size=(0, 3), mode="bicubic", antialias=True), _input((1, 2, 8, 8)))
    raises_like_cpu(lambda x: torch.ops.aten._upsample_bilinear2d_aa(x, (3, 3), False), _input((2, 8, 8)))
