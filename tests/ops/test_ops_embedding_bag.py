"""nn.functional.embedding_bag / nn.EmbeddingBag on tpu against the CPU:
_embedding_bag(_forward_only) and the dense backward ops (weight and
per_sample_weights gradients)."""
import pytest
import torch
import torch.nn.functional as F

from optest import DEV, assert_close, noncontiguous

IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 7, 3])
OFF = torch.tensor([0, 4, 4, 6, 8])  # bag 1 is empty


def _weight(dtype, nan=False):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(10, 4, generator=g)
    w[6] = w[2]  # equal rows: max ties keep the earliest index
    if nan:
        w[3, 1] = float("nan")
        w[7, 2] = float("nan")
    return w.to(dtype)


def _run(w, idx, off, grad_w=True, psw=None, **kw):
    """F.embedding_bag on CPU and tpu: outputs and gradients."""
    wc = w.clone().requires_grad_(grad_w)
    wt = w.to(DEV).requires_grad_(grad_w)
    if w.dim() == 2 and not w.is_contiguous():
        wt = noncontiguous(w).to(DEV).requires_grad_(grad_w)
        assert not wt.is_contiguous()
    pc = pt = None
    if psw is not None:
        pc = psw.clone().requires_grad_(True)
        pt = psw.to(DEV).requires_grad_(True)
    r = F.embedding_bag(idx, wc, off, per_sample_weights=pc, **kw)
    t = F.embedding_bag(idx.to(DEV), wt, None if off is None else off.to(DEV),
                        per_sample_weights=pt, **kw)
    assert_close(t, r, msg="output")
    if grad_w or psw is not None:
        g = torch.randn(r.shape, generator=torch.Generator().manual_seed(1)).to(r.dtype)
        r.backward(g)
        t.backward(g.to(DEV))
        if grad_w:
            assert_close(wt.grad, wc.grad, msg="weight grad")
        if psw is not None:
            assert_close(pt.grad, pc.grad, msg="per_sample_weights grad")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_modes(dtype, mode, padding_idx, include_last_offset):
    off = torch.cat([OFF, torch.tensor([10])]) if include_last_offset else OFF
    _run(_weight(dtype, nan=mode == "max"), IDX, off, mode=mode,
         padding_idx=padding_idx, include_last_offset=include_last_offset)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_noncontiguous_weight_no_grad(mode):
    w = noncontiguous(_weight(torch.float32))
    _run(w, IDX, OFF, grad_w=False, mode=mode)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_per_sample_weights(dtype, padding_idx):
    psw = torch.rand(10, generator=torch.Generator().manual_seed(2)).to(dtype)
    _run(_weight(dtype), IDX, OFF, psw=psw, mode="sum", padding_idx=padding_idx)


def test_per_sample_weights_noncontiguous():
    psw = noncontiguous(torch.rand(10, generator=torch.Generator().manual_seed(2)))
    _run(_weight(torch.float32), IDX, OFF, psw=psw, mode="sum")


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq(mode):
    _run(_weight(torch.float32), IDX, OFF, mode=mode, scale_grad_by_freq=True)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("itype", [torch.int32, torch.int64])
def test_2d_input_and_int32(mode, itype):
    x = torch.randint(0, 10, (5, 3), generator=torch.Generator().manual_seed(3)).to(itype)
    _run(_weight(torch.float32), x, None, mode=mode)
    _run(_weight(torch.float32), IDX.to(itype), OFF.to(itype), mode=mode)


def test_include_last_offset_short():
    # the last offset stops short of the input: CPU's fast path (sum/mean,
    # no padding) leaves the tail out, its slow path puts it in the last bag.
    # (CPU's sum backward there reads past its gradient for the tail, so
    # only the forward is compared; tpu gives the tail no gradient.)
    off = torch.tensor([0, 4, 4, 6, 8])
    for mode, pad in [("sum", None), ("mean", None), ("sum", 4), ("mean", 4), ("max", None)]:
        _run(_weight(torch.float32), IDX, off, grad_w=(mode, pad) != ("sum", None),
             mode=mode, padding_idx=pad, include_last_offset=True)


def test_all_empty_and_all_padding_bags():
    idx = torch.tensor([4, 4, 1])
    off = torch.tensor([0, 0, 2, 3])
    for mode in ("sum", "mean", "max"):
        _run(_weight(torch.float32), idx, off, mode=mode, padding_idx=4)


@pytest.mark.parametrize("fn", ["_embedding_bag", "_embedding_bag_forward_only"])
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_aux_outputs(fn, mode):
    """offset2bag, bag_size and max_indices hold the CPU's values wherever
    both have them (the tpu's shapes are PyTorch's meta function's)."""
    op = getattr(torch.ops.aten, fn)
    w = _weight(torch.float32)
    r = op(w, IDX, OFF, False, mode, False, None, False, 4)
    t = op(w.to(DEV), IDX.to(DEV), OFF.to(DEV), False, mode, False, None, False, 4)
    assert_close(t[0], r[0], msg="output")
    assert_close(t[1], r[1], msg="offset2bag")
    n = r[2].numel()
    assert_close(t[2][:n], r[2], msg="bag_size")
    if mode == 2 or t[3].numel():
        assert_close(t[3][: r[3].shape[0]], r[3], msg="max_indices")


def test_dense_backward_ops_direct():
    w = _weight(torch.float32)
    g = torch.randn(5, 4, generator=torch.Generator().manual_seed(4))
    r = torch.ops.aten._embedding_bag(w, IDX, OFF, False, 1, False, None, False, -1)
    t = torch.ops.aten._embedding_bag(w.to(DEV), IDX.to(DEV), OFF.to(DEV), False, 1, False, None, False, -1)
    e = torch.ops.aten._embedding_bag_dense_backward(g, IDX, r[1], r[2], r[3], 10, False, 1, None, -1)
    a = torch.ops.aten._embedding_bag_dense_backward(g.to(DEV), IDX.to(DEV), t[1], t[2], t[3], 10, False, 1, None, -1)
    assert_close(a, e)
    e = torch.ops.aten._embedding_bag_per_sample_weights_backward(g, w, IDX, OFF, r[1], 0, 3)
    a = torch.ops.aten._embedding_bag_per_sample_weights_backward(
        g.to(DEV), w.to(DEV), IDX.to(DEV), OFF.to(DEV), t[1], 0, 3)
    assert_close(a, e)


def test_module_training_step():
    torch.manual_seed(0)
    cpu = torch.nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0)
    tpu = torch.nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0)
    tpu.load_state_dict(cpu.state_dict())
    tpu = tpu.to(DEV)
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.5)
    opt_t = torch.optim.SGD(tpu.parameters(), lr=0.5)
    x = torch.randint(0, 20, (4, 5), generator=torch.Generator().manual_seed(5))
    target = torch.randn(4, 6, generator=torch.Generator().manual_seed(6))
    for _ in range(2):
        for m, opt, dev in ((cpu, opt_c, "cpu"), (tpu, opt_t, DEV)):
            opt.zero_grad()
            loss = ((m(x.to(dev)) - target.to(dev)) ** 2).mean()
            loss.backward()
            opt.step()
    assert_close(tpu.weight.detach(), cpu.weight.detach(), atol=1e-5, rtol=1e-5)


def _raises_like_cpu(fn):
    """fn(device) raises the same exception type on CPU and tpu."""
    with pytest.raises(Exception) as ec:
        fn("cpu")
    with pytest.raises(Exception) as et:
        r = fn(DEV)
        r.cpu()
    assert type(et.value) is type(ec.value), (et.value, ec.value)


@pytest.mark.parametrize("idx,off", [
    ([1, 10], [0, 1]),   # index past the table
    ([1, -1], [0, 1]),   # negative index
    ([1, 2], [1, 1]),    # offsets[0] != 0
    ([1, 2], [0, 3]),    # offsets[-1] past the input
])
def test_bad_input_raises_like_cpu(idx, off):
    w = _weight(torch.float32)
    _raises_like_cpu(lambda d: F.embedding_bag(torch.tensor(idx, device=d), w.to(d),
                                               torch.tensor(off, device=d)))


def test_bad_arguments_raise_like_cpu():
    w = _weight(torch.float32)
    _raises_like_cpu(lambda d: F.embedding_bag(IDX.to(d), w.to(d), OFF.to(d), mode="max",
                                               per_sample_weights=torch.ones(10, device=d)))
    _raises_like_cpu(lambda d: F.embedding_bag(IDX.float().to(d), w.to(d), OFF.to(d)))
    _raises_like_cpu(lambda d: F.embedding_bag(IDX.to(d), w.to(d), OFF.to(d), padding_idx=10))


def test_sparse_gradient_is_not_implemented():
    w = _weight(torch.float32).to(DEV).requires_grad_()
    out = F.embedding_bag(IDX.to(DEV), w, OFF.to(DEV), sparse=True)
    with pytest.raises(NotImplementedError, match="sparse"):
        out.sum().backward()


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("psw", [False, True])
def test_bfloat16_sums_round_as_the_cpu(mode, psw):
    # The CPU's fast path rounds its float32 sums to bfloat16 with ties away
    # from zero; sums of a few bfloat16 values hit exact ties often.
    if mode == "mean" and psw:
        pytest.skip("per_sample_weights is for mode='sum' only")
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        w = torch.randn(50, 16, generator=g).bfloat16()
        i = torch.randint(0, 50, (200,), generator=g)
        off = torch.arange(0, 200, 10)
        p = torch.rand(200, generator=g).bfloat16() if psw else None
        want = F.embedding_bag(i, w, off, mode=mode, per_sample_weights=p)
        got = F.embedding_bag(i.to("tpu"), w.to("tpu"), off.to("tpu"), mode=mode,
                              per_sample_weights=None if p is None else p.to("tpu"))
        assert torch.equal(got.cpu(), want)
