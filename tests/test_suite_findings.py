"""What PyTorch's own test files found on tpu, each checked against the CPU:
reading a view element by element, the exceptions of bad calls (also when
there is nothing to compute), and xlog1py's NaN with a boolean x."""
import re

import pytest
import torch

import torchtpu

T = "tpu"


def outcome(fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return type(e)
    return r.cpu() if isinstance(r, torch.Tensor) else r


def same_outcome(fn):
    cpu, tpu = outcome(lambda: fn("cpu")), outcome(lambda: fn(T))
    if isinstance(cpu, type):
        assert isinstance(tpu, type) and issubclass(tpu, cpu), (cpu, tpu)
    else:
        assert not isinstance(tpu, type), tpu
        torch.testing.assert_close(tpu, cpu, equal_nan=True)


def compiled():
    """Programs compiled so far, once every queued compile is done (the
    compile log is a ring: its length stops growing when it is full)."""
    torch.tpu.synchronize()
    return torchtpu.debug.metrics()["compiles"]


def test_view_reads_compile_nothing():
    """Reading a view (item(), iterating, a strided slice to the host) reads
    the storage where it lies: no program per offset."""
    x = torch.arange(24.0).reshape(4, 6)
    d = x.to(T)
    d.sum().item()
    n = compiled()
    assert [v.item() for v in d[1]] == x[1].tolist()
    assert [v.item() for v in d[:, 2]] == x[:, 2].tolist()
    assert torch.equal(d[:, 1:5:2].cpu(), x[:, 1:5:2])
    assert torch.equal(d.t()[2].to("cpu", torch.int32), x.t()[2].to(torch.int32))
    assert compiled() == n
    # a program's result, a conjugate view and an unwritten storage
    m = d @ d.t()
    assert m[1, 2].item() == (x @ x.t())[1, 2].item()
    c = torch.randn(5, dtype=torch.complex64)
    assert torch.equal(c.to(T).conj()[1:4].cpu(), c.conj()[1:4])
    assert torch.equal(torch.zeros(5, device=T)[1:3].cpu(), torch.zeros(2))
    # a write after a read is seen by the next read
    d[1, 1] = -5
    assert d[1, 1].item() == -5


@pytest.mark.parametrize("case", ["float repeats", "negative", "2-d"])
def test_repeat_interleave_errors(case):
    repeats = {"float repeats": [1.0, 2.0], "negative": [1, -1], "2-d": [[1, 2]]}[case]
    same_outcome(lambda d: torch.repeat_interleave(torch.tensor(repeats, device=d)))


def test_nonzero_out_errors():
    t = torch.tensor([1.0, 0.0, 2.0], device=T)
    with pytest.raises(RuntimeError, match="scalar type Long"):
        torch.nonzero(t, out=torch.empty([], device=T))
    with pytest.raises(RuntimeError, match="on the same device"):
        torch.nonzero(t, out=torch.empty([], dtype=torch.long))


def test_index_put_values_must_broadcast():
    """index_put_ itself takes no extra leading size-1 dims of the values
    (`x[i] = v` drops them before it calls the op)."""
    i = lambda d: (torch.tensor([0, 1], device=d),)  # noqa: E731
    same_outcome(lambda d: torch.zeros(3, device=d).index_put_(i(d), torch.ones(1, 2, device=d)))
    same_outcome(lambda d: torch.rand([], device=d).index_put([], torch.ones(1, device=d), True))

    def setitem(d):
        a = torch.zeros(3, device=d)
        a[i(d)] = torch.ones(1, 1, 2, device=d)
        return a
    same_outcome(setitem)


@pytest.mark.parametrize("shape", [(0,), (3,)])
def test_dtype_errors_also_when_empty(shape):
    same_outcome(lambda d: torch.randint(6, shape, device=d, dtype=torch.complex64))
    same_outcome(lambda d: torch.rand(shape, device=d, dtype=torch.int32))
    same_outcome(lambda d: torch.empty(shape, device=d, dtype=torch.bool).uniform_())
    same_outcome(lambda d: torch.bitwise_not(torch.zeros(shape, device=d)))
    same_outcome(lambda d: torch.relu(torch.zeros(shape, device=d, dtype=torch.complex64)))
    same_outcome(lambda d: torch.bitwise_right_shift(
        torch.zeros(shape, device=d, dtype=torch.bfloat16), False))


@pytest.mark.parametrize("dtype", [torch.bool, torch.int16, torch.float32])
def test_xlog1py_keeps_nan(dtype):
    y = torch.tensor([-1.0, 0.0, 1.0, 2.0, float("inf"), -float("inf"), float("nan"), -2.0])
    for x in (torch.zeros(8, dtype=dtype), torch.ones(8, dtype=dtype)):
        same_outcome(lambda d: torch.special.xlog1py(x.to(d), y.to(d)))
        same_outcome(lambda d: torch.xlogy(x.to(d), y.to(d)))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_pow_large_values_as_cpu(dtype):
    """pow(x, y) with large complex values: the phase of y log x is huge, so
    its last bit decides the signs of the infinite result; each product is
    rounded alone, as the C library's cpow (the CPU) rounds it."""
    import itertools
    vals = [-501, 501, -1001.2, 1001.2, -13437.7, 13437.7, -4988429.2, 4988429.2, -1e20, 1e20]
    c = torch.tensor([complex(a, b) for a, b in itertools.product(vals, vals)], dtype=dtype)
    x, y = c.repeat_interleave(len(c)), c.repeat(len(c))
    want = torch.pow(x, y)
    got = torch.pow(x.to(T), y.to(T)).cpu()
    torch.testing.assert_close(got, want, equal_nan=True)
    # the same values through a strided view, in place
    base = torch.zeros(2, len(x), dtype=dtype)
    base[1] = x
    d = base.to(T)
    d[1].pow_(y.to(T))
    torch.testing.assert_close(d[1].cpu(), want, equal_nan=True)


def same_error(fn):
    """The CPU's exception, type and message, for a call the CPU refuses."""
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value)) as tpu:
        fn(T)
    assert str(cpu.value).split("\n")[0] in str(tpu.value), (str(cpu.value), str(tpu.value))


UNARY_OUTS = [(torch.float32, torch.complex64), (torch.int64, torch.float32),
              (torch.float32, torch.float64), (torch.int32, torch.int64),
              (torch.bool, torch.int64), (torch.float32, torch.bfloat16)]


@pytest.mark.parametrize("op", [torch.neg, torch.round, torch.bitwise_not, torch.conj_physical,
                                torch.nan_to_num, torch.nn.functional.softplus,
                                torch.nn.functional.hardshrink, torch.nn.functional.softshrink,
                                torch.nn.functional.logsigmoid, torch.angle, torch.floor,
                                torch.erf, torch.lgamma, torch.special.i0e,
                                torch.special.bessel_j0, torch.logical_not, torch.sinc],
                         ids=lambda op: op.__name__)
@pytest.mark.parametrize("dtypes", UNARY_OUTS, ids=lambda d: f"{d[0]}-{d[1]}".replace("torch.", ""))
def test_unary_out_of_another_dtype(op, dtypes):
    """An out= of another dtype: refused where the CPU kernel refuses it
    (the ops whose kernels take one dtype, with the CPU's message), cast
    into where the CPU casts (a real function into a complex out=)."""
    a, o = dtypes

    def call(d):
        t = torch.tensor([True, False, True]) if a == torch.bool else torch.arange(1, 4).to(a)
        base = torch.zeros(6, dtype=o, device=d)
        op(t.to(d), out=base[::2])  # a strided out=, through a view
        return base

    try:
        want = call("cpu")
    except Exception:  # noqa: BLE001
        same_error(call)
        return
    # computed in the input's type (float32 tolerances), then cast
    torch.testing.assert_close(call(T).cpu(), want, rtol=1.3e-6, atol=1e-5, equal_nan=True)


def test_checks_the_cpu_kernels_make():
    """Calls each CPU kernel refuses where its meta kernel does not."""
    same_error(lambda d: torch.heaviside(torch.tensor([1, 0], dtype=torch.bool, device=d),
                                         torch.tensor([1.0, 2.0], dtype=torch.bfloat16, device=d)))
    for fn in (torch.all, torch.any):
        for od in (torch.int64, torch.float32):
            same_error(lambda d: fn(torch.ones(3, 4, device=d), 1,
                                    out=torch.empty(3, dtype=od, device=d)))
        same_outcome(lambda d: fn(torch.ones(3, 4, device=d), 1,
                                  out=torch.empty(3, dtype=torch.uint8, device=d)))
    for fn in (torch.max, torch.min):
        same_error(lambda d: fn(torch.randn(2, 0, 4, device=d), 1))
        same_outcome(lambda d: fn(torch.randn(2, 0, 4, device=d), 2).values)


def test_view_offsets_are_run_time_values():
    """A loop over a tensor's rows, columns or blocks compiles one program
    per kind of view, not one per offset: a call that runs now passes its
    views' offsets to the program. Reads and writes (in place through
    strided views) match the CPU."""
    x = torch.randn(16, 40)
    d = x.to(T)
    (d[:, 1] * 2).sum().item()  # warm: one column program
    n = compiled()
    cols = [(d[:, k] * 2 + 1).sum() for k in range(1, 40)]
    rows = [(d[k] - d[k + 1]).abs().max() for k in range(1, 15)]
    blocks = [d[k:k + 2, 3:7].clone() for k in range(1, 14)]
    assert compiled() - n <= 12, torchtpu.debug.compiles()[-13:]
    torch.testing.assert_close(torch.stack(cols).cpu(),
                               torch.stack([(x[:, k] * 2 + 1).sum() for k in range(1, 40)]))
    torch.testing.assert_close(torch.stack(rows).cpu(),
                               torch.stack([(x[k] - x[k + 1]).abs().max() for k in range(1, 15)]))
    for k, b in enumerate(blocks, 1):
        assert torch.equal(b.cpu(), x[k:k + 2, 3:7])
    y = torch.zeros(12, 30)
    e = y.to(T)
    n = compiled()
    for k in range(1, 30):
        for a in (y, e):
            a[:, k] = k
            a[k % 12, 5:9] += 1.5
            a.t()[k, 3:11:2].mul_(0.5)
    assert compiled() - n <= 12, torchtpu.debug.compiles()[-13:]
    assert torch.equal(e.cpu(), y)


@pytest.mark.parametrize("mode", ["debug", "fused"])
def test_view_offsets_in_other_modes(mode):
    """The same loops in debug mode (offsets at run time too) and in fused
    windows (offsets in the window's signature) give the CPU's values."""
    x = torch.randn(8, 10)
    y = x.clone()
    with torchtpu.set_eager_mode(mode):
        d = x.to(T)
        for k in range(1, 10):
            d[:, k] += d[:, k - 1] * 0.5
            y[:, k] += y[:, k - 1] * 0.5
        got = d.cpu()
    torch.testing.assert_close(got, y)


def test_max_pool3d_unbatched_keeps_channels_last_3d():
    """An unbatched (4-d) input whose batch of one is channels_last_3d:
    max_pool3d's output and indices keep that layout, as on the CPU."""
    def call(d):
        x = torch.randn(1, 6, 12, 13, 14, generator=torch.Generator().manual_seed(0))
        x = x.to(d).contiguous(memory_format=torch.channels_last_3d).squeeze(0)
        return torch.nn.functional.max_pool3d(x, (5, 6, 7), return_indices=True)
    (co, ci), (to, ti) = call("cpu"), call(T)
    assert to.stride() == co.stride() and ti.stride() == ci.stride()
    assert torch.equal(to.cpu(), co) and torch.equal(ti.cpu(), ci)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_bag_errors_name_the_problem(mode, dtype, padding_idx):
    """embedding_bag's three data-dependent errors each with the CPU's own
    message (the index one worded as the CPU kernel that meets it words it)."""
    w = torch.randn(10, 4, dtype=dtype)
    for idx, off in [([1, -1], [0]), ([1, 12], [0]), ([1, 1], [1]), ([1, 1], [0, 5])]:
        same_error(lambda d: torch.nn.functional.embedding_bag(
            torch.tensor(idx, device=d), w.to(d), torch.tensor(off, device=d), mode=mode,
            padding_idx=padding_idx))


def test_storage_slice_is_refused_not_a_crash():
    """UntypedStorage[a:b] of a tpu storage would point into another
    buffer's memory: refused where it is made, with a clear error; the
    storage itself, its elements and tensors over it still work."""
    v = torch.arange(15, dtype=torch.int16).reshape(3, 5).to(T)
    s = v.untyped_storage()
    with pytest.raises(NotImplementedError, match="slice of a tpu storage"):
        s[2:4]
    assert s.nbytes() == 30
    assert v.storage()[14] == 14
    t = torch.tensor([], dtype=torch.int16, device=T).set_(torch.UntypedStorage(6, device=T))
    assert t.shape == (3,)


@pytest.mark.parametrize("shape", [(5, 0, 5), (0,), (0, 3), (2, 3)])
@pytest.mark.parametrize("size", [0, 1, 4])
def test_nonzero_static_of_empty_inputs(shape, size):
    """nonzero_static of an input with a dim of size 0 (its coordinates
    once divided by that dim's size, a constant division by zero that
    crashed the compiler): every row is the fill value, as on the CPU."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    x[x.abs() < 0.5] = 0
    assert torch.equal(torch.nonzero_static(x.to(T), size=size, fill_value=-7).cpu(),
                       torch.nonzero_static(x, size=size, fill_value=-7))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_backward_with_no_input_channels(nd):
    """A convolution with no input channels (the CPU's forward then has no
    output channels either): its bias gradient is zeros of the bias, as on
    the CPU, not an internal shape error."""
    f = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[nd]
    got = []
    for d in ("cpu", T):
        x = torch.randn(*([2, 0] + [3] * nd)).to(d).requires_grad_()
        w = torch.randn(*([2, 0] + [2] * nd)).to(d).requires_grad_()
        b = torch.ones(2).to(d).requires_grad_()
        y = f(x, w, b)
        y.sum().backward()
        got.append((y.shape, b.grad.cpu(), w.grad.shape, x.grad.shape))
    assert got[0][0] == got[1][0] and got[0][2:] == got[1][2:]
    assert torch.equal(got[0][1], got[1][1])


def test_cat_of_many_tensors():
    xs = [torch.full((2, i % 3 + 1), float(i)) for i in range(200)]
    assert torch.equal(torch.cat([x.to(T) for x in xs], 1).cpu(), torch.cat(xs, 1))


@pytest.mark.parametrize("case", ["5-d input", "2-d offsets", "3-d weight"])
def test_embedding_bag_dimension_errors(case):
    w, ind, off = torch.zeros(2, 6, dtype=torch.float64), torch.ones(3, dtype=torch.long), torch.zeros(2, dtype=torch.long)
    if case == "5-d input":
        ind, off = torch.full((2, 0, 0, 6, 6), 1), torch.full((2, 0, 0, 6, 6), 0)
    elif case == "2-d offsets":
        off = off.reshape(2, 1)
    else:
        w = torch.zeros(2, 6, 3)
    for f in (torch.embedding_bag, torch._embedding_bag, torch._embedding_bag_forward_only):
        with pytest.raises(RuntimeError) as cpu:
            f(w, ind, off)
        with pytest.raises(RuntimeError, match=str(cpu.value)):
            f(w.to(T), ind.to(T), off.to(T))


@pytest.mark.parametrize("samples", [(0, 16, 3), (1, 15, 3), (1, 16, 2)])
def test_fractional_max_pool3d_sample_shape_errors(samples):
    x, s = torch.randn(1, 16, 10, 8, 8), torch.rand(*samples)
    with pytest.raises(RuntimeError) as cpu:
        torch.ops.aten.fractional_max_pool3d(x, [3, 2, 2], [1, 1, 1], s)
    with pytest.raises(RuntimeError, match=str(cpu.value).replace("(", r"\(").replace(")", r"\)")):
        torch.ops.aten.fractional_max_pool3d(x.to(T), [3, 2, 2], [1, 1, 1], s.to(T))


@pytest.mark.parametrize("value", [[], [1, 2, 3], [1.0, 2.0, 3.0, 4.0], [7.0]])
def test_boolean_assignment_checks_the_shape_before_the_dtype(value):
    """a[mask] = v with v of another dtype: a shape that does not fit is
    the CPU's first complaint, the dtype its second (one value is a fill,
    which converts)."""
    def f(d):
        a = torch.arange(0, 4, device=d)
        a[a > -1] = torch.tensor(value).to(d)
        return a
    try:
        want = f("cpu")
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e).split(",")[0])):
            f(T)
    else:
        assert torch.equal(f(T).cpu(), want)


def test_index_put_with_no_indices_is_an_error():
    with pytest.raises(RuntimeError):
        torch.rand([], device=T).index_put([], torch.tensor([1.0], device=T), True)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "bilinear-aa", "bicubic-aa"])
@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8])
def test_interpolate_integer_dtypes_like_cpu(mode, dtype):
    """The CPU's upsampling kernels take floats, and uint8 (nearest
    always, bilinear/bicubic on the CPU): other integer dtypes are its
    NotImplementedError."""
    m, aa = mode.replace("-aa", ""), mode.endswith("-aa")
    x = torch.arange(2 * 3 * 8 * 8).reshape(2, 3, 8, 8).to(dtype)
    same_outcome(lambda d: torch.nn.functional.interpolate(x.to(d), (5, 12), mode=m, antialias=aa))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_lazy_clone_is_copy_on_write(mode):
    """torch._lazy_clone shares the buffer until either side is written:
    then the written one gets a copy of its own (reading does not copy),
    through ops, in-place views, copies from the host and from tpu."""
    writes = {
        "op": lambda t: t.add_(10),
        "view": lambda t: t[1].mul_(3),
        "host copy": lambda t: t.copy_(torch.full((2, 2), 7.0)),
        "tpu copy": lambda t: t.copy_(torch.full((2, 2), 5.0, device=T)),
        "fill": lambda t: t.fill_(-1),
    }
    with torchtpu.set_eager_mode(mode):
        for name, write in writes.items():
            for side in ("source", "clone"):
                a = torch.tensor([[0.0, 1.0], [2.0, 3.0]], device=T)
                c = a._lazy_clone()
                assert torch._C._is_cow_tensor(a) and torch._C._is_cow_tensor(c)
                _ = (a + c).cpu()  # a read keeps both copy-on-write
                assert torch._C._is_cow_tensor(a) and torch._C._is_cow_tensor(c), name
                w, other = (a, c) if side == "source" else (c, a)
                ref = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
                write(w)
                write(ref)
                assert not torch._C._is_cow_tensor(w), (name, side)
                assert torch.equal(w.cpu(), ref), (name, side)
                assert torch.equal(other.cpu(), torch.tensor([[0.0, 1.0], [2.0, 3.0]])), (name, side)


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.float32])
@pytest.mark.parametrize("alpha", [1.1, True, 2])
def test_add_alpha_checks(dtype, alpha):
    """The CPU kernel's alpha_check: a float alpha for integral (and bool)
    tensors, a bool alpha for anything but bool."""
    x = torch.ones(4, dtype=dtype)
    for f in (torch.add, torch.sub):
        if f is torch.sub and dtype == torch.bool:
            continue
        same_outcome(lambda d: f(x.to(d), x.to(d), alpha=alpha))
