"""Convolution, pooling and upsampling on tpu against CPU, forward and
backward: conv1d/2d/3d (stride, padding, dilation, groups, bias,
transposed with output_padding, channels_last), max/avg/adaptive pooling
(indices exactly as the CPU's, ceil_mode, count_include_pad,
divisor_override), nearest/linear interpolation."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, assert_close, check, check_fb, rand

FLOATS = [torch.float32, torch.bfloat16]


def mk(*shape, dtype=torch.float32, seed=None, grad=True):
    return rand(*shape, dtype=dtype, requires_grad=grad and dtype.is_floating_point, seed=seed)


# ------------------------------------------------------------------ convolution

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
SPATIAL = {1: (9,), 2: (7, 6), 3: (5, 6, 4)}

# (nd, stride, padding, dilation, groups); noncontiguous inputs in a few
CONV_CASES = [
    (1, 1, 0, 1, 1),
    (1, 3, 2, 2, 2),
    (2, 2, 1, 1, 2),    # stride 2, padding 1, groups 2
    (2, 1, 1, 2, 1),    # dilation 2
    (2, 2, 0, 1, 1),    # stride 2 with unused trailing input
    (3, 2, 1, 2, 2),
]


@pytest.mark.parametrize("nd,stride,padding,dilation,groups", CONV_CASES)
def test_conv(nd, stride, padding, dilation, groups):
    x = mk(2, 4, *SPATIAL[nd])
    w = mk(6, 4 // groups, *([3] * nd), seed=1)
    b = mk(6, seed=2)
    check_fb(lambda x, w, b: CONV[nd](x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups),
          x, w, b, noncontig=nd == 2 and groups == 2)


def test_conv_no_bias_and_partial_grads():
    x, w = mk(2, 4, 7, 6), mk(6, 2, 3, 2, seed=1)
    check_fb(lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=(1, 0), groups=2), x, w)
    # only the input needs a gradient, then only the weight
    check_fb(lambda x, w: F.conv2d(x, w, padding=1, groups=2), x, w.detach())
    check_fb(lambda x, w: F.conv2d(x, w, padding=1, groups=2), x.detach(), w)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv_asymmetric_and_string_padding():
    x, w = mk(2, 3, 8, 7), mk(4, 3, 3, 4, seed=1)
    check_fb(lambda x, w: F.conv2d(x, w, stride=(1, 2), padding=(2, 0), dilation=(1, 2)), x, w)
    check_fb(lambda x, w: F.conv2d(x, w, padding="same"), x, w)
    check_fb(lambda x, w: F.conv2d(x, w, padding="valid"), x, w)


def test_conv_depthwise_and_1x1():
    x = mk(2, 4, 6, 6)
    check_fb(lambda x, w: F.conv2d(x, w, padding=1, groups=4), x, mk(8, 1, 3, 3, seed=1))
    check_fb(lambda x, w, b: F.conv2d(x, w, b), x, mk(5, 4, 1, 1, seed=1), mk(5, seed=2))


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv_channels_last(dtype):
    x = mk(2, 4, 7, 6, dtype=dtype).detach().contiguous(memory_format=torch.channels_last).requires_grad_()
    assert x.to(DEV).is_contiguous(memory_format=torch.channels_last)
    w = mk(6, 2, 3, 3, dtype=dtype, seed=1)
    b = mk(6, dtype=dtype, seed=2)
    # bf16 as test_conv_bf16: the CPU's own bf16 gradients round differently
    # by its instruction set (AVX2 vs AVX-512), as far from float64 as ours.
    tol = dict(atol=5e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    check_fb(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2), x, w, b,
             noncontig=False, **tol)
    w_cl = w.detach().contiguous(memory_format=torch.channels_last).requires_grad_()
    check_fb(lambda x, w: F.conv2d(x, w, padding=1, dilation=2, groups=2), x, w_cl,
             noncontig=False, **tol)


def test_conv_bf16():
    dt = torch.bfloat16
    x, w, b = mk(2, 4, 9, 8, dtype=dt), mk(6, 2, 3, 3, dtype=dt, seed=1), mk(6, dtype=dt, seed=2)
    check_fb(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
          x, w, b, atol=5e-2, rtol=2e-2)
    check_fb(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1),
          x, mk(4, 3, 3, 3, dtype=dt, seed=3), mk(3, dtype=dt, seed=4), atol=5e-2, rtol=2e-2)


def test_conv_float64_and_int64():
    check_fb(lambda x, w, b: F.conv2d(x, w, b, padding=1), mk(1, 2, 5, 5, dtype=torch.float64),
          mk(3, 2, 3, 3, dtype=torch.float64, seed=1), mk(3, dtype=torch.float64, seed=2))
    i64 = torch.int64
    check(lambda x, w: F.conv2d(x, w, stride=2, padding=1), rand(1, 2, 5, 5, dtype=i64), rand(3, 2, 3, 3, dtype=i64))


# (nd, stride, padding, output_padding, dilation, groups)
CONVT_CASES = [
    (1, 3, 1, 2, 1, 1),
    (2, 1, 0, 0, 1, 1),
    (2, 2, 1, 1, 1, 2),   # output_padding, groups
    (2, 2, 0, 1, 2, 1),   # dilation
    (2, 1, 3, 0, 1, 1),   # padding beyond the kernel's reach: cropped
    (3, 2, 1, 1, 1, 2),
]


@pytest.mark.parametrize("nd,stride,padding,output_padding,dilation,groups", CONVT_CASES)
def test_conv_transpose(nd, stride, padding, output_padding, dilation, groups):
    x = mk(2, 4, *SPATIAL[nd])
    w = mk(4, 6 // groups, *([3] * nd), seed=1)
    b = mk(6, seed=2)
    check_fb(lambda x, w, b: CONV_T[nd](x, w, b, stride=stride, padding=padding, output_padding=output_padding,
                                     groups=groups, dilation=dilation),
          x, w, b, noncontig=nd == 2 and groups == 2)


def test_convolution_ops_direct():
    # _convolution (TorchScript's spelling) and convolution_backward with a
    # partial output_mask, as autograd never asks for it
    x, w = mk(2, 4, 6, 5), mk(6, 2, 3, 3, seed=1)
    check_fb(lambda x, w: torch._convolution(x, w, None, [2, 1], [1, 1], [1, 2], False, [0, 0], 2,
                                             False, False, True, True), x, w)
    go = rand(2, 6, 6, 3)

    def bwd(go, x, w):
        gi, _, gb = torch.ops.aten.convolution_backward(go, x, w, [6], [1], [1], [1, 2], False, [0], 2,
                                                        [True, False, True])
        return gi, gb   # the CPU fills masked-out outputs too; only these are asked for

    check(bwd, go, x.detach(), w.detach(), noncontig=False)


def test_conv_modules_train_step():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Conv2d(8, 4, 3, stride=2, groups=2), torch.nn.AdaptiveAvgPool2d((2, 3)),
                              torch.nn.Flatten(), torch.nn.Linear(24, 5))
    x = rand(2, 3, 12, 12)
    ref = net(x)
    ref.sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    dev = net.to(DEV)
    out = dev(x.to(DEV))
    out.sum().backward()
    assert_close(out, ref, atol=1e-4, rtol=1e-4)
    for p, g in zip(dev.parameters(), grads):
        assert_close(p.grad, g, atol=1e-4, rtol=1e-4)


def test_conv_errors_like_cpu():
    cases = [
        lambda d: F.conv2d(rand(1, 3, 5, 5).to(d), rand(4, 2, 3, 3).to(d)),         # channels
        lambda d: F.conv2d(rand(1, 4, 2, 2).to(d), rand(4, 4, 3, 3).to(d)),         # kernel too big
        lambda d: F.conv2d(rand(1, 4, 5, 5).to(d), rand(4, 4, 3, 3).to(d), padding=-1),
        lambda d: F.conv2d(rand(1, 4, 5, 5).to(d), rand(4, 4, 3, 3).to(d, torch.float64)),
        lambda d: F.conv_transpose2d(rand(1, 4, 5, 5).to(d), rand(4, 4, 3, 3).to(d), stride=2, output_padding=2),
    ]
    for fn in cases:
        with pytest.raises(RuntimeError) as cpu:
            fn("cpu")
        with pytest.raises(RuntimeError) as tpu:
            fn(DEV)
        assert type(tpu.value) is type(cpu.value), (cpu.value, tpu.value)


# ------------------------------------------------------------------ max pooling


# (dtype, kernel, stride, padding, dilation, ceil_mode)
F32, BF16 = torch.float32, torch.bfloat16
MAXPOOL = [
    (F32, 2, None, 0, 1, False),
    (F32, 3, 2, 1, 1, False),
    (F32, 3, 2, 1, 2, True),
    (F32, 2, 3, 0, 1, True),
    (F32, (3, 2), (2, 1), (1, 0), (1, 2), False),
    (BF16, 3, 2, 1, 1, True),
]


@pytest.mark.parametrize("dtype,k,s,p,d,ceil", MAXPOOL)
def test_max_pool2d(dtype, k, s, p, d, ceil):
    x = mk(2, 3, 9, 8, dtype=dtype)
    check_fb(lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True), x,
          noncontig=k == 3 and not ceil)


def test_max_pool_ties_nan_inf_and_ints():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[[[1.0, 1.0, 0.0, nan, 2.0],
                        [1.0, 0.5, nan, 2.0, nan],
                        [-inf, -inf, 3.0, 3.0, 3.0],
                        [-inf, -inf, nan, 1.0, 3.0]]]])
    check(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), x, noncontig=False)
    check(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True), x, noncontig=False)
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), rand(2, 3, 6, 5, dtype=torch.int64))
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), rand(1, 2, 4, 4, dtype=torch.int8))


def test_max_pool_1d_3d_unbatched_channels_last():
    check_fb(lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True), mk(2, 3, 11))
    check_fb(lambda x: F.max_pool1d(x, 2), mk(2, 3, 11))
    check_fb(lambda x: F.max_pool3d(x, 2, 2, 1, return_indices=True), mk(2, 2, 5, 6, 4))
    check_fb(lambda x: F.max_pool2d(x, 3, 2, return_indices=True), mk(3, 8, 7))  # (C, H, W)
    x = mk(2, 3, 8, 8).detach().contiguous(memory_format=torch.channels_last).requires_grad_()
    check_fb(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x, noncontig=False)


@pytest.mark.parametrize("dtype,out", [(F32, (1, 1)), (F32, (3, 2)), (F32, (4, 5)), (BF16, (3, 2))])
def test_adaptive_max_pool2d(dtype, out):
    check_fb(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), mk(2, 3, 9, 7, dtype=dtype),
          noncontig=out == (3, 2))


def test_adaptive_max_pool_3d_and_nan():
    check_fb(lambda x: F.adaptive_max_pool3d(x, (2, 3, 2), return_indices=True), mk(2, 2, 5, 7, 3))
    x = torch.tensor([[[[1.0, float("nan"), 1.0], [2.0, 2.0, float("nan")], [0.0, 5.0, 5.0]]]])
    check(lambda x: F.adaptive_max_pool2d(x, 2, return_indices=True), x, noncontig=False)


# ------------------------------------------------------------------ avg pooling


# (dtype, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVGPOOL = [
    (F32, 2, None, 0, False, True, None),
    (F32, 3, 2, 1, False, True, None),
    (F32, 3, 2, 1, False, False, None),
    (F32, 3, 2, 1, True, True, None),
    (F32, 3, 2, 1, True, False, None),
    (F32, (3, 2), (2, 1), (1, 0), False, True, 5),
    (BF16, 3, 2, 1, True, False, None),
]


@pytest.mark.parametrize("dtype,k,s,p,ceil,cip,div", AVGPOOL)
def test_avg_pool2d(dtype, k, s, p, ceil, cip, div):
    check_fb(lambda x: F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=cip, divisor_override=div),
          mk(2, 3, 9, 8, dtype=dtype), noncontig=k == 3 and not ceil and cip)


def test_avg_pool_1d_3d_ints_channels_last():
    check_fb(lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), mk(2, 3, 10))
    check_fb(lambda x: F.avg_pool3d(x, 2, 2, 1, count_include_pad=False), mk(2, 2, 5, 6, 4))
    check_fb(lambda x: F.avg_pool3d(x, (2, 3, 2), 1, divisor_override=3), mk(1, 2, 4, 5, 4))
    check(lambda x: F.avg_pool2d(x, 3, 2, 1), rand(2, 3, 7, 7, dtype=torch.int64))
    x = mk(2, 3, 8, 8).detach().contiguous(memory_format=torch.channels_last).requires_grad_()
    check_fb(lambda x: F.avg_pool2d(x, 3, 2, 1), x, noncontig=False)


@pytest.mark.parametrize("dtype,out", [(F32, (3, 2)), (F32, (4, 5)), (F32, (9, 7)), (F32, (2, None)),
                                       (F32, (1, 1)), (BF16, (4, 5))])
def test_adaptive_avg_pool2d(dtype, out):
    check_fb(lambda x: F.adaptive_avg_pool2d(x, out), mk(2, 3, 9, 7, dtype=dtype), noncontig=out == (4, 5))


def test_adaptive_avg_pool_3d_unbatched_and_inf():
    check_fb(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), mk(2, 2, 5, 7, 3))
    check_fb(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), mk(3, 7, 5))
    x = rand(1, 1, 6, 6)
    x[0, 0, 0, 0] = float("inf")
    x[0, 0, 5, 5] = float("nan")
    check(lambda x: F.adaptive_avg_pool2d(x, (3, 4)), x, noncontig=False)


def test_pool_errors_like_cpu():
    cases = [
        lambda d: F.max_pool2d(rand(1, 1, 4, 4).to(d), 2, padding=2),            # pad > kernel/2
        lambda d: F.avg_pool2d(rand(1, 1, 2, 2).to(d), 3),                       # output too small
        lambda d: F.max_pool2d(rand(1, 1, 4, 4, dtype=torch.bool).to(d), 2),     # no bool kernel
        lambda d: F.adaptive_avg_pool2d(rand(1, 1, 4, 4, dtype=torch.int64).to(d), 2),
    ]
    for fn in cases:
        with pytest.raises(RuntimeError) as cpu:
            fn("cpu")
        with pytest.raises(RuntimeError) as tpu:
            fn(DEV)
        assert type(tpu.value) is type(cpu.value), (cpu.value, tpu.value)


# ------------------------------------------------------------------ upsampling


NEAREST = [
    ("nearest", dict(scale_factor=2)),
    ("nearest", dict(size=(7, 5))),
    ("nearest", dict(scale_factor=(2.5, 1.5), recompute_scale_factor=False)),
    ("nearest-exact", dict(scale_factor=(1.7, 0.6))),
    ("nearest-exact", dict(scale_factor=(2.5, 1.5), recompute_scale_factor=False)),
]


@pytest.mark.parametrize("mode,kw", NEAREST)
def test_interpolate_nearest(mode, kw):
    check_fb(lambda x: F.interpolate(x, mode=mode, **kw), mk(2, 3, 5, 4), noncontig="size" in kw)


def test_interpolate_nearest_1d_3d_uint8():
    check_fb(lambda x: F.interpolate(x, size=7, mode="nearest"), mk(2, 3, 4))
    check_fb(lambda x: F.interpolate(x, scale_factor=(2, 1.5, 0.5), mode="nearest-exact"), mk(1, 2, 3, 4, 4))
    check(lambda x: F.interpolate(x, scale_factor=3), rand(1, 2, 3, 3, dtype=torch.uint8, low=3))


BILINEAR = [
    (F32, False, dict(scale_factor=2)),
    (F32, True, dict(size=(3, 7))),
    (F32, False, dict(size=(3, 7))),
    (F32, False, dict(scale_factor=(1.3, 0.7), recompute_scale_factor=False)),
    (F32, True, dict(scale_factor=(1.3, 0.7), recompute_scale_factor=False)),
    (BF16, False, dict(scale_factor=2)),
]


@pytest.mark.parametrize("dtype,align,kw", BILINEAR)
def test_interpolate_bilinear(dtype, align, kw):
    check_fb(lambda x: F.interpolate(x, mode="bilinear", align_corners=align, **kw), mk(2, 3, 5, 4, dtype=dtype),
          noncontig=align and "size" in kw)


def test_interpolate_linear_trilinear_nan():
    check_fb(lambda x: F.interpolate(x, size=9, mode="linear"), mk(2, 3, 4))
    check_fb(lambda x: F.interpolate(x, size=(3, 5, 2), mode="trilinear", align_corners=True), mk(1, 2, 2, 3, 4))
    x = rand(1, 1, 4, 4)
    x[0, 0, 1, 2] = float("nan")
    check(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), x, noncontig=False)
    check(lambda x: F.interpolate(x, size=(6, 3), mode="nearest"), x, noncontig=False)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64])
@pytest.mark.parametrize("fn", [lambda x: F.max_pool2d(x, 2), lambda x: F.avg_pool2d(x, 2),
                                lambda x: F.adaptive_max_pool2d(x, 2),
                                lambda x: F.adaptive_avg_pool2d(x, 2)],
                         ids=["max", "avg", "adaptive_max", "adaptive_avg"])
def test_pool_refusal_message(fn, dtype):
    """A dtype the CPU kernel lacks is refused with CPU's message."""
    x = torch.ones(1, 2, 4, 4, dtype=dtype)
    try:
        fn(x)
    except NotImplementedError as e:
        with pytest.raises(NotImplementedError) as tpu:
            fn(x.to(DEV)).cpu()
        assert str(e) in str(tpu.value)
    else:
        check(fn, x, noncontig=False)
