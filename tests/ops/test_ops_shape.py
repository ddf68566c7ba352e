"""Joining, reordering, padding and sorting ops on tpu against CPU: cat/
stack, flip, roll, repeat/tile, constant/reflection/replication padding,
triu/tril, narrow_copy, unfold (backward), the range factories (arange,
linspace, eye, and the composites on them), sort/argsort/topk/kthvalue/
median/nanmedian with NaN, their gradients, in-place and out= forms."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from optest import DEV, assert_close, check, rand

FLOATS = [torch.float32, torch.bfloat16]
ALL = FLOATS + [torch.int64, torch.bool]
NAN = float("nan")


def fp(dtype):
    return dtype.is_floating_point


def f32(dtype):
    """Gradients and non-contiguous layouts are checked in float32."""
    return dtype == torch.float32


def same_error(fn, *args):
    with pytest.raises(Exception) as cpu:
        fn(*args)
    tpu_args = [a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(cpu.type):
        r = fn(*tpu_args)
        for v in r if isinstance(r, (tuple, list)) else [r]:
            v.cpu()


# ------------------------------------------------------------------ cat/stack


@pytest.mark.parametrize("dtype", ALL)
def test_cat(dtype):
    a = rand(3, 4, dtype=dtype, requires_grad=fp(dtype))
    b = rand(3, 2, dtype=dtype, requires_grad=fp(dtype), seed=1)
    check(lambda a, b: torch.cat([a, b, a], 1), a, b, grad=f32(dtype), noncontig=f32(dtype))
    check(lambda a, b: torch.stack([a, b[:, :1].expand(3, 4)], -1), a, b,
          grad=f32(dtype), noncontig=f32(dtype))


def test_cat_promotion_legacy_empty_and_out():
    a, b = rand(2, 3), rand(1, 3, dtype=torch.int64)
    check(lambda a, b: torch.cat([a, b]), a, b)                          # int64 -> float32
    check(lambda a, b: torch.cat([a.bfloat16(), b]), a, b)               # -> bfloat16
    check(lambda a, e: torch.cat([e, a, e], 0), a, torch.empty(0))       # legacy empty skipped
    check(lambda a: torch.cat([a, a[:0]], 0), a)                         # empty along dim
    check(lambda a, b: torch.cat([a, a], 0, out=torch.empty(4, 3, device=a.device)), a, b)
    check(lambda a: torch.cat([a]), a)


def test_cat_errors():
    same_error(lambda a, b: torch.cat([a, b]), rand(2, 3), rand(2, 4))
    same_error(lambda a: torch.cat([a], 2), rand(2, 3))


# ------------------------------------------------------------------ reorder


@pytest.mark.parametrize("dtype", ALL)
def test_flip_roll(dtype):
    x = rand(3, 4, 5, dtype=dtype, requires_grad=fp(dtype))
    kw = dict(grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t: t.flip(0, -1), x, **kw)
    check(lambda t: t.roll(7), x, **kw)                    # flattened
    check(lambda t: t.roll((1, -6), (0, 2)), x, **kw)      # per dim, wraps
    check(lambda t: torch.rot90(t, 1, (1, 2)), x, **kw)    # transpose + flip


@pytest.mark.parametrize("dtype", ALL)
def test_repeat_tile(dtype):
    x = rand(2, 3, dtype=dtype, requires_grad=fp(dtype))
    kw = dict(grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t: t.repeat(2, 1, 3), x, **kw)
    check(lambda t: t.tile((2,)), x, **kw)
    check(lambda t: t.repeat(0, 2), x, noncontig=False)
    same_error(lambda t: t.repeat(2), x)


# ------------------------------------------------------------------ padding


@pytest.mark.parametrize("dtype", ALL)
def test_constant_pad(dtype):
    x = rand(2, 3, 4, dtype=dtype, requires_grad=fp(dtype))
    v = True if dtype == torch.bool else 2
    kw = dict(grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t: F.pad(t, (1, 2), value=v), x, **kw)
    check(lambda t: F.pad(t, (1, -2, -1, 3, 0, 1)), x, **kw)  # negative pads crop
    check(lambda t: torch.constant_pad_nd(t, (0, 0, 2, 0)), x, noncontig=False)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_reflect_replicate_pad(mode, nd):
    shape = {1: (2, 3, 5), 2: (2, 3, 4, 5), 3: (1, 2, 3, 4, 5)}[nd]
    pad = {1: (2, 1), 2: (1, 2, 3, 0), 3: (1, 0, 2, 1, 0, 2)}[nd]
    x = rand(*shape, requires_grad=True)
    check(lambda t: F.pad(t, pad, mode=mode), x, grad=True)


def test_pad_bf16_and_errors():
    x = rand(2, 3, 5, dtype=torch.bfloat16, requires_grad=True)
    check(lambda t: F.pad(t, (2, 1), mode="reflect"), x, grad=True, noncontig=False)
    check(lambda t: F.pad(t, (2, 1), mode="replicate"), x, noncontig=False)
    same_error(lambda t: F.pad(t, (5, 0), mode="reflect"), rand(2, 3, 5))


# ------------------------------------------------------------------ triangles


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("diagonal", [0, 1, -2])
def test_triu_tril(dtype, diagonal):
    x = rand(2, 4, 5, dtype=dtype, requires_grad=fp(dtype))
    kw = dict(grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t: t.triu(diagonal), x, **kw)
    check(lambda t: t.tril(diagonal), x, **kw)


def test_triu_tril_inplace_out_and_errors():
    def through_view(b):
        b = b.clone()
        b[:, 1:].triu_(1)      # a strided window
        b[0].tril_()
        return b
    check(through_view, rand(2, 4, 5))
    check(lambda t: torch.triu(t, out=torch.empty(4, 5, device=t.device)), rand(4, 5))
    same_error(lambda t: t.triu(), rand(3))


# ------------------------------------------------------------------ slicing copies


@pytest.mark.parametrize("dtype", ALL)
def test_narrow_copy_unfold(dtype):
    x = rand(4, 7, dtype=dtype, requires_grad=fp(dtype))
    kw = dict(grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t: t.narrow_copy(1, -5, 3), x, noncontig=f32(dtype))
    check(lambda t: t.unfold(1, 3, 2) * 1, x, **kw)    # backward: unfold_backward
    check(lambda t: t.unfold(0, 2, 1) * 1, x, **kw)    # overlapping windows add up


# ------------------------------------------------------------------ factories


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
def test_arange(dtype):
    for args in [(10,), (2, 11, 3), (5, -3, -2)]:
        assert_close(torch.arange(*args, dtype=dtype, device=DEV), torch.arange(*args, dtype=dtype))
    if dtype.is_floating_point:
        for args in [(0.5, 3, 0.25), (-1.0, 1.0, 0.1)]:
            assert_close(torch.arange(*args, dtype=dtype, device=DEV), torch.arange(*args, dtype=dtype))
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.arange(1, 9, 2, out=out)
    assert_close(out, torch.arange(1, 9, 2, dtype=dtype))


def test_arange_default_dtypes_and_empty():
    assert_close(torch.arange(7, device=DEV), torch.arange(7))
    assert_close(torch.arange(0.0, 2.0, 0.5, device=DEV), torch.arange(0.0, 2.0, 0.5))
    assert_close(torch.arange(3, 3, device=DEV), torch.arange(3, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_linspace_eye(dtype):
    for args in [(-1, 2, 7), (0, 10, 4), (3, -3, 6), (2.5, 2.5, 1), (0, 1, 0)]:
        assert_close(torch.linspace(*args, dtype=dtype, device=DEV), torch.linspace(*args, dtype=dtype))
    assert_close(torch.eye(3, dtype=dtype, device=DEV), torch.eye(3, dtype=dtype))
    assert_close(torch.eye(2, 4, dtype=dtype, device=DEV), torch.eye(2, 4, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_linspace_logspace_into_an_out_of_other_shape(dtype):
    """An out of `steps` elements keeps its shape and strides (filled in
    row-major order through the view); one of another size is resized."""
    for fn, args in ((torch.linspace, (0, 3, 4)), (torch.logspace, (0, 3, 4, 2))):
        for steps_shape in ((2, 2), (5,)):
            cpu, dev = torch.zeros(2, 3, dtype=dtype), torch.zeros(2, 3, dtype=dtype, device=DEV)
            n = 4 if steps_shape == (2, 2) else 5
            a = (args[0], args[1], n) + args[3:]
            r_cpu = fn(*a, dtype=dtype, out=cpu.narrow(1, 1, 2))
            r_dev = fn(*a, dtype=dtype, out=dev.narrow(1, 1, 2))
            assert r_dev.shape == r_cpu.shape and r_dev.stride() == r_cpu.stride()
            assert_close(r_dev, r_cpu)
            assert_close(dev, cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_arange_range_into_an_out_of_other_shape(dtype):
    """As linspace's: an out of as many elements as the range keeps its
    shape and strides, the values filling it in row-major order through
    the view (a strided view, a transposed one); another count resizes."""
    cases = [(torch.arange, (0, 4), lambda t: t.narrow(1, 1, 2)),
             (torch.arange, (1, 9, 2), lambda t: t.t()[1:]),
             (torch.range, (0, 3), lambda t: t.narrow(1, 1, 2)),
             (torch.arange, (0, 6), lambda t: t.narrow(1, 1, 2))]
    for fn, args, view in cases:
        cpu, dev = torch.zeros(2, 3, dtype=dtype), torch.zeros(2, 3, dtype=dtype, device=DEV)
        said = []
        for t in (cpu, dev):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = fn(*args, dtype=dtype, out=view(t))
            said.append(sorted(str(m.message).split(" (Triggered")[0] for m in w))
            r_cpu, r_dev = (r, None) if t is cpu else (r_cpu, r)
        assert said[1] == said[0]   # the resize warning, in the CPU's words, and no other
        assert r_dev.shape == r_cpu.shape and r_dev.stride() == r_cpu.stride()
        assert_close(r_dev, r_cpu)
        assert_close(dev, cpu)


def test_composite_factories():
    for dtype in (torch.float32, torch.int64):
        for args in [(0, 2, 5), (-1, 1, 4, 2.0), (1, 1, 1)]:
            assert_close(torch.logspace(*args, dtype=dtype, device=DEV),
                         torch.logspace(*args, dtype=dtype))
    i = torch.tensor([[0, 3], [2, 1]])
    assert_close(F.one_hot(i.to(DEV), 4), F.one_hot(i, 4))
    assert_close(torch.full((2, 3), 1.5, device=DEV), torch.full((2, 3), 1.5))


# ------------------------------------------------------------------ sorting


def specials():
    """Rows with NaN, infinities and distinct finite values (no ties: CPU's
    default sort is unstable, so tied indices may legitimately differ)."""
    return torch.tensor([[3.0, NAN, -1.0, 7.5, -float("inf"), 0.5],
                         [2.0, 1.0, NAN, NAN, 4.0, -3.0],
                         [float("inf"), -2.0, 6.0, 0.25, -0.5, 9.0]])


def one_nan():
    """At most one NaN per row: CPU's topk/kthvalue order equal NaNs
    arbitrarily."""
    x = specials()
    x[1, 3] = 5.0
    return x


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
@pytest.mark.parametrize("descending", [False, True])
def test_sort(dtype, descending):
    x = torch.randperm(60, generator=torch.Generator().manual_seed(0)).reshape(3, 4, 5).to(dtype)
    x.requires_grad_(fp(dtype))
    kw = dict(grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t: torch.sort(t, 1, descending=descending), x, **kw)
    check(lambda t: torch.sort(t, descending=descending), x, **kw)
    check(lambda t: torch.argsort(t, 0, descending=descending), x, noncontig=False)


def test_sort_nan_stable_bool_and_out():
    x = specials()
    check(lambda t: torch.sort(t, 1), x)
    check(lambda t: torch.sort(t, 1, descending=True), x)
    ties = torch.tensor([3, 1, 3, 1, 2, 1, 3, 2] * 3)
    check(lambda t: torch.sort(t, stable=True), ties, noncontig=False)
    check(lambda t: torch.sort(t, stable=True, descending=True), ties, noncontig=False)
    check(lambda t: torch.sort(t, stable=True), rand(9, dtype=torch.bool), noncontig=False)
    check(lambda t: torch.sort(t), torch.tensor(2.5), noncontig=False)

    def out(t):
        v = torch.empty(0, device=t.device)
        i = torch.empty(0, dtype=torch.long, device=t.device)
        torch.sort(t, 0, out=(v, i))
        return v, i
    check(out, x, noncontig=False)


@pytest.mark.parametrize("op", ["msort", "sort", "sort_stable_desc", "argsort", "topk", "add", "cat"])
@pytest.mark.parametrize("layout", ["transposed", "step", "empty_rows"])
def test_noncontiguous_out_keeps_its_strides(op, layout):
    # An out= of the right sizes keeps its strides (the CPU writes through
    # them); the meta functions of sort/msort restrided it contiguous, so
    # the values landed at the wrong storage positions.
    x = torch.tensor([[3, 1, 2, 5], [0, 255, 7, 7], [4, 2, 2, 1]], dtype=torch.uint8)
    if op == "topk":   # no ties: their order is unspecified
        x = torch.tensor([[3, 1, 2, 5], [0, 255, 7, 6], [4, 8, 2, 1]], dtype=torch.uint8)
    if layout == "empty_rows":
        x = x[:0]
    n, m = x.shape
    if op == "topk":
        m = 2
    elif op == "cat":
        m *= 2

    def out(dtype, dev):
        # the storage is returned whole, so stray writes show
        if layout == "transposed":
            base = torch.full((m, n), 9, dtype=dtype, device=dev)
            return base, base.t()
        base = torch.full((n, 2 * m + 1), 9, dtype=dtype, device=dev)
        return base, base[:, 1::2]

    def run(t):
        (vb, v), (ib, i) = out(t.dtype, t.device), out(torch.long, t.device)
        if op == "msort":
            torch.msort(t, out=v)
        elif op == "sort":
            torch.sort(t, 1, out=(v, i))
        elif op == "sort_stable_desc":
            torch.sort(t, dim=0, descending=True, stable=True, out=(v, i))
        elif op == "argsort":
            torch.argsort(t, dim=1, stable=True, out=i)
        elif op == "topk":
            torch.topk(t, 2, 1, out=(v, i))
        elif op == "add":
            torch.add(t, 1, out=v)
        else:
            torch.cat([t, t], 1, out=v)
        return vb, ib
    check(run, x, noncontig=False)
    check(run, x.float().t().contiguous().t(), noncontig=False)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_topk(dtype):
    x = torch.randperm(60, generator=torch.Generator().manual_seed(1)).reshape(3, 20).to(dtype)
    x.requires_grad_(fp(dtype))
    kw = dict(grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t: torch.topk(t, 4), x, **kw)
    check(lambda t: torch.topk(t, 2, 0, largest=False), x, **kw)
    check(lambda t: torch.topk(t, 3), one_nan(), noncontig=False)     # NaN is largest
    check(lambda t: torch.topk(t, 3, largest=False), one_nan(), noncontig=False)
    same_error(lambda t: torch.topk(t, 21), x.detach())

    def out(t):
        v = torch.empty(0, dtype=t.dtype, device=t.device)
        i = torch.empty(0, dtype=torch.long, device=t.device)
        torch.topk(t, 2, out=(v, i))
        return v, i
    check(out, x.detach(), noncontig=False)


def test_kthvalue_median():
    x = torch.randperm(35, generator=torch.Generator().manual_seed(2)).reshape(5, 7).float()
    x.requires_grad_(True)
    check(lambda t: torch.kthvalue(t, 3, 1), x, grad=True)
    check(lambda t: torch.kthvalue(t, 2, 0, keepdim=True), x, grad=True)
    check(lambda t: torch.median(t, 1), x, grad=True)
    check(lambda t: torch.median(t, 0, keepdim=True), x, grad=True)
    check(torch.median, x, grad=True)
    check(torch.nanmedian, x)
    check(lambda t: torch.median(t, 1), x.detach().long(), noncontig=False)
    check(lambda t: torch.median(t, 1), x.detach().bfloat16(), noncontig=False)
    same_error(lambda t: torch.kthvalue(t, 8, 1), x.detach())


def test_median_nan():
    x = specials()
    check(lambda t: torch.median(t, 1), x, noncontig=False)     # NaN wins: first NaN's index
    check(torch.median, x, noncontig=False)
    check(lambda t: torch.nanmedian(t, 1), x, noncontig=False)  # NaN ignored
    check(torch.nanmedian, x, noncontig=False)
    check(lambda t: torch.kthvalue(t, 6, 1), one_nan(), noncontig=False)
    check(torch.median, torch.empty(0), noncontig=False)


# ------------------------------------------------------------------ binary search


@pytest.mark.filterwarnings("ignore:torch.searchsorted")
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted(right):
    seq = torch.tensor([-2.0, 0.5, 0.5, 1.0, 3.0, 7.0])
    v = torch.tensor([[-3.0, 0.5, 2.0], [7.0, 8.0, NAN]])
    check(lambda s, v: torch.searchsorted(s, v, right=right), seq, v, noncontig=False)
    check(lambda s, v: torch.searchsorted(s, v, side="right" if right else "left", out_int32=True),
          seq, v, noncontig=False)
    rows = torch.sort(rand(2, 7, seed=5)).values                       # per-row sequences
    check(lambda s, v: torch.searchsorted(s, v, right=right), rows, rand(2, 4, seed=6))
    check(lambda s: torch.searchsorted(s, 0.25, right=right), seq, noncontig=False)
    check(lambda v, b: torch.bucketize(v, b, right=right), v, seq, noncontig=False)
    check(lambda b: torch.bucketize(3, b, right=right), seq.long(), noncontig=False)


def test_searchsorted_zero_dim_value_promotes_like_result_type():
    # A 0-d value tensor only decides the comparison dtype beyond the
    # sequence's category: int8 -5 against a uint8 sequence is uint8 251
    # (past the end), a 1-d int8 value compares as int16 -5.
    seq = torch.tensor([0, 10, 200], dtype=torch.uint8)
    for v in (torch.tensor(-5, dtype=torch.int8), torch.tensor(-5), torch.tensor([-5, 5, 100], dtype=torch.int8),
              torch.tensor(-5.5), torch.tensor(True), torch.tensor([], dtype=torch.int8)):
        for right in (False, True):
            check(lambda s, v: torch.searchsorted(s, v, right=right), seq, v, noncontig=False)
            check(lambda s, v: torch.bucketize(v, s, right=right), seq, v, noncontig=False)
    check(lambda s, v: torch.searchsorted(s, v), seq.bool(), torch.tensor(-5), noncontig=False)
    with pytest.raises(NotImplementedError):
        torch.searchsorted(seq.bool().to(DEV), torch.tensor(True, device=DEV))


def test_searchsorted_sorter_int_and_nan_sequence():
    seq = torch.tensor([3.0, -1.0, 5.0, 0.0])
    check(lambda s, v, o: torch.searchsorted(s, v, sorter=o), seq, torch.tensor([0.5, 4.0]),
          torch.argsort(seq), noncontig=False)
    check(lambda s, v: torch.searchsorted(s, v), torch.tensor([1, 3, 5, 9]), torch.tensor([0, 3, 4, 10]),
          noncontig=False)
    check(lambda s, v: torch.searchsorted(s, v), torch.tensor([1, 3, 5]), torch.tensor([2.5, 5.0]),
          noncontig=False)
    check(lambda s, v: torch.searchsorted(s, v), torch.tensor([1.0, 2.0, NAN]),
          torch.tensor([1.5, NAN, 3.0]), noncontig=False)
