"""_foreach_* ops on tpu against CPU (whose foreach ops are the per-tensor
slow path): lists mixing shapes, a 0-d and a non-contiguous element, every
overload kind (List, Scalar, ScalarList, Tensor, ScalarAndTensor), in-place
and functional, per-element type promotion, in-place through views,
runtime scalars (a new value never recompiles), and CPU-identical errors."""
import math

import pytest
import torch
import torchtpu

from optest import DEV, assert_close, rand

FLOATS = [torch.float32, torch.bfloat16]
SHAPES = [(3, 4), (2, 3, 2), ()]


def make_list(dtype=torch.float32, seed=0, low=-2.0, high=2.0, shapes=SHAPES):
    out = []
    for i, s in enumerate(shapes):
        t = rand(*s, dtype=dtype, low=low, high=high, seed=(seed, i))
        if i == 0:  # a non-contiguous element with the same values
            t = t.t().contiguous().t()
        out.append(t)
    return out


class CpuScalar:
    """A 0-d CPU tensor argument: stays on the CPU in the tpu run too."""

    def __init__(self, value, dtype=torch.float32):
        self.value, self.dtype = value, dtype

    def tensor(self):
        return torch.tensor(self.value, dtype=self.dtype)


def prepare(args, device):
    out = []
    for a in args:
        if isinstance(a, CpuScalar):
            out.append(a.tensor())
        elif isinstance(a, list):
            out.append([t.clone().to(device) for t in a])
        elif isinstance(a, torch.Tensor):
            out.append(a.clone().to(device))
        else:
            out.append(a)
    return out


def clone_args(args):
    return prepare(args, "cpu")


def run_both(fn, *args, inplace=False, dtype=None, atol=None, rtol=None):
    """fn on CPU copies and on tpu copies of args; compares the results and,
    for in-place ops, the first (mutated) list."""
    cpu_args, tpu_args = prepare(args, "cpu"), prepare(args, DEV)
    expected = fn(*cpu_args)
    actual = fn(*tpu_args)
    if inplace:  # the Python binding returns the list it updated
        expected, actual = cpu_args[0], tpu_args[0]
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.device.type == DEV
        assert_close(a, e, dtype=dtype, atol=atol, rtol=rtol, msg=f"element {i}")


# ------------------------------------------------------------------ binary

BINARY = {
    "add": dict(scalar=True, tensor=True, alpha=True),
    "sub": dict(scalar=True, tensor=False, alpha=True),
    "mul": dict(scalar=True, tensor=True, alpha=False),
    "div": dict(scalar=True, tensor=True, alpha=False),
    "maximum": dict(scalar=True, tensor=False, alpha=False),
    "minimum": dict(scalar=True, tensor=False, alpha=False),
    "clamp_min": dict(scalar=True, tensor=False, alpha=False),
    "clamp_max": dict(scalar=True, tensor=False, alpha=False),
}


def op(name, inplace):
    return getattr(torch, f"_foreach_{name}{'_' if inplace else ''}")


# bfloat16 runs through the same code with opmath: a few ops cover it.
CASES = [(n, torch.float32) for n in BINARY] + [(n, torch.bfloat16) for n in ["add", "mul", "div"]]


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name,dtype", CASES)
def test_binary_list(name, inplace, dtype):
    xs, ys = make_list(dtype, 0), make_list(dtype, 1, low=0.5, high=2.0)
    f = op(name, inplace)
    run_both(lambda a, b: f(a, b), xs, ys, inplace=inplace)
    if BINARY[name]["alpha"]:
        run_both(lambda a, b: f(a, b, alpha=-0.37), xs, ys, inplace=inplace)


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name,dtype", CASES)
def test_binary_scalar_and_scalarlist(name, inplace, dtype):
    xs = make_list(dtype, 2)
    f = op(name, inplace)
    run_both(lambda a: f(a, 0.7), xs, inplace=inplace)
    if name in ("add", "div"):
        run_both(lambda a: f(a, 2), xs, inplace=inplace)
    run_both(lambda a: f(a, [0.5, -1.5, 3]), xs, inplace=inplace)


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name", [n for n, v in BINARY.items() if v["tensor"]])
def test_binary_tensor_overload(name, inplace):
    xs = make_list(torch.float32, 3)
    f = op(name, inplace)
    # a 0-d tpu tensor, and a 0-d CPU tensor (a scalar, as on CUDA)
    run_both(lambda a, s: f(a, s), xs, torch.tensor(1.75), inplace=inplace)
    run_both(lambda a, s: f(a, s), xs, CpuScalar(-0.5), inplace=inplace)
    if BINARY[name]["alpha"]:
        run_both(lambda a, s: f(a, s, alpha=2.5), xs, torch.tensor(1.75), inplace=inplace)


def test_binary_nan_propagation():
    x = [torch.tensor([float("nan"), 1.0, -2.0, 3.0]), torch.tensor([0.0, float("nan")])]
    y = [torch.tensor([0.0, float("nan"), 5.0, -1.0]), torch.tensor([float("nan"), 1.0])]
    for name in ["maximum", "minimum", "clamp_min", "clamp_max"]:
        run_both(lambda a, b: op(name, False)(a, b), x, y)
        run_both(lambda a: op(name, False)(a, float("nan")), x)
        run_both(lambda a: op(name, True)(a, 1.5), x, inplace=True)


def test_integer_lists_and_promotion():
    xi = make_list(torch.int64, 4)
    yi = make_list(torch.int64, 5, low=1, high=4)
    for name in ["add", "sub", "mul", "maximum", "minimum"]:
        run_both(lambda a, b: op(name, False)(a, b), xi, yi)
        run_both(lambda a, b: op(name, True)(a, b), xi, yi, inplace=True)
        run_both(lambda a: op(name, True)(a, 3), xi, inplace=True)
    # int / int and int + float scalar promote to float
    run_both(lambda a, b: torch._foreach_div(a, b), xi, [t.abs() + 1 for t in yi])
    run_both(lambda a: torch._foreach_add(a, 0.5), xi)
    run_both(lambda a: torch._foreach_mul(a, [1, 2.5, 3]), xi)
    # mixed-dtype lists: each element promotes on its own
    xs = [rand(3, 4, seed=1), rand(5, dtype=torch.bfloat16, seed=2)]
    ys = [rand(3, 4, dtype=torch.bfloat16, seed=3), rand(5, seed=4)]
    run_both(lambda a, b: torch._foreach_add(a, b), xs, ys)
    run_both(lambda a, b: torch._foreach_add_(a, b, alpha=0.3), xs, ys, inplace=True)
    run_both(lambda a, b: torch._foreach_mul(a, b), [rand(3, dtype=torch.float64)], [rand(3)])


def test_broadcasting_other_into_self():
    xs = [rand(3, 4, seed=1), rand(2, 5, seed=2)]
    ys = [rand(4, seed=3), rand(2, 1, seed=4)]
    run_both(lambda a, b: torch._foreach_add_(a, b, alpha=2), xs, ys, inplace=True)
    run_both(lambda a, b: torch._foreach_mul(a, b), xs, ys)


# ------------------------------------------------------------------ pow


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("inplace", [False, True])
def test_pow(inplace, dtype):
    xs = make_list(dtype, 6, low=0.5, high=2.0)
    es = make_list(dtype, 7, low=-1.5, high=2.5)
    f = op("pow", inplace)
    run_both(lambda a, b: f(a, b), xs, es, inplace=inplace)
    for e in [2, 3, 0.5, -0.5, -1, -2, 1.7, 0]:
        run_both(lambda a: f(a, e), xs, inplace=inplace)
    run_both(lambda a: f(a, [2, 0.5, -1.3]), xs, inplace=inplace)
    # negative bases with integral exponents, as CPU's special cases
    run_both(lambda a: f(a, 2), make_list(dtype, 8), inplace=inplace)
    run_both(lambda a: f(a, 3.0), make_list(dtype, 8), inplace=inplace)


def test_pow_scalar_and_tensor():
    es = make_list(torch.float32, 9, low=0.0, high=10.0)
    run_both(lambda b: torch._foreach_pow(0.9, b), es)
    run_both(lambda b: torch._foreach_pow(2, b), es)


# ------------------------------------------------------------------ ternary


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.uint8, torch.bool])
@pytest.mark.parametrize("weight", ["List", "Scalar", "ScalarList"])
def test_lerp_of_integers_refused_like_cpu(dtype, weight):
    # the CPU's lerp of each tensor: NotImplementedError, its kernel named
    # by the weight's kind; nothing is written
    for device in ("cpu", DEV):
        xs = [torch.ones(3, dtype=dtype, device=device) for _ in range(2)]
        ends = [torch.zeros(3, dtype=dtype, device=device) for _ in range(2)]
        w = {"List": [torch.ones(3, dtype=dtype, device=device)] * 2, "Scalar": 0.5,
             "ScalarList": [0.5, 0.25]}[weight]
        for f in (torch._foreach_lerp, torch._foreach_lerp_):
            with pytest.raises(NotImplementedError) as e:
                f(xs, ends, w)
            kernel = "lerp_kernel_tensor" if weight == "List" else "lerp_kernel_scalar"
            assert f'"{kernel}" not implemented' in str(e.value)
        assert all(bool((x == 1).all()) for x in xs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("inplace", [False, True])
def test_lerp(inplace, dtype):
    xs, ends = make_list(dtype, 10), make_list(dtype, 11)
    ws = make_list(dtype, 12, low=-0.5, high=1.5)
    f = op("lerp", inplace)
    run_both(lambda a, b, w: f(a, b, w), xs, ends, ws, inplace=inplace)
    for w in [0.1, 0.9, 0.5]:
        run_both(lambda a, b: f(a, b, w), xs, ends, inplace=inplace)
    run_both(lambda a, b: f(a, b, [0.0, 1.0, 0.75]), xs, ends, inplace=inplace)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(name, inplace, dtype):
    xs, t1 = make_list(dtype, 13), make_list(dtype, 14)
    t2 = make_list(dtype, 15, low=0.5, high=2.0)
    f = op(name, inplace)
    run_both(lambda a, b, c: f(a, b, c), xs, t1, t2, inplace=inplace)
    run_both(lambda a, b, c: f(a, b, c, value=-0.3), xs, t1, t2, inplace=inplace)
    run_both(lambda a, b, c: f(a, b, c, [0.5, 2, -1.0]), xs, t1, t2, inplace=inplace)


# ------------------------------------------------------------------ unary

UNARY_POSITIVE = ["sqrt", "rsqrt", "log", "log1p", "log2", "log10", "reciprocal"]
UNARY_ANY = ["exp", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "erf", "neg",
             "abs", "sign", "floor", "ceil", "round", "trunc", "frac"]


# Every op functional in float32; in-place and bfloat16 share the code, so a
# few ops cover them.
UNARY_CASES = ([(n, False, torch.float32) for n in UNARY_POSITIVE + UNARY_ANY]
               + [(n, True, torch.float32) for n in ["sqrt", "neg", "reciprocal", "sign", "trunc"]]
               + [(n, True, torch.bfloat16) for n in ["sqrt", "exp", "round", "frac"]])


@pytest.mark.parametrize("name,inplace,dtype", UNARY_CASES)
def test_unary(name, inplace, dtype):
    low = 0.25 if name in UNARY_POSITIVE else -3.0
    xs = make_list(dtype, 16, low=low, high=3.0)
    xs.append(torch.tensor([-2.5, -0.5, 0.5, 1.5, 2.5, -0.0], dtype=dtype).abs()
              if name in UNARY_POSITIVE else
              torch.tensor([-2.5, -0.5, 0.5, 1.5, 2.5, float("nan")], dtype=dtype))
    run_both(lambda a: op(name, inplace)(a), xs, inplace=inplace,
             atol=2e-5 if dtype == torch.float32 else None)


def test_unary_integer_inputs():
    xi = make_list(torch.int64, 17)
    for name in ["neg", "abs", "sign", "floor", "ceil", "round", "trunc"]:
        run_both(lambda a: op(name, False)(a), xi)
        run_both(lambda a: op(name, True)(a), xi, inplace=True)
    for name in ["sqrt", "exp", "reciprocal", "sigmoid"]:
        run_both(lambda a: op(name, False)(a), [t.abs() + 1 for t in xi])


def test_zero_():
    run_both(lambda a: torch._foreach_zero_(a), make_list(torch.float32, 18), inplace=True)
    run_both(lambda a: torch._foreach_zero_(a), make_list(torch.int64, 18), inplace=True)


# ------------------------------------------------------------------ norm


@pytest.mark.parametrize("dtype", FLOATS)
def test_norm(dtype):
    xs = make_list(dtype, 19)
    xs.append(torch.tensor([0.0, 1.0, 0.0, -4.0], dtype=dtype))
    # ord is a runtime Scalar: one program per scalar kind (int, float)
    for ord in [2, 1, 0, 3, 2.0, math.inf, -math.inf, 0.5, -1.0]:
        run_both(lambda a: torch._foreach_norm(a, ord), xs)


def test_norm_dtype_and_nan():
    xs = make_list(torch.bfloat16, 20)
    run_both(lambda a: torch._foreach_norm(a, 2, dtype=torch.float32), xs)
    run_both(lambda a: torch._foreach_norm(a, 2, dtype=torch.float64), make_list(torch.float32, 20))
    run_both(lambda a: torch._foreach_norm(a, 2), [torch.zeros(0), rand(3), torch.zeros(2, 0)])
    nan = [torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0])]
    for o in [2, 1, math.inf, -math.inf, 0]:
        run_both(lambda a: torch._foreach_norm(a, o), nan)


# ------------------------------------------------------------------ views


def test_in_place_through_views():
    base = rand(4, 6, seed=21)
    other = rand(5, seed=22)

    def f(b, o, y0, y1):
        torch._foreach_add_([b[:, 1], o[1:4]], [y0, y1], alpha=0.5)
        torch._foreach_mul_([b.t()[2], o], 3.0)
        torch._foreach_lerp_([b[1:3, ::2]], [torch.ones(2, 3, device=b.device)], 0.25)
        return [b, o]

    args = [base, other, rand(4, seed=23), rand(3, seed=24)]
    expected = f(*clone_args(args))
    actual = f(*[t.to(DEV) for t in args])
    for a, e in zip(actual, expected):
        assert_close(a, e)


def test_same_storage_twice_in_a_list():
    x = rand(6, seed=25)
    xt = x.to(DEV)
    torch._foreach_mul_([xt[:3], xt[3:]], [2.0, -1.0])
    ref = x.clone()
    torch._foreach_mul_([ref[:3], ref[3:]], [2.0, -1.0])
    assert_close(xt, ref)


# ------------------------------------------------------------------ programs


def test_views_of_one_storage_at_other_offsets():
    """A list of a stacked tensor's rows (scan_layers' gradients): the rows'
    offsets are in the program's signature, so other rows of the same shape
    run their own program, the same rows again none, and values stay the
    CPU's."""
    stacked = rand(6, 4, 5, seed=26)
    acc = [rand(4, 5, seed=(27, k)) for k in range(3)]
    st, at = stacked.to(DEV), [a.to(DEV) for a in acc]
    ref_acc = [a.clone() for a in acc]
    counts = []
    for rows in ([0, 1, 2], [3, 4, 5], [0, 1, 2], [2, 4, 5]):
        before = torchtpu._C._compile_stats()["compiles"]
        torch._foreach_addcmul_(at, [st[r] for r in rows], [st[r] for r in rows], value=0.5)
        torch._foreach_lerp_(at, [st[r] for r in rows], 0.25)
        torch.tpu.synchronize()
        counts.append(torchtpu._C._compile_stats()["compiles"] - before)
        torch._foreach_addcmul_(ref_acc, [stacked[r] for r in rows], [stacked[r] for r in rows], value=0.5)
        torch._foreach_lerp_(ref_acc, [stacked[r] for r in rows], 0.25)
        for a, e in zip(at, ref_acc):
            assert_close(a, e)
    assert counts[2] == 0, counts
    assert counts[1] == counts[3] == counts[0], counts


def test_runtime_scalars_do_not_recompile():
    xs = [torch.zeros(7, 3, device=DEV), torch.zeros(11, device=DEV)]
    ys = [torch.ones(7, 3, device=DEV), torch.ones(11, device=DEV)]
    torch._foreach_add_(xs, ys, alpha=0.1)
    torch._foreach_addcdiv_(xs, ys, ys, [0.5, 0.25])
    torch._foreach_mul_(xs, 0.9)
    before = torchtpu._C._compile_stats()["compiles"]
    for i in range(5):
        lr = 0.01 * (i + 1)
        torch._foreach_add_(xs, ys, alpha=-lr)
        torch._foreach_addcdiv_(xs, ys, ys, [lr, 2 * lr])
        torch._foreach_mul_(xs, 1 - lr)
    assert torchtpu._C._compile_stats()["compiles"] == before
    ref = [torch.zeros(7, 3), torch.zeros(11)]
    ones = [torch.ones(7, 3), torch.ones(11)]
    torch._foreach_add_(ref, ones, alpha=0.1)
    torch._foreach_addcdiv_(ref, ones, ones, [0.5, 0.25])
    torch._foreach_mul_(ref, 0.9)
    for i in range(5):
        lr = 0.01 * (i + 1)
        torch._foreach_add_(ref, ones, alpha=-lr)
        torch._foreach_addcdiv_(ref, ones, ones, [lr, 2 * lr])
        torch._foreach_mul_(ref, 1 - lr)
    for a, e in zip(xs, ref):
        assert_close(a, e)


def test_copy_and_unregistered_overloads_use_the_slow_path():
    # _foreach_copy_ (src may be on the CPU) and the .Tensor overloads of
    # addcmul/addcdiv (a CPU tensor of scalars) stay on ATen's per-tensor
    # path, which runs the engine's single-tensor ops.
    dst = make_list(torch.float32, 26)
    src = make_list(torch.float32, 27)
    run_both(lambda a, b: torch._foreach_copy_(a, b), dst, src, inplace=True)
    d = [t.to(DEV) for t in dst]
    torch._foreach_copy_(d, src)
    for a, e in zip(d, src):
        assert_close(a, e)
    scal = torch.tensor([0.5, -1.0, 2.0])
    run_both(lambda a, b, c: torch._foreach_addcdiv_(a, b, c, scal.clone()),
             make_list(torch.float32, 28), src, make_list(torch.float32, 29, low=0.5), inplace=True)


def test_empty_element():
    run_both(lambda a, b: torch._foreach_add(a, b), [rand(3), torch.zeros(0, 2)],
             [rand(3, seed=1), torch.zeros(0, 2)])


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("fn", [
    lambda d: torch._foreach_add([torch.ones(2, device=d)], [torch.ones(2, device=d)] * 2),
    lambda d: torch._foreach_add_([torch.ones(2, dtype=torch.long, device=d)], 0.5),
    lambda d: torch._foreach_add([torch.ones(2, device=d)], [torch.ones(3, device=d)]),
    lambda d: torch._foreach_mul_([torch.ones(2, device=d)], [1.0, 2.0]),
    lambda d: torch._foreach_mul_([torch.ones(2, device=d)], torch.ones(2, device=d)),
    lambda d: torch._foreach_sqrt_([torch.ones(2, dtype=torch.long, device=d)]),
    lambda d: torch._foreach_norm([torch.ones(2, dtype=torch.long, device=d)]),
    lambda d: torch._foreach_norm([torch.zeros(0, device=d)], math.inf),
])
def test_errors_match_cpu(fn):
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(Exception) as tpu:
        fn(DEV)
    assert isinstance(tpu.value, type(cpu.value)), (cpu.value, tpu.value)


def test_device_mismatch_in_list():
    with pytest.raises(RuntimeError):
        torch._foreach_add_([torch.ones(2, device=DEV)], [torch.ones(2)])


def test_complex_lists_run_per_tensor_as_on_cpu():
    """Lists with complex tensors take PyTorch's composite kernel (what the
    CPU runs: one op per tensor), functional and in place."""
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(3, dtype=torch.complex64, generator=g),
          torch.randn(2, 2, dtype=torch.complex64, generator=g)]
    ys = [torch.randn(3, dtype=torch.complex64, generator=g),
          torch.randn(2, 2, dtype=torch.complex64, generator=g)]
    calls = [lambda a, b: torch._foreach_add(a, b, alpha=2), lambda a, b: torch._foreach_mul(a, 1.5j),
             lambda a, b: torch._foreach_exp(a), lambda a, b: torch._foreach_div(a, b),
             lambda a, b: torch._foreach_neg(a), lambda a, b: torch._foreach_sqrt(a)]
    for f in calls:
        want = f(xs, ys)
        got = f([x.to("tpu") for x in xs], [y.to("tpu") for y in ys])
        for w, t in zip(want, got):
            assert t.device.type == "tpu"
            torch.testing.assert_close(t.cpu(), w)
    a = [x.clone() for x in xs]
    d = [x.to("tpu") for x in xs]
    torch._foreach_mul_(a, ys)
    torch._foreach_mul_(d, [y.to("tpu") for y in ys])
    for w, t in zip(a, d):
        torch.testing.assert_close(t.cpu(), w)


@pytest.mark.parametrize("name", ["abs", "floor", "ceil", "round", "trunc", "frac"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int64])
@pytest.mark.parametrize("inplace", [False, True])
def test_unary_dtype_refusals_as_cpu(name, dtype, inplace):
    """A foreach op refuses the dtypes its per-tensor op refuses, with the
    CPU kernel's NotImplementedError."""
    fn = getattr(torch, f"_foreach_{name}_" if inplace else f"_foreach_{name}")
    try:
        fn([torch.ones(3, dtype=dtype), torch.ones(2, dtype=dtype)])
    except NotImplementedError as e:
        with pytest.raises(NotImplementedError, match=str(e).split(" for ")[0]):
            fn([torch.ones(3, dtype=dtype, device=DEV), torch.ones(2, dtype=dtype, device=DEV)])
    else:
        fn([torch.ones(3, dtype=dtype, device=DEV), torch.ones(2, dtype=dtype, device=DEV)])


def test_foreach_sub_refuses_bool_as_sub_does():
    """_foreach_sub[_] with a bool list, a bool Scalar or bool Scalars
    raises as sub does on the CPU (it computed before), also after the
    same call with a number compiled."""
    for other in (1, True, [True, True], "bool list", [1, 2]):
        outcome = []
        for d in ("cpu", "tpu"):
            xs = [torch.ones(3, device=d), torch.ones(2, device=d)]
            o = [x.bool() for x in xs] if other == "bool list" else other
            try:
                torch._foreach_sub_(xs, o)
                outcome.append([x.cpu() for x in xs])
            except RuntimeError as e:
                assert "Subtraction, the `-` operator, with a bool tensor" in str(e)
                outcome.append("raised")
        assert (outcome[0] == "raised") == (outcome[1] == "raised"), other
        if outcome[0] != "raised":
            for a, b in zip(*outcome):
                torch.testing.assert_close(b, a)
    with pytest.raises(RuntimeError, match="bool tensor"):
        torch._foreach_sub([torch.ones(2, device="tpu").bool()], 1)
