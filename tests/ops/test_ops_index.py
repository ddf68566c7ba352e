"""Indexing ops on tpu against CPU: index_select/index_add/index_copy/
index_fill, gather/scatter/scatter_add/scatter_reduce, advanced indexing
(index, index_put_ with integer and boolean indices), nonzero,
masked_select/masked_scatter, take/put, embedding (+ backward, max_norm),
repeat_interleave, bincount, their gradients, in-place forms (also through views),
and the errors CPU raises for out-of-range indices."""
import os

import pytest
import torch
import torch.nn.functional as F

from optest import DEV, assert_close, check, rand

FLOATS = [torch.float32, torch.bfloat16]
ALL = FLOATS + [torch.int64, torch.bool]


def T(*v):
    return torch.tensor(v)


def _materialize(r):
    if isinstance(r, torch.Tensor):
        r.cpu()
    elif isinstance(r, (list, tuple)):
        for v in r:
            _materialize(v)


def same_error(fn, *args):
    """fn raises on CPU, and the same exception type on tpu."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    tpu_args = [a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(cpu.type):
        _materialize(fn(*tpu_args))


def fp(dtype):
    return dtype.is_floating_point


def f32(dtype):
    """Gradients and non-contiguous layouts are checked in float32: the
    layout and backward paths do not depend on the dtype, and every extra
    variant costs compiles."""
    return dtype == torch.float32


# ------------------------------------------------------------------ index_select


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [0, -1])
def test_index_select(dtype, dim):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    i = T(3, 0, 3, 1)  # a repeated index: the gradient accumulates
    check(lambda t, i: t.index_select(dim, i), x, i, grad=f32(dtype), noncontig=f32(dtype))


def test_index_select_int32_0d_and_out():
    x = rand(4, 5)
    check(lambda t, i: t.index_select(1, i), x, T(4, 2).int())
    check(lambda t, i: t.index_select(0, i), x, torch.tensor(2))
    check(lambda t, i: torch.index_select(t, 0, i, out=torch.empty(0, 5, device=t.device)), x, T(1, 1))


# ------------------------------------------------------------------ index_add/copy/fill


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_index_add(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    s = rand(3, 5, dtype=dtype, requires_grad=fp(dtype), seed=1)
    check(lambda t, i, s: t.index_add(0, i, s, alpha=2), x, T(1, 3, 1), s, grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t, i, s: t.index_add(1, i, s), x, T(0, 4, 0), rand(4, 3, dtype=dtype, seed=2), noncontig=f32(dtype))


def test_index_add_inplace_through_view():
    def f(b, i, s):
        b = b.clone()
        b[:, 1:4].index_add_(1, i, s)  # a strided window of b
        return b
    check(f, rand(4, 6), T(0, 2, 0), rand(4, 3, seed=1))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_index_copy(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    s = rand(2, 5, dtype=dtype, requires_grad=fp(dtype), seed=1)
    check(lambda t, i, s: t.index_copy(0, i, s), x, T(3, 1), s, grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t, i, s: t.clone().index_copy_(1, i, s), x.detach(), T(4, 0),
          rand(4, 2, dtype=dtype, seed=2))


@pytest.mark.parametrize("dtype", ALL)
def test_index_fill(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    v = True if dtype == torch.bool else 3
    check(lambda t, i: t.index_fill(1, i, v), x, T(-1, 0, 2), grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t, i, v: t.index_fill(0, i, v), x, T(2), torch.tensor(v, dtype=dtype), noncontig=f32(dtype))

    def through_view(b, i):
        b = b.clone()
        b[1:, ::2].index_fill_(0, i, v)
        return b
    check(through_view, x.detach(), T(0, 2), noncontig=f32(dtype))


# ------------------------------------------------------------------ gather/scatter


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [0, 1])
def test_gather(dtype, dim):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    i = torch.randint(0, 4, (3, 4), generator=torch.Generator().manual_seed(dim))
    check(lambda t, i: t.gather(dim, i), x, i, grad=f32(dtype), noncontig=f32(dtype))


def test_gather_3d_0d_and_out():
    check(lambda t, i: t.gather(2, i), rand(2, 3, 4), torch.randint(0, 4, (2, 2, 6)))
    check(lambda t, i: t.gather(0, i), rand(), torch.tensor(0))
    check(lambda t, i: torch.gather(t, 1, i, out=torch.empty(0, device=t.device)), rand(3, 4),
          torch.tensor([[3, 0], [1, 1], [2, 0]]))
    check(lambda t, i: torch.index_add(t, 0, i, t[:2], out=torch.empty(0, device=t.device)),
          rand(3, 4), T(2, 2))


PERM = torch.tensor([[0, 3, 1, 2, 0], [2, 0, 3, 1, 1], [3, 1, 0, 0, 2]])
# distinct targets per column, so a plain (non-accumulating) scatter is
# well defined
UNIQUE = torch.tensor([[0, 3, 1, 2, 0], [2, 0, 3, 1, 1]])


@pytest.mark.parametrize("dtype", ALL)
def test_scatter(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    s = rand(2, 5, dtype=dtype, requires_grad=fp(dtype), seed=1)
    check(lambda t, i, s: t.scatter(0, i, s), x, UNIQUE, s, grad=f32(dtype), noncontig=f32(dtype))
    big = rand(3, 6, dtype=dtype, seed=1)  # only the part the index covers is used
    check(lambda t, i, s: t.scatter(0, i, s), x.detach(), UNIQUE, big, noncontig=f32(dtype))
    v = False if dtype == torch.bool else -2
    check(lambda t, i: t.scatter(0, i, v), x, UNIQUE, noncontig=f32(dtype))
    check(lambda t, i, s: t.clone().scatter_(1, i, s), x, torch.tensor([[4, 0], [1, 2]]), s, noncontig=f32(dtype))


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_reduce_str():
    x, s = rand(4, 5), rand(3, 5, seed=1)
    check(lambda t, i, s: t.scatter(0, i, s, reduce="add"), x, PERM, s)
    check(lambda t, i, s: t.scatter(0, i, s, reduce="multiply"), x, PERM, s)
    check(lambda t, i: t.scatter(0, i, 1.5, reduce="multiply"), x, PERM)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_scatter_add(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    s = rand(3, 5, dtype=dtype, requires_grad=fp(dtype), seed=1)
    check(lambda t, i, s: t.scatter_add(0, i, s), x, PERM, s, grad=f32(dtype), noncontig=f32(dtype))

    def through_view(b, i, s):
        b = b.clone()
        b.t().scatter_add_(1, i.t(), s.t())
        return b
    check(through_view, x.detach(), PERM, s.detach(), noncontig=f32(dtype))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self,dtype", [(True, torch.float32), (False, torch.float32),
                                                (False, torch.int64)])
def test_scatter_reduce(reduce, include_self, dtype):
    x = rand(4, 5, dtype=dtype)
    s = rand(3, 5, dtype=dtype, seed=1)
    check(lambda t, i, s: t.scatter_reduce(0, i, s, reduce, include_self=include_self),
          x, PERM, s, noncontig=False)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax"])
def test_scatter_reduce_grad(reduce):
    x = rand(4, 5, requires_grad=True)
    s = rand(3, 5, requires_grad=True, seed=1)
    check(lambda t, i, s: t.scatter_reduce(0, i, s, reduce), x, PERM, s, grad=True, noncontig=False)


def test_scatter_reduce_nan_and_bf16():
    x = rand(4, 5)
    s = rand(3, 5, seed=1)
    s[1, 2] = float("nan")
    check(lambda t, i, s: t.scatter_reduce(0, i, s, "amax"), x, PERM, s, noncontig=False)
    check(lambda t, i, s: t.scatter_reduce(0, i, s, "sum", include_self=False),
          x.bfloat16(), PERM, s.bfloat16(), noncontig=False)


# ------------------------------------------------------------------ advanced indexing

INDEXERS = {
    "one": lambda t, i, j: t[i],
    "two": lambda t, i, j: t[i, j],
    "slice_then": lambda t, i, j: t[:, i],
    "broadcast": lambda t, i, j: t[i[:, None], j],
    "separated": lambda t, i, j: t[i, :, j],
    "adjacent": lambda t, i, j: t[:, i, j],
    "with_none": lambda t, i, j: t[None, i, ..., j],
    "int_and_tensor": lambda t, i, j: t[1, :, j],
}


@pytest.mark.parametrize("name", list(INDEXERS))
def test_index(name):
    dtype = torch.float32
    x = rand(3, 4, 5, dtype=dtype, requires_grad=fp(dtype))
    i, j = T(2, 0, -1), T(-4, 3, 1)  # negative indices wrap
    check(lambda t, i, j: INDEXERS[name](t, i, j), x, i, j, grad=f32(dtype), noncontig=f32(dtype))


def test_index_bf16_int64_bool_and_int32():
    check(lambda t, i: t[i], rand(4, 5, dtype=torch.bfloat16, requires_grad=True), T(3, 3, 0),
          grad=True, noncontig=False)
    check(lambda t, i, j: t[i, :, j], rand(3, 4, 5, dtype=torch.int64), T(2, 0), T(-1, 1),
          noncontig=False)
    check(lambda t, i: t[:, i], rand(4, 5, dtype=torch.bool), T(1, 0).int(), noncontig=False)


def test_index_with_cpu_indices():
    x = rand(4, 5)
    i = T(2, 0)
    assert_close(x.to(DEV)[i], x[i])  # CPU index tensors move, as on CUDA
    assert_close(x.to(DEV)[i, torch.tensor(1)], x[i, torch.tensor(1)])


def test_index_empty():
    x = rand(4, 5)
    check(lambda t, i: t[i], x, torch.zeros(0, dtype=torch.long))
    check(lambda t, i: t[:, i], x, torch.zeros(2, 0, dtype=torch.long))


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_index_put(accumulate, dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    v = rand(3, dtype=dtype, requires_grad=fp(dtype), seed=1)
    # accumulate=True may repeat an index; plain assignment may not
    i = T(1, 1, 3) if accumulate else T(1, 0, 3)

    def f(t, i, j, v):
        return t.index_put((i, j), v, accumulate=accumulate)
    check(f, x, i, T(0, 4, -1), v, grad=f32(dtype), noncontig=f32(dtype))

    def rows(t, i, v):
        t = t.clone()
        t.index_put_((i,), v[:, None] * 2, accumulate=accumulate)  # broadcast values
        return t
    check(rows, x.detach(), i, v.detach(), noncontig=f32(dtype))


def test_setitem_through_view_and_scalar():
    def f(b, i):
        b = b.clone()
        v = b[:, 1:]          # a view
        v[i, 2] = 7.0         # index_put_ on the view writes through to b
        v[i] += 1.0
        return b
    check(f, rand(4, 6), T(0, 3))


# ------------------------------------------------------------------ boolean masks


@pytest.mark.parametrize("dtype", ALL)
def test_mask_getitem(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    m = rand(4, 5, seed=3) > 0
    check(lambda t, m: t[m], x, m, grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t, m: t[m[:, 0]], x, m)            # a mask over dim 0
    check(lambda t, m: t[:, m[0]], x, m)            # over dim 1
    check(lambda t, m: t[m[:, 0], 1], x, m)         # a mask and an integer


def test_mask_getitem_cpu_mask_and_byte():
    x = rand(4, 5)
    m = rand(4, 5, seed=3) > 0
    assert_close(x.to(DEV)[m], x[m])
    with pytest.warns(UserWarning):
        r = x.to(DEV)[m.to(torch.uint8).to(DEV)]
    assert_close(r, x[m])


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_mask_setitem(dtype):
    x = rand(4, 5, dtype=dtype)
    m = rand(4, 5, seed=3) > 0
    n = int(m.sum())

    def scalar(t, m):
        t = t.clone()
        t[m] = 5
        return t

    def values(t, m, v):
        t = t.clone()
        t[m] = v
        return t

    def rows(t, m, v):
        t = t.clone()
        t[m[:, 0]] = v    # one row of values for every selected row
        return t

    def accumulate(t, m, v):
        return t.index_put((m,), v, accumulate=True)

    check(scalar, x, m, noncontig=f32(dtype))
    check(values, x, m, rand(n, dtype=dtype, seed=1), noncontig=f32(dtype))
    check(rows, x, m, rand(5, dtype=dtype, seed=2), noncontig=f32(dtype))
    check(rows, x, m, rand(int(m[:, 0].sum()), 5, dtype=dtype, seed=2), noncontig=f32(dtype))
    check(accumulate, x, m, rand(n, dtype=dtype, seed=1), noncontig=f32(dtype))


@pytest.mark.parametrize("shape", [(0, 3, 3), (3, 0, 3), (2, 3, 0)])
def test_index_into_a_size_0_dim_raises(shape):
    # An integer index into a dim of size 0 is out of bounds whatever its
    # values (IndexError on the CPU), also where the call has no element to
    # write; a mask of the wrong shape too.
    x = torch.zeros(*shape, dtype=torch.uint8)
    zero = [d for d, n in enumerate(shape) if n == 0][0]
    at = lambda i: (slice(None),) * zero + (i,)

    def put(t, idx, v=5):
        t[idx] = v
        return t
    same_error(lambda t: put(t, at(torch.tensor([0, -1], device=t.device))), x)
    same_error(lambda t: put(t, at(torch.tensor([0], device=t.device)), torch.ones(2, dtype=t.dtype, device=t.device)), x)
    same_error(lambda t: t.index_put_(at(torch.tensor([1], device=t.device)),
                                      torch.tensor(1, dtype=t.dtype, device=t.device), accumulate=True), x)
    same_error(lambda t: t[at(torch.tensor([0], device=t.device))], x)
    if zero > 0:
        same_error(lambda t: put(t, torch.zeros(0, dtype=torch.bool, device=t.device)), x)
    # an empty index, or one into a dim that is not empty, is fine
    check(lambda t: put(t.clone(), at(torch.tensor([], dtype=torch.long, device=t.device))), x, noncontig=False)
    other = 1 if zero != 1 else 2
    idx = (slice(None),) * other + (torch.tensor([1, -1]),)
    check(lambda t: put(t.clone(), tuple(i.to(t.device) if isinstance(i, torch.Tensor) else i for i in idx)),
          x, noncontig=False)


def test_mask_setitem_grad_and_mixed():
    x = rand(4, 5, requires_grad=True)
    m = rand(4, 5, seed=3) > 0
    v = rand(int(m.sum()), requires_grad=True, seed=1)
    check(lambda t, m, v: t.index_put((m,), v), x, m, v, grad=True)
    rm = T(True, False, True, True)

    def mixed(t, rm, j):
        t = t.clone()
        t[rm, j] = -1.0       # a mask with an integer index: via nonzero
        return t
    check(mixed, x.detach(), rm, T(0, 2, 4))


def test_mask_count_mismatch_raises():
    x = rand(4, 5)
    m = rand(4, 5, seed=3) > 0

    def f(t, m):
        t = t.clone()
        t[m] = torch.ones(int(m.sum()) + 1, device=t.device)
        return t
    same_error(f, x, m)

    def rows(t, m):
        t = t.clone()
        t[:, m[0]] = torch.ones(4, 9, device=t.device)
        return t
    with pytest.raises(RuntimeError) as cpu:
        rows(x, m)
    with pytest.raises(RuntimeError) as dev:
        rows(x.to(DEV), m.to(DEV)).cpu()
    assert str(cpu.value) in str(dev.value)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.uint8])
@pytest.mark.parametrize("accumulate", [False, True])
def test_mask_put_with_no_values(mask_dtype, accumulate):
    """index_put_ with an all-false mask and no values changes nothing; a
    mask with true elements and no values raises the CPU's error; a uint8
    mask warns as the CPU does."""
    import warnings
    for dev in ("cpu", DEV):
        mask = torch.zeros(10, dtype=mask_dtype, device=dev)
        y = torch.ones(10, 10, device=dev)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y.index_put_((mask,), y[mask], accumulate=accumulate)
        assert torch.equal(y.cpu(), torch.ones(10, 10))
        byte = [x for x in w if "torch.uint8 is now deprecated" in str(x.message)]
        assert len(byte) == (2 if mask_dtype == torch.uint8 else 0), (dev, [str(x.message) for x in w])
    m = torch.zeros(10, dtype=mask_dtype)
    m[3] = 1

    def put(t, m):
        t = t.clone()
        t.index_put_((m,), torch.ones(0, 10, device=t.device), accumulate=accumulate)
        return t
    same_error(put, torch.ones(10, 10), m)


def test_mask_shape_mismatch_raises():
    same_error(lambda t, m: t[m], rand(4, 5), torch.ones(3, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_nonzero(dtype):
    x = rand(3, 4, 5, dtype=dtype)
    if dtype != torch.bool:
        x[x.abs() < 1] = 0
    check(torch.nonzero, x, noncontig=f32(dtype))
    check(lambda t: torch.nonzero(t, as_tuple=True), x, noncontig=f32(dtype))
    check(torch.nonzero, torch.zeros(4, 5), noncontig=f32(dtype))
    check(torch.nonzero, torch.tensor(3.0), noncontig=f32(dtype))
    check(lambda t: torch.nonzero_static(t, size=50, fill_value=-7), x, noncontig=f32(dtype))
    check(lambda t: torch.nonzero_static(t, size=3), x, noncontig=f32(dtype))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_masked_select(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    m = rand(5, seed=3) > 0                       # broadcast over rows
    check(torch.masked_select, x, m, grad=f32(dtype), noncontig=f32(dtype))
    check(torch.masked_select, x, rand(4, 5, seed=4) > 0, grad=f32(dtype), noncontig=f32(dtype))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_masked_scatter(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    m = rand(4, 5, seed=3) > 0
    s = rand(24, dtype=dtype, requires_grad=fp(dtype), seed=1)
    check(lambda t, m, s: t.masked_scatter(m, s), x, m, s, grad=f32(dtype), noncontig=f32(dtype))
    check(lambda t, m, s: t.clone().masked_scatter_(m[0], s[:30].reshape(6, 4)), x, m, s, noncontig=f32(dtype))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_masked_scatter_broadcasts_self(dtype):
    # the functional form broadcasts a 1-d self against a 2-d mask
    x = rand(5, dtype=dtype, requires_grad=fp(dtype))
    m = rand(4, 5, seed=4) > 0
    s = rand(4, 5, dtype=dtype, requires_grad=fp(dtype), seed=2)
    check(lambda t, m, s: t.masked_scatter(m, s), x, m, s, grad=f32(dtype), noncontig=f32(dtype))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_index_put_every_dim_indexed(dtype):
    # no window dims left: the scatter's update is one element per index
    x = rand(3, 4, 5, dtype=dtype, requires_grad=fp(dtype))
    v = rand(6, 2, 1, dtype=dtype, requires_grad=fp(dtype), seed=1)
    i, j, k = T(0, 2, 1, 1, 0, 2)[:, None, None], T(3, 1)[None, :, None], T(4, 0)[None, None, :1]
    check(lambda t, v: t.index_put((i, j, k), v, accumulate=True), x, v, grad=f32(dtype), noncontig=f32(dtype))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    x = rand(5, 4, dtype=dtype, requires_grad=fp(dtype))
    src = rand(3, 4, dtype=dtype, requires_grad=fp(dtype), seed=1)
    g = f32(dtype) and reduce != "prod"
    check(lambda t, i, s: t.index_reduce(0, i, s, reduce, include_self=include_self), x, T(4, 0, 4), src,
          grad=g, noncontig=f32(dtype))
    check(lambda t, i, s: t.clone().index_reduce_(1, i, s, reduce, include_self=include_self),
          x, T(3, 1), rand(5, 2, dtype=dtype, seed=2), noncontig=False)


def test_index_reduce_bad_reduce_raises():
    same_error(lambda t, s: t.index_reduce(0, T(0), s, "sum"), rand(3, 2), rand(1, 2))


def test_index_reduce_source_of_another_dtype_raises():
    # PyTorch's meta kernel lets it through; the CPU kernel refuses it
    same_error(lambda t, s: t.clone().index_reduce_(0, T(0), s, "amax"),
               rand(3, 2, dtype=torch.int64), rand(1, 2))
    with pytest.raises(RuntimeError, match=r"self \(Long\) and source \(Float\) must have the same"):
        rand(3, 2, dtype=torch.int64).to(DEV).index_reduce_(0, T(0).to(DEV), rand(1, 2).to(DEV), "amax")


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_unpool(dtype):
    x = rand(2, 3, 6, 8, dtype=torch.float32)
    v, i = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
    v = v.to(dtype).requires_grad_(fp(dtype))
    check(lambda t, j: torch.nn.functional.max_unpool2d(t, j, 2), v, i, grad=f32(dtype), noncontig=False)
    # a non-contiguous self (the CPU kernel rejects non-contiguous indices)
    check(lambda t, j: torch.nn.functional.max_unpool2d(t.transpose(2, 3).contiguous().transpose(2, 3), j, 2),
          v, i, noncontig=False)
    check(lambda t, j: torch.nn.functional.max_unpool2d(t, j, 2, output_size=(7, 9)), v, i, noncontig=False)
    x3 = rand(1, 2, 4, 4, 6, dtype=torch.float32)
    v3, i3 = torch.nn.functional.max_pool3d(x3, 2, return_indices=True)
    check(lambda t, j: torch.nn.functional.max_unpool3d(t, j, 2), v3.to(dtype), i3, noncontig=False)


def test_max_unpool_integer_not_implemented():
    same_error(lambda t, j: torch.nn.functional.max_unpool2d(t, j, 1), torch.ones(1, 1, 2, 2, dtype=torch.int64),
               torch.zeros(1, 1, 2, 2, dtype=torch.int64))


def test_max_unpool_bad_index_raises():
    same_error(lambda t, j: torch.nn.functional.max_unpool2d(t, j, 1), rand(1, 1, 2, 2),
               torch.tensor([[[[0, 1], [2, 9]]]]))


def test_masked_scatter_too_few_raises():
    same_error(lambda t, m, s: t.masked_scatter(m, s), rand(4, 5),
               torch.ones(4, 5, dtype=torch.bool), rand(7))


# ------------------------------------------------------------------ take/put


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_take_put(dtype):
    x = rand(4, 5, dtype=dtype, requires_grad=fp(dtype))
    i = torch.tensor([[0, 19, -1], [7, -20, 3]])
    check(torch.take, x, i, grad=f32(dtype), noncontig=f32(dtype))
    s = rand(4, dtype=dtype, seed=1)
    check(lambda t, i, s: t.clone().put_(i, s), x.detach(), T(3, 0, -1, 12), s, noncontig=f32(dtype))
    check(lambda t, i, s: t.put(i, s, accumulate=True), x.detach(), T(3, 3, -1, 3), s, noncontig=f32(dtype))


# ------------------------------------------------------------------ embedding


@pytest.mark.parametrize("dtype,padding_idx,scale", [
    (torch.float32, None, False), (torch.float32, 2, False), (torch.float32, -1, True),
    (torch.bfloat16, 2, True)])
def test_embedding(dtype, padding_idx, scale):
    w = rand(6, 4, dtype=dtype, requires_grad=True)
    i = torch.tensor([[0, 2, 2], [5, 1, 2]])
    check(lambda w, i: F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale),
          w, i, grad=True, noncontig=f32(dtype))


def test_embedding_index_shapes_dtypes_and_errors():
    """aten::embedding is one engine op: 0-d, int32, empty and 3-d
    indices, complex weights, and the CPU's errors for a bad index dtype
    or a weight that is not 2-D."""
    w = rand(6, 4)
    for i in (torch.tensor(3), torch.tensor([[1, 5], [0, 0]], dtype=torch.int32),
              torch.zeros(0, 3, dtype=torch.long), torch.tensor([[[1], [2]], [[5], [0]]])):
        check(lambda w, i: F.embedding(i, w), w, i, noncontig=False)
    check(lambda w, i: F.embedding(i, w), torch.randn(5, 3, dtype=torch.complex64), T(0, 4, 4),
          noncontig=False)
    same_error(lambda w, i: F.embedding(i, w), w, torch.tensor([0.5]))
    same_error(lambda w, i: F.embedding(i, w), rand(6), T(1))


def test_embedding_max_norm():
    w = rand(6, 4, low=-3, high=3)
    i = torch.tensor([0, 2, 2, 5])

    def f(w, i):
        w = w.clone()
        return F.embedding(i, w, max_norm=1.5, norm_type=2.0), w   # renorms w in place
    check(f, w, i, noncontig=False)

    def f1(w, i):
        w = w.clone()
        return F.embedding(i, w, max_norm=2.0, norm_type=1.0), w
    check(f1, w, i, noncontig=False)


# ------------------------------------------------------------------ repeat_interleave


def test_repeat_interleave():
    check(torch.repeat_interleave, T(2, 0, 3, 1))
    x = rand(3, 4, requires_grad=True)
    check(lambda t, r: t.repeat_interleave(r, dim=0), x, T(1, 0, 3), grad=True)
    check(lambda t: t.repeat_interleave(2, dim=1), x, grad=True)
    check(lambda r: torch.repeat_interleave(r, output_size=6), T(2, 0, 3, 1))
    same_error(torch.repeat_interleave, T(2, -1))


def test_bincount():
    x = torch.tensor([0, 3, 3, 1, 7, 3])
    check(torch.bincount, x, noncontig=False)
    check(lambda x: torch.bincount(x, minlength=10), x, noncontig=False)
    check(lambda x, w: torch.bincount(x, w), x, rand(6, seed=1), noncontig=False)
    check(lambda x, w: torch.bincount(x, w), x, rand(6, dtype=torch.bfloat16, seed=1), noncontig=False)
    check(lambda x: torch.bincount(x, minlength=2), torch.zeros(0, dtype=torch.long), noncontig=False)
    same_error(torch.bincount, T(1, -1))


# ------------------------------------------------------------------ range checks


OUT_OF_RANGE = {
    "index_select": lambda t, i: t.index_select(0, i),
    "index_select_neg": lambda t, i: t.index_select(0, -i),
    "gather": lambda t, i: t.gather(0, i[None].expand(1, 5)),
    "scatter": lambda t, i: t.scatter(0, i[None].expand(1, 5), 1.0),
    "scatter_add": lambda t, i: t.scatter_add(0, i[None].expand(1, 5), t[:1]),
    "scatter_reduce": lambda t, i: t.scatter_reduce(0, i[None].expand(1, 5), t[:1], "amax"),
    "index_add": lambda t, i: t.index_add(0, i, t[:1]),
    "index_copy": lambda t, i: t.index_copy(0, i, t[:1]),
    "index_fill": lambda t, i: t.index_fill(0, i, 1.0),
    "getitem": lambda t, i: t[i],
    "getitem_neg": lambda t, i: t[-i - 1],
    "getitem_dim1": lambda t, i: t[:, i + 1],
    "getitem_two": lambda t, i: t[torch.zeros_like(i), i + 1],
    "setitem": lambda t, i: t.index_put((i,), torch.ones((), device=t.device)),
    "setitem_acc": lambda t, i: t.index_put((i,), torch.ones((), device=t.device), accumulate=True),
    "take": lambda t, i: t.take(i * 5),
    "put": lambda t, i: t.put(i * 5, torch.ones(1, device=t.device)),
    "embedding": lambda t, i: F.embedding(i, t),
}


@pytest.mark.parametrize("name", list(OUT_OF_RANGE))
def test_out_of_range_index_raises_like_cpu(name):
    x = rand(4, 5)
    i = T(4)  # one past the end of dim 0
    fn = OUT_OF_RANGE[name]
    with pytest.raises(Exception) as cpu:
        fn(x, i)
    t = x.to(DEV)
    with pytest.raises(cpu.type) as dev:
        _materialize(fn(t, i.to(DEV)))
    # CPU's message, after the op name
    assert str(cpu.value).split("\n")[0] in str(dev.value), (str(cpu.value), str(dev.value))
    # the device and the input stay usable
    assert_close(t.index_select(0, T(1).to(DEV)), x.index_select(0, T(1)))


def test_index_checks_switch_off():
    """TORCHTPU_CHECK_INDICES=0 skips the host read: no error, no crash,
    reads stay in range (XLA clamps), scatters drop the bad update."""
    x = rand(4, 5)
    t = x.to(DEV)
    os.environ["TORCHTPU_CHECK_INDICES"] = "0"
    try:
        r = t[T(9).to(DEV)].cpu()
        assert r.shape == (1, 5) and torch.isin(r, x).all()
        s = t.index_put((T(9, 1).to(DEV),), torch.tensor(7.0, device=DEV)).cpu()
        expect = x.clone()
        expect[1] = 7.0
        assert_close(s, expect)
    finally:
        del os.environ["TORCHTPU_CHECK_INDICES"]
    with pytest.raises(IndexError):
        t[T(9).to(DEV)].cpu()


def test_shape_errors_like_cpu():
    x = rand(4, 5)
    same_error(lambda t, i: t[i, i, i], x, T(0))                       # too many indices
    same_error(lambda t, i, j: t[i, j], x, T(0, 1), T(0, 1, 2))          # no broadcast
    for bad in (T(0.5), T(1).short()):                                  # index dtypes
        same_error(lambda t, i: t.index_select(0, i), x, bad)
        same_error(lambda t, i: t.index_add(0, i, t[:1]), x, bad)
        same_error(lambda t, i: t[i], x, bad)
        same_error(lambda t, i: t.index_put((i,), t[0, 0]), x, bad)
    for bad in (T(1).int(), T(0.5)):
        same_error(lambda t, i: t.index_copy(0, i, t[:1]), x, bad)
        same_error(lambda t, i: t.index_fill(0, i, 1.0), x, bad)
        same_error(lambda t, i: t.put(i, t[0, :1]), x, bad)
    same_error(lambda t, i: t.gather(0, i), x, T(0, 1))                  # rank mismatch
    same_error(lambda t, i, v: t.index_put((i,), v), x, T(0, 1), torch.ones(3, 5))
    d = torch.ones(2, 5, dtype=torch.float64)                            # source dtypes
    same_error(lambda t, i, v: t.index_put((i,), v), x, T(0, 1), d)
    same_error(lambda t, m, v: t.index_put((m,), v), x, x > 0, torch.ones(1, 1, dtype=torch.int64) + d[:, :1])
    # one mask and one value: CPU fills (converting the value), no error
    check(lambda t, m, v: t.index_put((m,), v), x, x > 0, torch.ones((), dtype=torch.float64))
    same_error(lambda t, i, v: t.index_add(0, i, v), x, T(0, 1), d)
    same_error(lambda t, i, v: t.index_copy(0, i, v), x, T(0, 1), d)
    same_error(lambda t, i, v: t.put(i, v), x, T(0, 1), d[0, :2])


def test_a_write_whose_source_is_self_raises_as_on_the_cpu():
    """scatter_, index_fill_, index_copy_, put_, gather(out=) and
    index_select(out=) refuse any overlap of what they write with what they
    read, the whole tensor passed twice included; pointwise ops accept it
    (x.add_(x)). Asked of the CPU once per op and aliasing, then remembered:
    the second call answers the same."""
    def cases(d):
        i = torch.tensor([2, 1, 0], device=d)
        x = lambda: torch.arange(3.0, device=d)   # noqa: E731
        return {
            "scatter_ src": lambda: (lambda s: s.scatter_(0, i, s))(x()),
            "scatter_ index": lambda: (lambda j: j.scatter_(0, j, j.clone()))(i.clone()),
            "index_fill_": lambda: (lambda j: j.index_fill_(0, j, 0))(i.clone()),
            "index_copy_": lambda: (lambda s: s.index_copy_(0, i, s))(x()),
            "put_": lambda: (lambda s: s.put_(i, s))(x()),
            "gather out": lambda: (lambda s: torch.gather(s, 0, i, out=s))(x()),
            "index_select out": lambda: (lambda s: torch.index_select(s, 0, i, out=s))(x()),
            "add_": lambda: (lambda s: s.add_(s))(x()),
            "add out": lambda: (lambda s: torch.add(s, s, out=s))(x()),
            "addcmul_": lambda: (lambda s: s.addcmul_(s, s))(x()),
        }
    cpu, dev = cases("cpu"), cases(DEV)
    for name in cpu:
        for _ in range(2):
            try:
                want = cpu[name]()
            except RuntimeError as e:
                assert "unsupported operation" in str(e)
                with pytest.raises(RuntimeError, match="unsupported operation"):
                    dev[name]()
                continue
            assert_close(dev[name]().cpu(), want, msg=name)


def test_index_fill_into_a_broadcast_view():
    """index_fill_ writes one value wherever it writes, so a broadcast
    (expanded) self is exact on the device: the CPU's values and its
    deprecation warning."""
    for value in (1.5, torch.tensor(2.5)):
        cpu = torch.zeros(1, 4).expand(3, 4)
        dev = torch.zeros(1, 4, device=DEV).expand(3, 4)
        with pytest.warns(UserWarning, match="index_fill_ on expanded tensors"):
            cpu.index_fill_(1, torch.tensor([2, 0]), value)
        with pytest.warns(UserWarning, match="index_fill_ on expanded tensors"):
            dev.index_fill_(1, torch.tensor([2, 0], device=DEV),
                            value.to(DEV) if isinstance(value, torch.Tensor) else value)
        assert_close(dev, cpu)
