"""Softmax, normalisation layers and losses on tpu against CPU, forward and
backward."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, assert_close, check, rand, same_error

FLOATS = [torch.float32, torch.bfloat16]
A = torch.ops.aten


# ------------------------------------------------------------------ softmax


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [1, -1, 0])
def test_softmax(dtype, dim):
    x = rand(3, 4, 5, dtype=dtype, requires_grad=True)
    check(lambda t: F.softmax(t, dim), x, grad=True)
    check(lambda t: F.log_softmax(t, dim), x, grad=True)


def test_softmax_half_to_float_and_specials():
    x = rand(4, 6, dtype=torch.bfloat16)
    # CPU refuses half_to_float (f16 input, f32 result); compare with f32
    xd = x.to(torch.float16).to(DEV)
    assert_close(A._softmax(xd, 1, True), A._softmax(x.float(), 1, False))
    assert_close(A._log_softmax(xd, 0, True), A._log_softmax(x.float(), 0, False))
    # the backward of half_to_float: f32 grads, f16 input dtype
    g = rand(4, 6, seed=3)
    y = A._softmax(x.float(), 1, False)
    # (CPU refuses it too: the reference is the f32 result rounded to f16)
    gd, yd = g.to(DEV), y.to(DEV)
    assert_close(A._softmax_backward_data(gd, yd, 1, torch.float16),
                 A._softmax_backward_data(g, y, 1, torch.float32).half())
    assert_close(A._log_softmax_backward_data(gd, yd.log(), 1, torch.float16),
                 A._log_softmax_backward_data(g, y.log(), 1, torch.float32).half())
    check(lambda gg, yy: A._softmax_backward_data(gg, yy, 1, torch.bfloat16),
          g.bfloat16(), y.bfloat16())
    inf = float("inf")
    s = torch.tensor([[-inf, -inf, -inf], [0.0, -inf, 1.0], [inf, 0.0, 1.0]])
    check(lambda t: (F.softmax(t, 1), F.log_softmax(t, 1)), s)
    check(lambda t: (F.softmax(t, 0), F.log_softmax(t, -1)), torch.tensor(1.5))
    check(lambda t: F.softmax(t, 1), torch.zeros(2, 0))


# ------------------------------------------------------------------ layer norm


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(dtype, affine):
    x = rand(3, 4, 6, dtype=dtype, requires_grad=True)
    w = rand(4, 6, dtype=dtype, requires_grad=True, seed=1) if affine else None
    b = rand(4, 6, dtype=dtype, requires_grad=True, seed=2) if affine else None
    # In bf16 the CPU saves mean/rstd rounded to bf16, the device (like
    # CUDA, as the meta kernel says) in f32; weight gradients that cancel
    # then differ by a few bf16 ulps.
    tol = dict(atol=3e-2) if dtype == torch.bfloat16 else {}
    check(lambda t, ww, bb: F.layer_norm(t, (4, 6), ww, bb, eps=1e-5), x, w, b, grad=True, **tol)
    w1 = rand(6, dtype=dtype, requires_grad=True, seed=3) if affine else None
    check(lambda t, ww: F.layer_norm(t, (6,), ww), x, w1, grad=True, **tol)


def test_layer_norm_outputs_and_masks():
    x = rand(2, 3, 8)
    check(lambda t: A.native_layer_norm(t, [8], None, None, 1e-5), x)
    # only the weight needs a gradient: grad_input is left out by autograd
    xw = rand(2, 3, 8)
    w = rand(8, requires_grad=True, seed=5)
    check(lambda t, ww: F.layer_norm(t, (8,), ww), xw, w, grad=True)


# ------------------------------------------------------------------ batch norm


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(dtype, training):
    x = rand(4, 3, 5, dtype=dtype, requires_grad=True)
    w = rand(3, requires_grad=True, seed=1)
    b = rand(3, requires_grad=True, seed=2)
    rm, rv = rand(3, seed=3), rand(3, seed=4, low=0.5, high=2.0)

    def fn(t, ww, bb, m, v):
        m, v = m.clone(), v.clone()
        y = F.batch_norm(t, m, v, ww.to(t.dtype) if dtype == torch.float32 else ww,
                         bb, training=training, momentum=0.2, eps=1e-4)
        return y, m, v

    # mixed bf16/f32: compare at bf16 tolerance throughout
    check(fn, x, w, b, rm, rv, grad=True, dtype=dtype)


def test_batch_norm_no_stats_and_modules():
    x = rand(4, 3, 2, 2, requires_grad=True)
    check(lambda t: F.batch_norm(t, None, None, training=True), x, grad=True)
    torch.manual_seed(0)
    m = torch.nn.BatchNorm2d(3)
    md = torch.nn.BatchNorm2d(3).to(DEV)
    md.load_state_dict(m.state_dict())
    for train in (True, True, False):
        m.train(train)
        md.train(train)
        xi = rand(4, 3, 2, 2, seed=int(train))
        assert_close(md(xi.to(DEV)), m(xi))
        assert_close(md.running_mean, m.running_mean)
        assert_close(md.running_var, m.running_var)
        assert_close(md.num_batches_tracked, m.num_batches_tracked)


def test_batch_norm_overloads():
    x = rand(4, 3, 5)
    w, b = rand(3, seed=1), rand(3, seed=2)

    def stats():
        return rand(3, seed=3), rand(3, seed=4, low=0.5, high=2.0)

    for fn in (
        lambda t, m, v: (A._native_batch_norm_legit(t, w.to(t.device), b.to(t.device), m, v, True, 0.1, 1e-5), m, v),
        lambda t, m, v: A._native_batch_norm_legit_functional(t, w.to(t.device), None, m, v, True, 0.1, 1e-5),
        lambda t, m, v: A._native_batch_norm_legit.no_stats(t, None, b.to(t.device), True, 0.1, 1e-5),
        lambda t, m, v: A._native_batch_norm_legit_no_training(t, w.to(t.device), b.to(t.device), m, v, 0.1, 1e-5)[0],
        lambda t, m, v: (A._batch_norm_with_update(t, w.to(t.device), b.to(t.device), m, v, 0.1, 1e-5), m, v),
        lambda t, m, v: A._batch_norm_with_update_functional(t, w.to(t.device), b.to(t.device), m, v, 0.1, 1e-5),
        lambda t, m, v: A._batch_norm_no_update(t, w.to(t.device), b.to(t.device), m, v, 0.1, 1e-5)[0],
    ):
        m, v = stats()
        check(fn, x, m, v, noncontig=False)


def test_batch_norm_backward_overloads():
    x, g = rand(4, 3, 5), rand(4, 3, 5, seed=9)
    w = rand(3, seed=1)
    rm, rv = rand(3, seed=3), rand(3, seed=4, low=0.5, high=2.0)
    _, sm, si = A.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5)
    for train in (True, False):
        check(lambda gg, t, ww, m, v, a, c: A.native_batch_norm_backward(
            gg, t, ww, m, v, a, c, train, 1e-5, [True, True, True]), g, x, w, rm, rv, sm, si)
        check(lambda gg, t, m, v, a, c: A.batch_norm_backward(
            gg, t, w.to(t.device), m, v, a, c, train, 1e-5, [True, False, True],
            torch.empty(0, dtype=torch.uint8, device=t.device)), g, x, rm, rv, sm, si)


# ------------------------------------------------------------------ group norm


@pytest.mark.parametrize("dtype", FLOATS)
def test_group_norm(dtype):
    x = rand(2, 6, 3, 2, dtype=dtype, requires_grad=True)
    w = rand(6, dtype=dtype, requires_grad=True, seed=1)
    b = rand(6, dtype=dtype, requires_grad=True, seed=2)
    check(lambda t, ww, bb: F.group_norm(t, 3, ww, bb), x, w, b, grad=True)
    check(lambda t: F.group_norm(t, 2), x, grad=True)


# ------------------------------------------------------------------ nll / cross entropy


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, weighted):
    x = F.log_softmax(rand(6, 5), 1).requires_grad_(True)
    t = torch.tensor([0, 4, 2, 2, 1, 3])
    w = rand(5, seed=1, low=0.1, high=2.0) if weighted else None
    check(lambda a, tt, ww: F.nll_loss(a, tt, ww, reduction=reduction, ignore_index=2),
          x, t, w, grad=True)
    check(lambda a, tt, ww: F.nll_loss(a, tt, ww, reduction=reduction), x, t, w, grad=True)
    # one sample, no batch dim
    check(lambda a, ww: F.nll_loss(a[0], torch.tensor(3, device=a.device), ww, reduction=reduction),
          x, w, grad=True)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss_byte_target(reduction):
    # the CPU kernel takes uint8 class indices as int64 ones
    x = F.log_softmax(rand(6, 5), 1).requires_grad_(True)
    t = torch.tensor([0, 4, 2, 255, 1, 3], dtype=torch.uint8)
    w = rand(5, seed=1, low=0.1, high=2.0)
    check(lambda a, tt, ww: F.nll_loss(a, tt, ww, reduction=reduction, ignore_index=255),
          x, t, w, grad=True)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.int8])
def test_nll_loss_other_target_dtypes_refused_like_cpu(dtype):
    same_error(lambda dev: F.nll_loss(torch.zeros(3, 5, device=dev),
                                      torch.tensor([1, 2, 3], dtype=dtype, device=dev)))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss2d(reduction):
    # log_softmax inside: CPU's nll_loss2d_backward needs a contiguous input
    x = rand(2, 4, 3, 3, requires_grad=True)
    t = torch.randint(0, 4, (2, 3, 3), generator=torch.Generator().manual_seed(1))
    t[0, 0, 0] = -100
    w = rand(4, seed=1, low=0.1, high=2.0)
    check(lambda a, tt: F.nll_loss(F.log_softmax(a, 1), tt, reduction=reduction), x, t, grad=True)
    check(lambda a, tt, ww: F.nll_loss(F.log_softmax(a, 1), tt, ww, reduction=reduction),
          x, t, w, grad=True)


def test_nll_all_ignored_and_nan_elsewhere():
    x = rand(3, 4, requires_grad=True)
    t = torch.tensor([1, 1, 1])
    check(lambda a, tt: F.nll_loss(a, tt, ignore_index=1), x, t, grad=True)
    y = torch.tensor([[float("nan"), 0.5], [0.25, -1.0]])
    check(lambda a, tt: F.nll_loss(a, tt, ignore_index=-1), y, torch.tensor([1, -1]))


def test_nll_target_out_of_bounds():
    x = rand(3, 4)
    t = torch.tensor([0, 4, 1])
    with pytest.raises(IndexError):
        F.nll_loss(x, t)
    with pytest.raises(IndexError):
        F.nll_loss(x.to(DEV), t.to(DEV)).cpu()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy(dtype, smoothing):
    x = rand(6, 5, dtype=dtype, requires_grad=True)
    t = torch.tensor([0, 4, 2, 2, 1, 3])
    w = rand(5, seed=1, low=0.1, high=2.0).to(dtype)
    check(lambda a, tt: F.cross_entropy(a, tt, label_smoothing=smoothing, ignore_index=2),
          x, t, grad=True)
    check(lambda a, tt, ww: F.cross_entropy(a, tt, ww, reduction="sum", label_smoothing=smoothing),
          x, t, w, grad=True)
    if smoothing == 0.0 or torch._C._dispatch_has_kernel_for_dispatch_key(
            "aten::masked_select", "PrivateUse1"):
        # mean with weights and smoothing normalises through masked_select
        check(lambda a, tt, ww: F.cross_entropy(a, tt, ww, label_smoothing=smoothing),
              x, t, w, grad=True)
    check(lambda a, tt: F.cross_entropy(a, tt, reduction="sum", label_smoothing=smoothing),
          x, t, grad=True)
    probs = F.softmax(rand(6, 5, seed=7), 1).to(dtype)
    check(lambda a, p: F.cross_entropy(a, p, label_smoothing=smoothing), x, probs, grad=True)


# ------------------------------------------------------------------ other losses


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_mse_l1_smooth_huber(reduction, dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=True)
    y = rand(4, 5, dtype=dtype, requires_grad=True, seed=1)
    check(lambda a, b: F.mse_loss(a, b, reduction=reduction), x, y, grad=True)
    check(lambda a, b: F.l1_loss(a, b, reduction=reduction), x, y, grad=True)
    check(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.5), x, y, grad=True)
    check(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.7), x, y, grad=True)


def test_mse_broadcast_and_beta_zero():
    x = rand(4, 5, requires_grad=True)
    y = rand(5, seed=1)
    with pytest.warns(UserWarning):
        check(lambda a, b: F.mse_loss(a, b), x, y, grad=True, noncontig=False)
    check(lambda a, b: F.smooth_l1_loss(a, b, beta=0.0), x, rand(4, 5, seed=2), grad=True)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_bce(reduction, dtype):
    x = rand(4, 5, dtype=dtype, low=0.02, high=0.98, requires_grad=True)
    y = rand(4, 5, dtype=dtype, low=0.0, high=1.0, seed=1)
    w = rand(4, 5, dtype=dtype, low=0.1, high=2.0, seed=2)
    check(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), x, y, grad=True)
    check(lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction=reduction), x, y, w, grad=True)
    check(lambda a, b: F.binary_cross_entropy(a, b), torch.tensor([0.0, 1.0, 0.5]),
          torch.tensor([1.0, 0.0, 0.5]))


def test_bce_input_out_of_range():
    x = torch.tensor([0.5, 1.5])
    y = torch.tensor([0.0, 1.0])
    with pytest.raises(RuntimeError):
        F.binary_cross_entropy(x, y)
    with pytest.raises(RuntimeError):
        F.binary_cross_entropy(x.to(DEV), y.to(DEV)).cpu()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_bce_with_logits(reduction, dtype):
    x = rand(4, 5, dtype=dtype, low=-30, high=30, requires_grad=True)
    y = rand(4, 5, dtype=dtype, low=0.0, high=1.0, seed=1)
    w = rand(5, dtype=dtype, low=0.1, high=2.0, seed=2)
    pw = rand(5, dtype=dtype, low=0.1, high=3.0, seed=3)
    check(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction), x, y, grad=True)
    check(lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, reduction=reduction, pos_weight=d),
          x, y, w, pw, grad=True)
