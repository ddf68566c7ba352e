"""grid_sampler_2d / grid_sampler_3d and their backward on tpu vs the CPU.

F.grid_sample dispatches to aten::grid_sampler_2d (4-d input) or
aten::grid_sampler_3d (5-d), and autograd to their _backward ops with an
output_mask; F.affine_grid runs as its composite (affine_grid_generator).
bfloat16 is compared with the CPU's float32 answer rounded once: the CPU
kernel computes bfloat16 in bfloat16 (its grid coordinates lose bits, so
it can even pick other pixels), the tpu computes in float32 and rounds
once, like CUDA.
"""
import itertools

import pytest
import torch
import torch.nn.functional as F

from optest import DEV, assert_close, check

MODES_2D = ["bilinear", "nearest", "bicubic"]
MODES_3D = ["bilinear", "nearest"]
PADS = ["zeros", "border", "reflection"]


def _grid(shape, lo=-1.6, hi=1.6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * (hi - lo) + lo


def _input(shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _sample(mode, pad, align):
    return lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)


@pytest.mark.parametrize("mode,pad,align", list(itertools.product(MODES_2D, PADS, [False, True])))
def test_grid_sample_2d(mode, pad, align):
    # grid reaches past the image on every side (several reflections)
    x = _input((2, 3, 5, 6)).requires_grad_()
    g = _grid((2, 4, 7, 2), -2.5, 2.5).requires_grad_()
    atol = 1e-4 if mode == "bicubic" else None  # gradients sum 16 taps x channels
    # one layout per mode also runs non-contiguous (each layout compiles anew)
    noncontig = pad == "reflection" and not align
    check(_sample(mode, pad, align), x, g, grad=True, noncontig=noncontig, atol=atol, rtol=1e-4 if atol else None)


@pytest.mark.parametrize("mode,pad,align", list(itertools.product(MODES_3D, PADS, [False, True])))
def test_grid_sample_3d(mode, pad, align):
    x = _input((2, 2, 3, 4, 5)).requires_grad_()
    g = _grid((2, 3, 2, 4, 3), -2.5, 2.5).requires_grad_()
    noncontig = pad == "reflection" and not align
    check(_sample(mode, pad, align), x, g, grad=True, noncontig=noncontig, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("nd", [2, 3])
def test_nearest_rounds_half_to_even(nd):
    # align_corners=False, size 4: pixel = 2 * g + 1.5, so g in {-1, -0.5,
    # 0, 0.5} lands exactly on .5 and must round to the even neighbour
    size = (4,) * nd
    x = torch.arange(2 * 4**nd, dtype=torch.float32).reshape((1, 2) + size)
    vals = torch.tensor([-1.0, -0.5, 0.0, 0.5, 0.25, -0.75])
    coords = torch.stack(torch.meshgrid(*([vals] * nd), indexing="ij"), -1).flip(-1)
    g = coords.reshape((1,) + coords.shape)
    for pad in PADS:
        check(_sample("nearest", pad, False), x, g, noncontig=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sampler_ops_direct(dtype):
    # the aten ops themselves, incl. out= and the backward's output_mask
    x = _input((2, 3, 5, 4)).to(dtype)
    g = _grid((2, 3, 6, 2)).to(dtype)
    go = _input((2, 3, 3, 6), seed=3).to(dtype)
    ops = torch.ops.aten
    for interp, pad, align in [(0, 0, False), (2, 1, True)]:
        exp = ops.grid_sampler_2d(x, g, interp, pad, align)
        assert_close(ops.grid_sampler_2d(x.to(DEV), g.to(DEV), interp, pad, align), exp)
        out = torch.empty(0, dtype=dtype, device=DEV)
        ops.grid_sampler_2d.out(x.to(DEV), g.to(DEV), interp, pad, align, out=out)
        assert_close(out, exp)
        for mask in ([True, True], [False, True]):
            e_in, e_grid = ops.grid_sampler_2d_backward(go, x, g, interp, pad, align, mask)
            a_in, a_grid = ops.grid_sampler_2d_backward(go.to(DEV), x.to(DEV), g.to(DEV), interp, pad, align, mask)
            assert (a_in is None) == (e_in is None)
            if e_in is not None:
                assert_close(a_in, e_in, atol=1e-5, rtol=1e-4)
            assert_close(a_grid, e_grid, atol=1e-5, rtol=1e-4)
    x3, g3 = _input((1, 2, 3, 4, 5)).to(dtype), _grid((1, 2, 3, 2, 3)).to(dtype)
    go3 = _input((1, 2, 2, 3, 2), seed=4).to(dtype)
    assert_close(ops.grid_sampler_3d(x3.to(DEV), g3.to(DEV), 0, 2, True), ops.grid_sampler_3d(x3, g3, 0, 2, True))
    e_in, e_grid = ops.grid_sampler_3d_backward(go3, x3, g3, 0, 1, False, [False, True])
    a_in, a_grid = ops.grid_sampler_3d_backward(go3.to(DEV), x3.to(DEV), g3.to(DEV), 0, 1, False, [False, True])
    assert a_in is None and e_in is None
    assert_close(a_grid, e_grid, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("mode", MODES_2D)
def test_grid_sample_bfloat16(mode):
    x = _input((2, 3, 5, 6)).bfloat16()
    g = _grid((2, 4, 7, 2)).bfloat16()
    for pad, align in [("zeros", False), ("reflection", True), ("border", False)]:
        exp = F.grid_sample(x.float(), g.float(), mode=mode, padding_mode=pad, align_corners=align).bfloat16()
        got = F.grid_sample(x.to(DEV), g.to(DEV), mode=mode, padding_mode=pad, align_corners=align)
        assert_close(got, exp)
    # 3-d, and the backward (in float32 then rounded, likewise)
    x3, g3 = _input((1, 2, 3, 4, 5)).bfloat16(), _grid((1, 2, 3, 2, 3)).bfloat16()
    exp = F.grid_sample(x3.float(), g3.float(), mode="bilinear", align_corners=False).bfloat16()
    assert_close(F.grid_sample(x3.to(DEV), g3.to(DEV), mode="bilinear", align_corners=False), exp)
    xg, gg = x.float().requires_grad_(), g.float().requires_grad_()
    F.grid_sample(xg, gg, mode=mode, align_corners=False).sum().backward()
    xt, gt = x.to(DEV).requires_grad_(), g.to(DEV).requires_grad_()
    F.grid_sample(xt, gt, mode=mode, align_corners=False).sum().backward()
    assert_close(xt.grad, xg.grad.bfloat16())
    assert_close(gt.grad, gg.grad.bfloat16(), atol=5e-2, rtol=2e-2)


def test_spatial_transformer():
    # affine_grid -> grid_sample, gradients reaching theta and the image
    theta = torch.tensor([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]], [[1.2, 0.1, 0.0], [-0.1, 0.8, 0.3]]])
    x = _input((2, 3, 6, 5)).requires_grad_()
    theta.requires_grad_()

    def stn(x, theta):
        grid = F.affine_grid(theta, (2, 3, 4, 7), align_corners=False)
        return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)

    check(stn, x, theta, grad=True, noncontig=False, atol=1e-5, rtol=1e-4)


def test_empty_output():
    x = _input((2, 3, 4, 4)).requires_grad_()
    g = _grid((2, 0, 3, 2)).requires_grad_()
    check(_sample("bilinear", "zeros", False), x, g, grad=True, noncontig=False)


def _raises_like_cpu(fn, *args):
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(Exception) as dev:
        fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args])
    assert dev.type is cpu.type, (dev.value, cpu.value)


def test_bad_input():
    x = _input((2, 3, 5, 5))
    gs = lambda x, g, mode="bilinear": F.grid_sample(x, g, mode=mode, align_corners=False)  # noqa: E731
    _raises_like_cpu(gs, x, _grid((2, 4, 4, 3)))  # last dim is not 2
    _raises_like_cpu(gs, x, _grid((3, 4, 4, 2)))  # batch mismatch
    _raises_like_cpu(gs, _input((2, 3, 0, 5)), _grid((2, 4, 4, 2)))  # empty spatial dim
    _raises_like_cpu(gs, x, _grid((2, 4, 4, 2)).double())  # grid of another dtype
    _raises_like_cpu(gs, x.long(), _grid((2, 4, 4, 2)))  # integer input
    _raises_like_cpu(gs, _input((2, 3, 5)), _grid((2, 4, 1)))  # 3-d input
    _raises_like_cpu(gs, _input((2, 3, 4, 5, 5)), _grid((2, 4, 4, 4, 3)), "bicubic")  # bicubic 5-d
    _raises_like_cpu(gs, _input((2, 3, 4, 5, 5)), _grid((2, 4, 4, 2)))  # 5-d input, 4-d grid


def test_bad_grid_rank_meta_error_type():
    # PyTorch's meta for grid_sampler_2d raises ValueError on a 5-d grid; the call is replayed on
    # the CPU so the user gets the CPU kernel's RuntimeError
    _raises_like_cpu(lambda x, g: F.grid_sample(x, g, align_corners=False), _input((2, 3, 5, 5)), _grid((2, 4, 4, 4, 2)))


@pytest.mark.parametrize("nd", [2, 3])
def test_backward_to_input_only(nd):
    """Only the input asks for a gradient (output_mask leaves grad_grid out,
    which the op still returns): the input's gradient as on the CPU."""
    g = torch.Generator().manual_seed(0)
    inp0 = torch.randn(*([1, 2] + [3] * nd), generator=g)
    grid0 = torch.rand(*([1] + [2] * nd + [nd]), generator=g) * 2 - 1
    modes = ["bilinear", "nearest"] + (["bicubic"] if nd == 2 else [])
    for mode in modes:
        grads = []
        for d in ("cpu", "tpu"):
            inp = inp0.clone().to(d).requires_grad_()
            r = torch.nn.functional.grid_sample(inp, grid0.to(d), mode=mode, align_corners=False)
            r.backward(torch.ones_like(r))
            grads.append(inp.grad.cpu())
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-5)
