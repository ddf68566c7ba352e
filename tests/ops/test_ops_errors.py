"""Bad calls on tpu fail as they fail on the CPU: the same exception type
and, where the CPU words its own, the same message, also when there is
nothing to compute. The argument checks of indexing (repeat_interleave,
nonzero's out=, index_put, boolean assignment), of dtypes (factories and
ops given one they do not take, softmax of integers, add/sub's alpha, an
interpolation of integers), the checks the CPU's kernels make where their
meta kernels do not, embedding_bag's and fractional_max_pool3d's; and an
out= of another dtype, refused or cast exactly where the CPU's kernel
refuses or casts it."""
import re

import pytest
import torch

from optest import same_error, same_outcome

T = "tpu"


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


def test_softmax_of_integers_is_refused_as_on_cpu():
    # (log_softmax of bool stops earlier, in PyTorch's meta function, with
    # a RuntimeError about subtracting bools)
    for dtype, fns in ((torch.long, 2), (torch.int32, 2), (torch.bool, 1)):
        for f in (lambda t: torch.softmax(t, 0), lambda t: torch.log_softmax(t, 0))[:fns]:
            with pytest.raises(NotImplementedError, match="not implemented for"):
                f(torch.ones(4, dtype=dtype, device="tpu"))
    got = torch.softmax(torch.ones(4, dtype=torch.long, device="tpu"), 0, dtype=torch.float32)
    torch.testing.assert_close(got.cpu(), torch.full((4,), 0.25))


_S, _F = torch.int16, torch.float32
MIXED_PRODUCTS = {
    "mm": lambda A: torch.mm(A(2, 3, d=_S), A(3, 4)),
    "mm, second operand": lambda A: torch.mm(A(2, 3), A(3, 4, d=_S)),
    "mm, empty": lambda A: torch.mm(A(1, 0, d=_S), A(0, 4)),
    "matmul": lambda A: torch.matmul(A(2, 3, d=_S), A(3, 4)),
    "bmm": lambda A: torch.bmm(A(1, 2, 3, d=_S), A(1, 3, 4)),
    "addmm, mat1": lambda A: torch.addmm(A(2, 4), A(2, 3, d=_S), A(3, 4)),
    "addmm, self": lambda A: torch.addmm(A(2, 4, d=_S), A(2, 3), A(3, 4)),
    "addmm, mat2": lambda A: torch.addmm(A(2, 4), A(2, 3), A(3, 4, d=_S)),
    "addmm_": lambda A: A(2, 4).addmm_(A(2, 3, d=_S), A(3, 4)),
    "mv": lambda A: torch.mv(A(2, 3, d=_S), A(3)),
    "mv, vector": lambda A: torch.mv(A(2, 3), A(3, d=_S)),
    "addmv": lambda A: torch.addmv(A(2, d=_S), A(2, 3), A(3)),
    "baddbmm": lambda A: torch.baddbmm(A(1, 2, 4), A(1, 2, 3, d=_S), A(1, 3, 4)),
    "addbmm, batch1": lambda A: torch.addbmm(A(2, 4), A(1, 2, 3, d=_S), A(1, 3, 4)),
    "addbmm, self": lambda A: torch.addbmm(A(2, 4, d=_S), A(1, 2, 3), A(1, 3, 4)),
    "dot": lambda A: torch.dot(A(3, d=_S), A(3)),
}


@pytest.mark.parametrize("case", list(MIXED_PRODUCTS))
def test_products_of_mixed_dtypes_raise_the_cpu_message(case):
    """Matrix products of operands of two dtypes: the CPU kernel's message
    (PyTorch's test_mm_empty_inputs_mixed_dtype_errors matches mm's)."""
    def run(d):
        return MIXED_PRODUCTS[case](lambda *shape, d_=d, d=_F: torch.ones(*shape, dtype=d, device=d_))
    same_error(run)
