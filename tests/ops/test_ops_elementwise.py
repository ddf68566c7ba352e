"""Elementwise ops on tpu against CPU: arithmetic with type promotion,
integer semantics (Python remainder, C fmod, floor division, powers,
shifts), comparisons, logical/bitwise ops, where/clamp/masked_fill,
lerp/addcmul/addcdiv, unary math, activations and their backward ops,
in-place (also through views) and out= forms, NaN/inf behaviour and the
errors CPU raises."""
import math

import pytest
import torch
import torch.nn.functional as F

import optest
from optest import DEV, check

FLOATS = [torch.float32, torch.bfloat16]
NAN, INF = float("nan"), float("inf")


def rand(*shape, dtype=torch.float32, low=-2.0, high=2.0, **kw):
    """optest.rand; integers come from [low - 3, high + 4), so unsigned
    draws start at low = 3."""
    if dtype == torch.uint8:
        low = max(low, 3)
    return optest.rand(*shape, dtype=dtype, low=low, high=high, **kw)


def _materialize(r):
    """Reads results back, so errors found on the device surface here."""
    if isinstance(r, torch.Tensor):
        r.cpu()
    elif isinstance(r, (list, tuple)):
        for v in r:
            _materialize(v)


def same(fn, *args, meta_differs=False, **kw):
    """fn on CPU and on tpu: the same exception type, or close results.

    meta_differs: PyTorch's meta kernel, which the tpu glue runs first (for
    shapes and errors), refuses this input with another exception type than
    CPU's kernel (ValueError for RuntimeError, RuntimeError for
    NotImplementedError); then any of those is accepted. Not decided by the
    lowerings."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - any CPU error must be mirrored
        tpu_args = [a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]
        expected = (RuntimeError, ValueError, TypeError, NotImplementedError) if meta_differs else type(e)
        with pytest.raises(expected):
            _materialize(fn(*tpu_args))
        return
    if meta_differs:   # the meta kernel refuses what CPU accepts
        with pytest.raises(RuntimeError):
            _materialize(fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]))
        return
    check(fn, *args, noncontig=False, **kw)


def specials():
    """Every pair of special values: two (10, 10) tensors."""
    v = torch.tensor([NAN, -INF, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, INF])
    return v[:, None].expand(10, 10).contiguous(), v[None, :].expand(10, 10).contiguous()


# ------------------------------------------------------------------ binary

BINARY = {
    "add": lambda a, b: torch.add(a, b, alpha=2),
    "sub": lambda a, b: torch.sub(a, b, alpha=0.5),
    "rsub": lambda a, b: torch.rsub(a, b, alpha=3),
    "mul": torch.mul,
    "div": torch.div,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "pow": torch.pow,
    "atan2": torch.atan2,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "xlogy": torch.xlogy,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "heaviside": torch.heaviside,
}
NO_GRAD = {"div_trunc", "div_floor", "fmax", "fmin", "heaviside"}


def _binary_inputs(name, dtype, grad):
    a = rand(3, 4, dtype=dtype, requires_grad=grad, low=0.25, high=3.0)
    lo, hi = (0.25, 3.0) if name in ("pow", "xlogy") else (-3.0, -0.25)
    b = rand(4, dtype=dtype, requires_grad=grad, low=lo, high=hi, seed=1)
    return a, b


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_float(name):
    """float32 values and gradients (b broadcasts along rows)."""
    grad = name not in NO_GRAD
    check(BINARY[name], *_binary_inputs(name, torch.float32, grad), grad=grad, noncontig=False)


def test_binary_bfloat16():
    for name, fn in BINARY.items():
        check(fn, *_binary_inputs(name, torch.bfloat16, False), noncontig=False)


NONCONTIG = {
    "add": (lambda a, b: torch.add(a, b, alpha=2), 2), "mul": (torch.mul, 2),
    "pow": (lambda a, b: a.abs() ** b, 2), "where": (lambda a, b: torch.where(a > b, a, b), 2),
    "clamp": (lambda a, b: a.clamp(b, b + 1), 2), "lerp": (lambda a, b: torch.lerp(a, b, b.sigmoid()), 2),
    "exp": (torch.exp, 1), "gelu": (F.gelu, 1), "eq": (lambda a, b: torch.eq(a, b.round()), 2),
}


@pytest.mark.parametrize("name", list(NONCONTIG))
def test_noncontiguous_inputs(name):
    """Transposed inputs, values and gradients; strided rank-1 inputs."""
    fn, n = NONCONTIG[name]
    grad = name != "eq"
    args = [rand(3, 4, requires_grad=grad, seed=i) for i in range(n)]
    check(fn, *args, grad=grad)
    if name in ("add", "exp"):
        check(fn, *[rand(6, seed=i) for i in range(n)])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "remainder", "fmod", "maximum", "minimum",
                                  "fmax", "fmin", "atan2", "pow", "hypot", "copysign", "div_floor",
                                  "div_trunc", "xlogy", "logaddexp", "heaviside"])
def test_binary_special_values(name):
    x, y = specials()
    check(BINARY[name], x, y, noncontig=False)


INT_BINARY = ["add", "sub", "rsub", "mul", "div", "div_trunc", "div_floor", "remainder", "fmod", "pow",
              "maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "copysign", "xlogy", "logaddexp"]
INT_CORE = ["sub", "mul", "div_trunc", "div_floor", "remainder", "fmod", "pow", "maximum"]


@pytest.mark.parametrize("name,dtype", [(n, d) for n in INT_BINARY for d in (torch.int64, torch.bool)] +
                         [(n, d) for n in INT_CORE for d in (torch.int32, torch.uint8)])
def test_binary_integer_and_bool(name, dtype):
    """Integer/bool semantics (wrapping, Python remainder, integer powers) or
    the same error as CPU."""
    a = rand(3, 4, dtype=dtype, low=0 if dtype == torch.uint8 else -5, high=6)
    b = rand(4, dtype=dtype, low=4, high=6, seed=2)
    if dtype.is_signed:
        b = b * torch.tensor([1, -1, 1, -1], dtype=dtype)
    if dtype == torch.bool:
        b = torch.ones(4, dtype=dtype)
    fn = BINARY[name]
    if name == "sub":
        same(fn, a, b, meta_differs=True)   # a float alpha: CPU RuntimeError, meta ValueError
        fn = lambda x, y: torch.sub(x, y, alpha=2)  # noqa: E731
    same(fn, a, b, meta_differs=(name, dtype) in (("div_floor", torch.bool), ("logaddexp", torch.bool)))


def test_integer_remainder_fmod_floor_signs():
    a = torch.tensor([7, -7, 7, -7, 0, 6, -6], dtype=torch.int64)
    b = torch.tensor([3, 3, -3, -3, 5, 3, -4], dtype=torch.int64)
    for fn in (torch.remainder, torch.fmod, torch.floor_divide,
               lambda x, y: torch.div(x, y, rounding_mode="trunc"), torch.div):
        check(fn, a, b, noncontig=False)
    check(lambda x: x % 3, a, noncontig=False)
    check(lambda x: x // -3, a, noncontig=False)
    check(lambda x: 7 % x, b, noncontig=False)


def test_float_floor_division_like_python():
    a = torch.tensor([1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 5.0, 1e-30])
    b = torch.tensor([0.1, 0.1, 2.0, 2.0, -3.0, 3.0, 0.0, -1.0])
    check(torch.floor_divide, a, b, noncontig=False)
    check(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b, noncontig=False)


@pytest.mark.parametrize("op", [torch.remainder, torch.fmod, torch.floor_divide,
                                lambda a, b: torch.div(a, b, rounding_mode="trunc")])
def test_integer_division_by_zero_raises(op):
    a = torch.tensor([5, -5, 3], dtype=torch.int64)
    b = torch.tensor([1, 0, 2], dtype=torch.int64)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(a.to(DEV), b.to(DEV)).cpu()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(a.to(DEV), 0).cpu()
    # a float division by zero is IEEE, not an error
    check(op, a.float(), b.float(), noncontig=False)


def test_integer_pow():
    a = torch.tensor([2, 1, -1, -2, 0, 3, 5], dtype=torch.int64)
    e = torch.tensor([-1, -2, -3, -2, 3, 4, 20], dtype=torch.int64)
    check(torch.pow, a, e, noncontig=False)        # negative exponents: 0, 1, -1 like CPU
    check(lambda x: x ** 3, a, noncontig=False)
    check(lambda x: 2 ** x, e.abs(), noncontig=False)
    check(lambda x: x ** 2.5, a.abs(), noncontig=False)  # promotes to float
    check(lambda x: x.pow(torch.tensor(2)), a, noncontig=False)
    # wrapping like CPU's exponentiation by squaring, whatever the exponent
    check(lambda x: x ** 70, a, noncontig=False)
    check(torch.pow, torch.tensor([3, -3, 2, 7], dtype=torch.int8), torch.tensor([100, 5, 9, 127], dtype=torch.int8),
          noncontig=False)
    check(lambda x: 3 ** x, torch.tensor([0, 1, 40, 64, 200], dtype=torch.uint8), noncontig=False)
    with pytest.raises(RuntimeError, match="negative integer powers"):
        a ** -1
    with pytest.raises(RuntimeError, match="negative integer powers"):
        (a.to(DEV) ** -1).cpu()


def test_pow_scalar_special_exponents():
    x = torch.tensor([-INF, -2.0, -0.0, 0.0, 0.3, 1.0, 4.0, INF, NAN])
    for e in (0, 1, 2, 3, 0.5, -0.5, -1, -2, 1.7, -3):
        check(lambda t, e=e: t ** e, x, noncontig=False)
    check(lambda t: 2.5 ** t, x, noncontig=False)
    check(lambda t: torch.pow(2, t), x, noncontig=False)


SCALAR_FNS = {
    "add": lambda t, o: t + o, "sub": lambda t, o: t - o, "mul": lambda t, o: t * o,
    "div": lambda t, o: t / o, "remainder": lambda t, o: t % o, "fmod": torch.fmod,
    "pow": lambda t, o: t ** o, "floor_divide": lambda t, o: t // o,
    "rsub": lambda t, o: o - t, "rdiv": lambda t, o: o / t, "rpow": lambda t, o: o ** t,
    "rremainder": lambda t, o: o % t, "add_alpha": lambda t, o: torch.add(t, o, alpha=2),
}
SCALAR_CASES = (
    [(op, o, torch.float32) for op in SCALAR_FNS for o in (2, -2.5)] +
    [(op, 3, torch.int64) for op in SCALAR_FNS] +
    [(op, -2.5, torch.int64) for op in ("add", "div", "pow", "floor_divide", "remainder", "rsub")] +
    [(op, o, torch.bfloat16) for op in ("add", "mul", "pow") for o in (0.1, 3)] +
    [(op, o, torch.float32) for op in ("add", "sub", "mul") for o in (True, "cpu0d", "cpu0d_int", "tpu0d")] +
    [(op, o, torch.int64) for op in ("sub", "mul") for o in (True, "cpu0d", "tpu0d")] +
    [("div", "cpu0d", torch.bfloat16), ("pow", "tpu0d", torch.int64), ("remainder", "cpu0d_int", torch.int64)]
)


@pytest.mark.parametrize("op,other,dtype", SCALAR_CASES)
def test_scalar_operands(op, other, dtype):
    """Python scalars, CPU 0-d tensors and tpu 0-d tensors as the other
    operand, on either side, with PyTorch's promotion rules."""
    on_tpu = other == "tpu0d"
    if other == "cpu0d":
        other = torch.tensor(1.75)
    elif other == "cpu0d_int":
        other = torch.tensor(3)
    elif other == "tpu0d":
        other = torch.tensor(-1.5)
    x = rand(3, 4, dtype=dtype, low=1, high=3.0)
    fn = SCALAR_FNS[op]
    if on_tpu:
        same(fn, x, other)       # moved to tpu with x: a device 0-d tensor
    else:
        same(lambda t: fn(t, other), x)


@pytest.mark.parametrize("pair", [(torch.int64, torch.float32), (torch.float32, torch.bfloat16),
                                  (torch.int32, torch.int64), (torch.bool, torch.int64),
                                  (torch.uint8, torch.int8), (torch.bfloat16, torch.float16),
                                  (torch.bool, torch.float32), (torch.uint8, torch.bool)])
def test_mixed_dtype_promotion(pair):
    a = rand(3, 4, dtype=pair[0], low=1, high=4)
    b = rand(4, dtype=pair[1], low=1, high=4, seed=3)
    for fn in (torch.add, torch.div, torch.lt, lambda x, y: torch.where(x > 2, x, y)):
        same(fn, a, b)


def test_zero_dim_and_empty():
    x = torch.tensor(2.5)
    e = torch.zeros(0, 3)
    for fn in (lambda t: t + 1, lambda t: t * t, torch.exp, F.gelu, lambda t: t.clamp(0, 1),
               lambda t: torch.where(t > 1, t, 0.0), lambda t: t ** 2, lambda t: torch.lerp(t, t * 2, 0.3)):
        check(fn, x, noncontig=False)
        check(fn, e, noncontig=False)
    check(lambda t, u: t + u, x, rand(3, 4), noncontig=False)


def test_uint8_wraps_and_int8_overflow():
    u = torch.tensor([0, 1, 200, 255], dtype=torch.uint8)
    check(lambda t: t - 3, u, noncontig=False)
    check(lambda t: t * 2, u, noncontig=False)
    check(lambda t: t + 257, u, noncontig=False)
    check(lambda t: -t, u, noncontig=False)
    i8 = torch.tensor([3, -100, 127, -128], dtype=torch.int8)
    check(lambda t: t * 100, i8, noncontig=False)
    check(lambda t: t.abs(), i8, noncontig=False)


# ------------------------------------------------------------------ bitwise, shifts, logical

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool, torch.float32])
def test_bitwise(dtype):
    low = 0 if dtype == torch.uint8 else -20
    a = rand(3, 4, dtype=dtype, low=low, high=20)
    b = rand(4, dtype=dtype, low=low, high=20, seed=4)
    for fn in (torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
        same(fn, a, b)
    same(torch.bitwise_not, a)
    same(lambda x: x & 6, a)
    same(lambda x: torch.bitwise_xor(3, x), a)


def _same_refusal(fn, *args):
    """CPU's NotImplementedError message is in the tpu one."""
    with pytest.raises(NotImplementedError) as cpu:
        fn(*args)
    with pytest.raises(NotImplementedError) as tpu:
        fn(*[a.to(DEV) for a in args]).cpu()
    assert str(cpu.value) in str(tpu.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_bitwise_refusal_message(dtype):
    x = torch.ones(3, dtype=dtype)
    for fn in (torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor):
        _same_refusal(fn, x, x)
    _same_refusal(lambda t: torch.bitwise_or(t, 1), x)
    _same_refusal(lambda t: torch.bitwise_xor(3, t), x)
    _same_refusal(torch.bitwise_not, x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_round_decimals_refusal_message(dtype):
    _same_refusal(lambda t: torch.round(t, decimals=1), torch.ones(3, dtype=dtype))


@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_float_to_int_cast_truncates_and_wraps_like_cpu(src, dtype):
    # CPU casts truncate through int32 and keep the low bits: -1.3 -> uint8
    # 255, 300.0 -> int8 44 (XLA's convert saturates to 0 and 127). Values
    # beyond int32 are undefined in C++ and left out.
    x = torch.tensor([-1.3, 2.7, -100.0, 300.0, -0.5, 0.0, -0.0, 255.9, -129.0, 40000.0, -40000.0])
    x = x.to(src)
    same(lambda t: t.to(dtype), x)
    same(lambda t: t[::2].to(dtype), x)
    same(lambda t: torch.zeros(11, dtype=dtype, device=t.device).copy_(t), x)
    same(lambda t: torch.tensor([float("nan")], dtype=src, device=t.device).to(dtype) * 0, x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_shifts_match_cpu_out_of_range(dtype):
    a = torch.tensor([1, 2, -8, 100, -1, 7, 0, 5], dtype=torch.int64).to(dtype)
    s = torch.tensor([1, 40, -1, 3, 63, 8, 2, 7], dtype=torch.int64).to(dtype)
    same(torch.bitwise_left_shift, a, s)
    same(torch.bitwise_right_shift, a, s)
    same(lambda x: x << 3, a)
    same(lambda x: x >> 2, a)
    if dtype == torch.int64:
        same(lambda x: torch.bitwise_left_shift(2, x.abs() % 5), a)

        def inplace(x, y):
            x = x.clone()
            x <<= y.abs() % 4
            x >>= 1
            return x
        check(inplace, a, s, noncontig=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_logical(dtype):
    a = rand(3, 4, dtype=dtype, low=-1, high=1)
    b = rand(4, dtype=dtype, low=-1, high=1, seed=5)
    if dtype != torch.bool:
        a = a * rand(3, 4, dtype=torch.bool, seed=6)   # some zeros
    for fn in (torch.logical_and, torch.logical_or, torch.logical_xor):
        check(fn, a, b, noncontig=False)
    check(torch.logical_not, a, noncontig=False)
    check(torch.logical_and, a, torch.tensor([NAN, 0.0, 1.0, 2.0]), noncontig=False)  # mixed dtypes, NaN is true


def test_logical_inplace_keeps_dtype():
    def f(x, y):
        x = x.clone()
        x.logical_and_(y)
        return x
    check(f, rand(3, 4), rand(3, 4, dtype=torch.bool), noncontig=False)

    def g(x):
        x = x.clone()
        x.logical_not_()
        return x
    check(g, rand(3, 4, dtype=torch.int64), noncontig=False)


# ------------------------------------------------------------------ comparisons

CMPS = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("cmp,dtype", [(c, d) for c in CMPS for d in (torch.float32, torch.int64)] +
                         [(c, d) for c in (torch.eq, torch.lt) for d in (torch.bfloat16, torch.bool, torch.uint8)])
def test_compare(cmp, dtype):
    a = rand(3, 4, dtype=dtype, low=0 if dtype == torch.uint8 else -2, high=2)
    b = a[1].clone()
    check(cmp, a, b, noncontig=False)
    if dtype in (torch.float32, torch.int64):
        same(lambda t: cmp(t, 1), a)
        same(lambda t: cmp(t, 0.5), a)
        same(lambda t: cmp(t, torch.tensor(1.0)), a)


@pytest.mark.parametrize("cmp", CMPS)
def test_compare_special_and_mixed(cmp):
    x, y = specials()
    check(cmp, x, y, noncontig=False)
    check(cmp, rand(3, 4, dtype=torch.int64), rand(3, 4, dtype=torch.float32), noncontig=False)
    check(lambda t: cmp(t, -1), rand(3, 4, dtype=torch.uint8, low=3, high=6), noncontig=False)


@pytest.mark.parametrize("name", ["eq_", "ne_", "lt_", "le_", "gt_", "ge_"])
def test_compare_inplace(name):
    def f(x, y):
        x = x.clone()
        getattr(x[:, 1:], name)(y)
        return x
    check(f, rand(3, 4), rand(3, seed=7), noncontig=False)
    check(lambda x: getattr(x.clone(), name)(0.5), rand(3, 4, dtype=torch.int64), noncontig=False)


# ------------------------------------------------------------------ where / clamp / masked_fill

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_where(dtype):
    g = dtype == torch.float32
    a = rand(3, 4, dtype=dtype, requires_grad=g)
    b = rand(4, dtype=dtype, requires_grad=g, seed=8)
    c = rand(3, 1, dtype=torch.bool, seed=9)
    check(torch.where, c, a, b, grad=g, noncontig=False)
    same(lambda x: torch.where(x > 0, x, 2.5), a.detach())
    same(lambda y: torch.where(y > 0, 3, y), b.detach())
    if g:
        check(lambda x: torch.where(x > 0, 1.0, 0.0), a.detach(), noncontig=False)
        check(lambda x, y: torch.where(c.to(x.device), x, y), a.detach(), rand(3, 4, dtype=torch.int64),
              noncontig=False)


def test_clamp():
    x = rand(3, 4, requires_grad=True, low=-3, high=3)
    lo = rand(4, low=-3, high=0, seed=10, requires_grad=True)
    hi = rand(3, 1, low=0, high=3, seed=11, requires_grad=True)
    check(lambda t: t.clamp(-1, 2), x, grad=True, noncontig=False)
    check(lambda t: t.clamp(min=0.5), x, grad=True, noncontig=False)
    check(lambda t: t.clamp(max=1), x, grad=True, noncontig=False)
    check(lambda t, a, b: t.clamp(a, b), x, lo, hi, grad=True, noncontig=False)
    check(lambda t, a: torch.clamp_min(t, a), x, lo, grad=True, noncontig=False)
    check(lambda t, b: torch.clamp(t, max=b), x, hi, grad=True, noncontig=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.uint8])
def test_clamp_other_dtypes(dtype):
    x = rand(3, 4, dtype=dtype, low=0 if dtype == torch.uint8 else -3, high=6)
    same(lambda t: t.clamp(1, 4), x)
    same(lambda t: t.clamp(4, 1), x)                   # lo > hi gives hi
    same(lambda t: torch.clamp_max(t, 2), x)
    same(lambda t: t.clamp(0.5, 2.5), x)               # float bounds promote integers
    same(lambda t, a, b: t.clamp(a, b), x, rand(4, dtype=dtype, low=3, high=3, seed=12),
         rand(3, 1, dtype=dtype, low=5, high=6, seed=13))

    def inplace(t):
        t = t.clone()
        t[1].clamp_(1, 3)
        t[2].clamp_min_(2)
        return t
    check(inplace, x, noncontig=False)


def test_clamp_nan_like_cpu():
    x = torch.tensor([NAN, -0.0, 0.0, 1.5, -2.5, INF, -INF])
    for fn in (lambda t: t.clamp(0.0, 1.0), lambda t: t.clamp(NAN, 1.0), lambda t: t.clamp(0.0, NAN),
               lambda t: t.clamp(1.0, 0.0), lambda t: t.clamp(torch.full_like(t, NAN), torch.ones_like(t)),
               lambda t: t.clamp_min(NAN), lambda t: t.clamp_max(torch.zeros_like(t)),
               lambda t: torch.maximum(t, torch.zeros_like(t)), lambda t: F.relu(t),
               lambda t: F.hardtanh(t), lambda t: F.relu6(t)):
        check(fn, x, noncontig=False)


def test_clamp_errors_like_cpu():
    same(lambda t: t.clamp(False, True), rand(3, dtype=torch.bool))
    same(lambda t: t.clamp(0, 1), rand(3, dtype=torch.bool))
    with pytest.raises((RuntimeError, ValueError)):   # the meta kernel's ValueError, CPU's RuntimeError
        rand(3).to(DEV).clamp()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_masked_fill(dtype):
    g = dtype == torch.float32
    x = rand(3, 4, dtype=dtype, requires_grad=g)
    m = rand(4, dtype=torch.bool, seed=12)
    check(lambda t: t.masked_fill(m.to(t.device), 2.7), x, grad=g, noncontig=False)
    check(lambda t: t.masked_fill(m.to(t.device), -1), x.detach(), noncontig=False)
    check(lambda t, v: t.masked_fill(m.to(t.device), v), x.detach(), torch.tensor(0.5), noncontig=False)

    def inplace(t):
        t = t.clone()
        t[1:].masked_fill_(m.to(t.device), 5)
        return t
    check(inplace, x.detach(), noncontig=False)
    if g:
        same(lambda t: t.masked_fill(torch.ones(4, dtype=torch.int64, device=t.device), 1.0), x.detach())


# ------------------------------------------------------------------ ternaries

def test_lerp_addcmul_addcdiv():
    a = rand(3, 4, requires_grad=True)
    b = rand(4, requires_grad=True, seed=13)
    w = rand(3, 1, requires_grad=True, low=-0.5, high=1.5, seed=14)
    c = rand(3, 4, requires_grad=True, low=0.5, high=2, seed=15)
    check(lambda x, y: torch.lerp(x, y, 0.3), a, b, grad=True, noncontig=False)
    check(lambda x, y: torch.lerp(x, y, 0.8), a, b, grad=True, noncontig=False)
    check(torch.lerp, a, b, w, grad=True, noncontig=False)
    check(lambda x, y, z: torch.addcdiv(x, y, z, value=0.5), a, b, c, grad=True, noncontig=False)
    check(lambda x, y, z: torch.addcmul(x, y, z, value=-2), a, b, c, grad=True, noncontig=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.bool])
def test_lerp_addcmul_addcdiv_other_dtypes(dtype):
    a = rand(3, 4, dtype=dtype)
    b = rand(4, dtype=dtype, seed=13)
    c = rand(3, 4, dtype=dtype, low=1, high=2, seed=15)
    same(lambda x, y: torch.lerp(x, y, 0.3), a, b)
    same(lambda x, y: torch.lerp(x, y, x), a, b)
    same(torch.addcdiv, a, b, c)
    same(lambda x, y, z: torch.addcmul(x, y, z, value=2), a, b, c)
    if dtype == torch.int64:
        same(lambda x, y, z: torch.addcmul(x, y, z, value=2.5), a, b, c)   # value truncated


# ------------------------------------------------------------------ unary

def _dom(lo, hi):
    return dict(low=lo, high=hi)


UNARY = {
    "neg": (torch.neg, {}), "abs": (torch.abs, {}), "sign": (torch.sign, {}), "sgn": (torch.sgn, {}),
    "exp": (torch.exp, {}), "exp2": (torch.exp2, {}), "expm1": (torch.expm1, {}),
    "log": (torch.log, _dom(0.1, 4)), "log2": (torch.log2, _dom(0.1, 4)), "log10": (torch.log10, _dom(0.1, 4)),
    "log1p": (torch.log1p, _dom(-0.9, 3)), "sqrt": (torch.sqrt, _dom(0.1, 4)),
    "rsqrt": (torch.rsqrt, _dom(0.1, 4)), "reciprocal": (torch.reciprocal, _dom(0.5, 3)),
    "sin": (torch.sin, {}), "cos": (torch.cos, {}), "tan": (torch.tan, _dom(-1.2, 1.2)),
    "asin": (torch.asin, _dom(-0.95, 0.95)), "acos": (torch.acos, _dom(-0.95, 0.95)),
    "atan": (torch.atan, _dom(-4, 4)), "sinh": (torch.sinh, _dom(-3, 3)), "cosh": (torch.cosh, _dom(-3, 3)),
    "tanh": (torch.tanh, {}), "asinh": (torch.asinh, _dom(-4, 4)), "acosh": (torch.acosh, _dom(1.1, 5)),
    "atanh": (torch.atanh, _dom(-0.9, 0.9)), "erf": (torch.erf, {}), "erfc": (torch.erfc, _dom(-2, 3)),
    "erfinv": (torch.erfinv, _dom(-0.95, 0.95)), "sigmoid": (torch.sigmoid, _dom(-5, 5)),
    "floor": (torch.floor, _dom(-3, 3)), "ceil": (torch.ceil, _dom(-3, 3)), "round": (torch.round, _dom(-3, 3)),
    "round_dec": (lambda t: torch.round(t, decimals=2), _dom(-3, 3)),
    "round_negdec": (lambda t: torch.round(t * 100, decimals=-1), _dom(-3, 3)),
    "trunc": (torch.trunc, _dom(-3, 3)), "frac": (torch.frac, _dom(-3, 3)),
    "deg2rad": (torch.deg2rad, {}), "rad2deg": (torch.rad2deg, {}), "sinc": (torch.sinc, {}),
    "logit": (torch.logit, _dom(0.05, 0.95)), "logit_eps": (lambda t: torch.logit(t, eps=0.2), _dom(0.05, 0.95)),
    "nan_to_num": (torch.nan_to_num, {}), "square": (torch.square, {}),
    "isnan": (torch.isnan, {}), "isinf": (torch.isinf, {}), "isfinite": (torch.isfinite, {}),
    "isposinf": (torch.isposinf, {}), "isneginf": (torch.isneginf, {}), "signbit": (torch.signbit, {}),
}
PIECEWISE = {"sign", "sgn", "floor", "ceil", "round", "round_dec", "round_negdec", "trunc",
             "isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit"}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_float(name):
    """float32 values and gradients."""
    fn, dom = UNARY[name]
    g = name not in PIECEWISE
    check(fn, rand(3, 4, requires_grad=g, **dom), grad=g, noncontig=False)


def test_unary_bfloat16():
    for fn, dom in UNARY.values():
        check(fn, rand(3, 4, dtype=torch.bfloat16, **dom), noncontig=False)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.uint8, torch.float64])
def test_unary_other_dtypes(dtype):
    """Integer/bool inputs promote (or keep their dtype) as on CPU, or raise
    the same error; float64 keeps its precision."""
    for name, (fn, dom) in UNARY.items():
        if dtype == torch.uint8 and name not in ("neg", "abs", "sign", "floor", "exp", "sqrt", "signbit",
                                                 "isnan", "nan_to_num", "frac", "reciprocal"):
            continue
        if dtype == torch.float64 and name not in ("exp2", "log2", "sinh", "cosh", "asinh", "acosh", "atanh",
                                                   "asin", "erf", "erfc", "erfinv", "sigmoid", "round_dec",
                                                   "logit", "sinc", "frac", "signbit", "nan_to_num"):
            continue
        lo, hi = dom.get("low", -3), dom.get("high", 3)
        if dtype == torch.uint8:
            lo, hi = 3, 6
        x = rand(3, 4, dtype=dtype, low=lo, high=hi)
        same(fn, x, atol=1e-6 if dtype == torch.float64 else None,
             meta_differs=(name, dtype) == ("frac", torch.bool))


@pytest.mark.parametrize("name", ["exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "tanh", "sinh",
                                  "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan", "erf", "erfc",
                                  "erfinv", "sigmoid", "reciprocal", "sign", "floor", "round", "trunc",
                                  "frac", "nan_to_num", "logit", "sinc", "exp2", "log2", "isnan", "isinf",
                                  "signbit", "abs", "neg"])
def test_unary_special_values(name):
    fn = UNARY[name][0]
    x = torch.tensor([NAN, -INF, -1e30, -100.0, -20.5, -2.5, -1.0, -0.5, -1e-7, -0.0, 0.0, 1e-7, 0.5, 1.0,
                      1.5, 2.5, 20.5, 89.0, 100.0, 1e30, INF])
    check(fn, x, noncontig=False)


def test_unary_accuracy_wide_range():
    """The composed functions stay accurate across their ranges."""
    x = torch.linspace(-30, 30, 241)
    for fn in (torch.sinh, torch.cosh, torch.asinh, torch.erf, torch.erfc, torch.sigmoid, torch.expm1,
               torch.tanh, torch.atan, F.softplus, F.silu, F.mish, F.logsigmoid, F.gelu):
        check(fn, x, noncontig=False)
    u = torch.linspace(-0.999999, 0.999999, 241)
    for fn in (torch.erfinv, torch.atanh, torch.asin, torch.acos):
        check(fn, u, noncontig=False)
    check(torch.acosh, torch.linspace(1, 1e9, 241), noncontig=False)
    check(torch.erfinv, torch.tensor([-1.0, 1.0, 1.5, -1.5, 0.0]), noncontig=False)
    d = torch.linspace(-0.999, 0.999, 241, dtype=torch.float64)
    check(torch.erfinv, d, noncontig=False, atol=1e-12, rtol=1e-10)


def test_nan_to_num_args():
    x = torch.tensor([NAN, INF, -INF, 1.0, -2.0])
    check(lambda t: t.nan_to_num(nan=1.5, posinf=9.0, neginf=-9.0), x, noncontig=False)
    check(lambda t: t.nan_to_num(posinf=1e39), x, noncontig=False)
    for dt in (torch.bfloat16, torch.float16, torch.float64):
        check(lambda t: t.nan_to_num(), x.to(dt), noncontig=False)


# ------------------------------------------------------------------ in-place and out=

INPLACE = ["add_", "div_", "pow_", "lerp_", "clamp_", "exp_", "relu_", "nan_to_num_", "floor_divide_",
           "addcmul_"]


def _apply(t, name, other):
    if name == "lerp_":
        return t.lerp_(other, 0.25)
    if name in ("addcmul_", "addcdiv_"):
        return getattr(t, name)(other, other, value=0.5)
    if name == "clamp_":
        return t.clamp_(-0.5, 0.7)
    if name in ("add_", "sub_", "div_", "remainder_", "pow_", "atan2_", "copysign_", "xlogy_",
                "floor_divide_"):
        return getattr(t, name)(other)
    return getattr(t, name)()


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_through_view(name):
    base = rand(4, 5, low=0.2, high=0.9)
    other = rand(4, low=0.5, high=2.0, seed=16)

    def f(b, o):
        b = b.clone()
        ret = _apply(b[:, 1], name, o)       # a strided column view
        _apply(b[1:3, 2:], name, o[:3])      # a 2-d window, other broadcast
        return b, ret

    check(f, base, other, noncontig=False)


def test_inplace_unary_family():
    """Every unary in-place overload writes its result into self."""
    for name in ["exp2_", "expm1_", "log_", "log2_", "log10_", "log1p_", "sqrt_", "rsqrt_", "reciprocal_",
                 "sin_", "cos_", "tan_", "asin_", "acos_", "atan_", "sinh_", "cosh_", "tanh_", "asinh_",
                 "atanh_", "erfc_", "erfinv_", "abs_", "sign_", "sgn_", "floor_", "ceil_", "trunc_", "frac_",
                 "deg2rad_", "rad2deg_", "sinc_", "sigmoid_", "neg_", "round_", "erf_", "logit_",
                 "hypot_", "fmod_", "mul_", "sub_", "remainder_", "atan2_", "copysign_", "xlogy_"]:
        def f(t, name=name):
            t = t.clone()
            if name in ("hypot_", "fmod_", "mul_", "sub_", "remainder_", "atan2_", "copysign_", "xlogy_"):
                getattr(t, name)(t.flip(0))
            else:
                getattr(t, name)()
            return t
        check(f, rand(3, 4, low=0.1, high=0.9), noncontig=False)


def test_inplace_scalar_and_promotion():
    def f(x):
        x = x.clone()
        x.add_(2.5).mul_(torch.tensor(2.0)).sub_(1, alpha=3).div_(4)
        return x
    check(f, rand(3, 4), noncontig=False)

    def g(x, y):
        x = x.clone()
        x.add_(y)  # float16 self, float32 other: computed in float32, stored as float16
        return x
    check(g, rand(3, 4, dtype=torch.float16), rand(3, 4), noncontig=False)
    same(lambda x: x.clone().add_(1.5), rand(3, dtype=torch.int64))   # int self cannot hold a float
    same(lambda x: x.clone().div_(2), rand(3, dtype=torch.int64))
    same(lambda x, y: x.clone().add_(y), rand(3), rand(2, 3))   # result does not fit self


def test_inplace_result_type_must_fit_self():
    """An in-place pointwise op whose result dtype self cannot hold raises
    the CPU's error, also where PyTorch's meta kernel does not check it
    (mul_.Scalar, logit_; div_ in torch 2.11); a result self can hold
    (a comparison into float, an int result into float) is written."""
    i, b, f = rand(3, dtype=torch.int64), rand(3, dtype=torch.bool), rand(3)
    same(lambda x: x.clone().mul_(1.5), i)
    same(lambda x: x.clone().mul_(torch.tensor(1.5)), i)
    same(lambda x: x.clone().logit_(), i)
    same(lambda x: x.clone().div_(2), i)
    same(lambda x: x.clone().true_divide_(2), i)
    same(lambda x, y: x.clone().addcmul_(y, y), i, f)
    same(lambda x: x.clone().add_(1), b)
    same(lambda x: x[::2].mul_(2.5), rand(6, dtype=torch.int64))   # through a view
    same(lambda x, y: x.clone().lt_(y), f, rand(3))
    same(lambda x, y: x.clone().add_(y), f, i)
    same(lambda x: x.clone().div_(2, rounding_mode="floor"), i)


def test_inplace_forms_the_cpu_refuses():
    """In-place forms the CPU kernel refuses although the functional form
    works: cumsum_/cumprod_ on a bool self (and a bool dtype= or out=),
    a float-only activation on an empty int self (the CPU checks the dtype
    before it sees there is nothing to compute), rrelu on an int self,
    addr_ on a self that is not its 2-d result."""
    bl = rand(5, dtype=torch.bool)
    same(lambda x: x.clone().cumsum_(0), bl)
    same(lambda x: x.clone().cumprod_(0), bl)
    same(lambda x: torch.cumsum(x, 0, dtype=torch.bool), bl)
    same(lambda x: torch.cumsum(x, 0), bl)                   # computes in int64
    empty = torch.zeros(0, dtype=torch.int64)
    for fn in (F.silu, F.mish, F.hardsigmoid, F.hardswish, F.elu, F.celu, F.leaky_relu):
        same(lambda x, fn=fn: fn(x.clone(), inplace=True), empty)
        same(lambda x, fn=fn: fn(x.clone(), inplace=True), empty.bool())
        same(lambda x, fn=fn: fn(x.clone(), inplace=True), rand(3))
    same(lambda x: F.rrelu(x.clone(), training=True, inplace=True), rand(3, dtype=torch.int64))
    same(lambda x: F.rrelu(x.clone(), training=True, inplace=True), empty)
    v1, v2 = rand(2), rand(3, seed=5)
    same(lambda s, a, b: s.clone().addr_(a, b), rand(3), v1, v2)          # 1-d self
    same(lambda s, a, b: s.clone().addr_(a, b), torch.tensor(0.5), v1, v2)   # 0-d self
    same(lambda s, a, b: s.clone().addr_(a, b), rand(3, 2), v1, v2)       # transposed shape
    same(lambda s, a, b: s.clone().addr_(a, b), rand(2, 3, dtype=torch.int64), v1, v2)
    same(lambda s, a, b: s.clone().addr_(a, b, beta=2, alpha=0.5), rand(2, 3), v1, v2)
    same(lambda s, a, b: s.t().addr_(a, b), rand(3, 2), v1, v2)           # through a view


@pytest.mark.parametrize("case", ["add", "exp", "gt", "where", "clamp", "div_mode", "bitwise", "pow", "sigmoid"])
def test_out_variants(case):
    a = rand(3, 4)
    b = rand(4, seed=17)

    def run(x, y):
        dev = x.device
        o = torch.empty(3, 4, device=dev)
        if case == "add":
            r = torch.add(x, y, alpha=2, out=o)
        elif case == "exp":
            o = torch.empty(0, device=dev)     # resized by the op
            r = torch.exp(x, out=o)
        elif case == "gt":
            o = torch.empty(3, 4, dtype=torch.bool, device=dev)
            r = torch.gt(x, y, out=o)
        elif case == "where":
            r = torch.where(x > 0, x, y, out=o)
        elif case == "clamp":
            o = torch.empty(3, 4, dtype=torch.float64, device=dev)
            r = torch.clamp(x.double(), -0.5, 0.5, out=o)
        elif case == "div_mode":
            r = torch.div(x, y, rounding_mode="floor", out=o)
        elif case == "bitwise":
            o = torch.empty(3, 4, dtype=torch.int64, device=dev)
            r = torch.bitwise_xor((x * 10).long(), 5, out=o)
        elif case == "sigmoid":
            r = torch.sigmoid(x, out=o)
        else:
            r = torch.pow(x.abs(), y, out=o)
        assert r is o
        return o

    check(run, a, b, noncontig=False)


def test_out_variants_of_backward_and_multi_output_ops():
    g = rand(3, 4, seed=22)
    x = rand(3, 4, seed=23)
    aten = torch.ops.aten

    def run(a, b):
        o1 = torch.empty_like(a)
        aten.threshold_backward.grad_input(a, b, 0.1, grad_input=o1)
        o2 = torch.empty_like(a)
        aten.gelu_backward.grad_input(a, b, grad_input=o2)
        out, buf = torch.empty_like(a), torch.empty_like(a)
        r = aten.log_sigmoid_forward.output(b, output=out, buffer=buf)
        assert r[0] is out and r[1] is buf
        return o1, o2, out, buf

    check(run, g, x, noncontig=False)


def test_scalar_overloads_of_other_ops():
    x = rand(3, 4, low=0.5, high=2)
    check(lambda t: torch.copysign(t, -1.0), x, noncontig=False)
    check(lambda t: torch.copysign(t, 2), x, noncontig=False)
    check(lambda t: torch.xlogy(t, 3.0), x, noncontig=False)
    check(lambda t: torch.xlogy(2, t), x, noncontig=False)
    check(lambda t: torch.xlogy(0.0, t - 1), x, noncontig=False)
    check(lambda t: torch.remainder(5, t), x, noncontig=False)
    check(lambda t: torch.bitwise_left_shift(3, t), rand(3, 4, dtype=torch.int64, low=0, high=3), noncontig=False)


@pytest.mark.parametrize("out_dtype", [torch.complex64, torch.complex128, torch.float32, torch.int64])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "alpha", "scalar", "maximum", "remainder",
                                "bitwise_and", "atan2", "pow"])
def test_out_receives_the_operands_result(op, out_dtype):
    # The op computes in its operands' result type (uint8 here, wrapping)
    # and casts into out=: uint8 3 - 9 into a complex64 out= is 250, not -6.
    if out_dtype.is_complex and op in ("remainder", "bitwise_and", "atan2", "pow"):
        pytest.skip("no complex lowering: a complex out= raises NotImplementedError on tpu")
    x = torch.tensor([[3, 200, 5], [0, 255, 128]], dtype=torch.uint8)
    y = torch.tensor([9, 100, 250], dtype=torch.uint8)
    fns = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
           "alpha": lambda a, b, out: torch.add(a, b, alpha=3, out=out),
           "scalar": lambda a, b, out: torch.mul(a, 100, out=out),
           "maximum": torch.maximum, "remainder": torch.remainder, "bitwise_and": torch.bitwise_and,
           "atan2": torch.atan2, "pow": torch.pow}
    f = fns[op]
    same(lambda a, b: f(a, b, out=torch.empty(0, dtype=out_dtype, device=a.device)), x, y)
    same(lambda a, b: f(a.t(), b[:2], out=torch.empty(3, 2, dtype=out_dtype, device=a.device)[::1]), x, y)
    same(lambda a, b: f(a[:0], b, out=torch.empty(0, dtype=out_dtype, device=a.device)), x, y)


def test_complex_out_of_real_operands_nan_and_views():
    x = torch.tensor([[1.5, float("nan")], [-float("inf"), 3.0]])
    o = lambda d: torch.zeros(2, 4, dtype=torch.complex64, device=d)[:, ::2]   # a strided out=
    same(lambda a: torch.add(a, a.t(), out=o(a.device)), x)
    same(lambda a: torch.maximum(a, a.t(), out=o(a.device)), x)
    # a factory's out= still decides by its dtype: CPU has no complex arange
    same(lambda a: torch.arange(3, out=torch.empty(0, dtype=torch.complex64, device=a.device)), x)
    same(lambda a: torch.nansum(a, dtype=torch.complex64), x)


def test_out_dtype_errors_like_cpu():
    same(lambda x: torch.add(x, 1.5, out=torch.empty(3, dtype=torch.int64, device=x.device)), rand(3))
    same(lambda x: torch.exp(x, out=torch.empty(3, dtype=torch.int64, device=x.device)), rand(3))


# ------------------------------------------------------------------ dtype support and errors

# See same(): the meta kernel refuses these with another exception type
# than CPU (or, for bool << 1, refuses what CPU accepts).
META_DIFFERS = {("frac", torch.bool), ("divfloor", torch.bool), ("lshift", torch.bool),
                ("lshift", torch.float32), ("logaddexp", torch.bool)}


@pytest.mark.parametrize("fn", [
    lambda t: t - t, lambda t: -t, lambda t: t.abs(), lambda t: t.frac(), lambda t: t.floor(),
    lambda t: torch.lerp(t, t, 0.5), lambda t: t.relu(), lambda t: t.remainder(t), lambda t: t.hypot(t),
    lambda t: torch.div(t, t, rounding_mode="floor"), lambda t: torch.div(t, t, rounding_mode="trunc"),
    lambda t: t.bitwise_not(), lambda t: t & t, lambda t: t << 1, lambda t: F.gelu(t), lambda t: F.silu(t),
    lambda t: t.round(decimals=1), lambda t: torch.logaddexp(t, t), lambda t: t ** t,
    lambda t: t.sign(), lambda t: torch.heaviside(t, t), lambda t: t.clamp(0, 1), lambda t: t - True,
], ids=["sub", "neg", "abs", "frac", "floor", "lerp", "relu", "remainder", "hypot", "divfloor", "divtrunc",
        "bitwise_not", "and", "lshift", "gelu", "silu", "round_dec", "logaddexp", "pow", "sign", "heaviside",
        "clamp", "sub_bool_scalar"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32])
def test_dtype_support_matches_cpu(request, fn, dtype):
    x = rand(5, dtype=dtype, low=1, high=4)
    same(fn, x, meta_differs=(request.node.callspec.id.split("-")[-1], dtype) in META_DIFFERS)


def test_shape_errors_like_cpu():
    same(torch.add, rand(3, 4), rand(5))
    same(torch.where, rand(3, dtype=torch.bool), rand(3), rand(4))
    same(lambda x: x.clone().mul_(torch.ones(2, 1, 3, device=x.device)), rand(3))


def test_device_mismatch_raises():
    with pytest.raises(RuntimeError):
        rand(3).to(DEV) + rand(3)


# ------------------------------------------------------------------ activations

def _prelu(t):
    return F.prelu(t, torch.tensor([0.25, -0.1, 0.5, 2.0], dtype=t.dtype, device=t.device))


ACT = {
    "relu": F.relu, "relu6": F.relu6, "threshold": lambda t: F.threshold(t, 0.5, -2.0),
    "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
    "hardtanh": lambda t: F.hardtanh(t, -0.5, 1.5), "elu": lambda t: F.elu(t, 1.3), "selu": F.selu,
    "celu": lambda t: F.celu(t, 0.7), "softplus": lambda t: F.softplus(t, beta=2, threshold=3),
    "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "mish": F.mish, "logsigmoid": F.logsigmoid,
    "softshrink": lambda t: F.softshrink(t, 0.7), "hardshrink": lambda t: F.hardshrink(t, 0.7),
    "prelu": _prelu, "glu": lambda t: F.glu(t, -1), "glu0": lambda t: F.glu(t, 0),
}


@pytest.mark.parametrize("name", list(ACT))
def test_activation(name):
    """float32 values and gradients (through each op's backward op)."""
    check(ACT[name], rand(4, 4, requires_grad=True, low=-4, high=4), grad=True, noncontig=False)


def test_activation_bfloat16():
    for fn in ACT.values():
        check(fn, rand(4, 4, dtype=torch.bfloat16, low=-4, high=4), noncontig=False)


def test_prelu_weight_grad():
    w = torch.tensor([0.25, -0.1, 0.5], requires_grad=True)
    check(F.prelu, rand(2, 3, 4, requires_grad=True), w, grad=True, noncontig=False)


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "hardtanh", "elu", "selu", "hardswish", "silu",
                                  "threshold"])
def test_activation_inplace(name):
    fns = {
        "relu": lambda t: F.relu(t, inplace=True), "leaky_relu": lambda t: F.leaky_relu(t, 0.1, inplace=True),
        "hardtanh": lambda t: F.hardtanh(t, inplace=True), "elu": lambda t: F.elu(t, inplace=True),
        "selu": lambda t: F.selu(t, inplace=True), "hardswish": lambda t: F.hardswish(t, inplace=True),
        "silu": lambda t: F.silu(t, inplace=True),
        "threshold": lambda t: F.threshold(t, 0.1, 20.0, inplace=True),
    }

    def f(x):
        y = x * 1.0                 # a non-leaf, so in-place is allowed under autograd
        fns[name](y[:, 1:])         # through a view
        return y

    check(f, rand(4, 5, requires_grad=True, low=-3, high=3), grad=True, noncontig=False)


def test_activation_special_values():
    # CPU's vectorized gelu gives NaN at +inf (its erf there); +inf is left out
    x = torch.tensor([NAN, -INF, -50.0, -3.0, -1e-8, -0.0, 0.0, 3.0, 50.0])
    for name, fn in ACT.items():
        if name not in ("glu", "glu0", "prelu"):
            check(fn, x, noncontig=False)
    for name in ("relu", "sigmoid", "tanh", "silu", "softplus", "logsigmoid", "elu", "mish", "hardswish"):
        check(ACT[name], torch.tensor([INF]), noncontig=False)


def test_activation_integer_inputs_like_cpu():
    x = rand(2, 4, dtype=torch.int64)
    for name, fn in ACT.items():
        # float Scalars: the meta kernel's ValueError before CPU's NotImplementedError
        same(fn, x, meta_differs=name in ("leaky_relu", "softshrink", "hardshrink", "celu", "elu", "selu"))
    same(lambda t: torch.relu(t.bool()), x)
    same(lambda t: torch.relu(t.to(torch.uint8)), x)


def test_inplace_negative_slope_backward_errors():
    x = rand(5, requires_grad=True)
    for fn in (lambda t: F.leaky_relu_(t * 1, -0.5), lambda t: F.elu_(t * 1, alpha=-1.0)):
        with pytest.raises(RuntimeError, match="negative slope"):
            fn(x).sum().backward()
        xt = x.detach().to(DEV).requires_grad_()
        with pytest.raises(RuntimeError, match="negative slope"):
            fn(xt).sum().backward()
            xt.grad.cpu()


def test_backward_ops_direct():
    g = rand(3, 4, seed=20)
    x = rand(3, 4, low=-3, high=3, seed=21)
    aten = torch.ops.aten
    check(lambda a, b: aten.threshold_backward(a, b, 0.5), g, x, noncontig=False)
    check(lambda a, b: aten.sigmoid_backward(a, b), g, torch.sigmoid(x), noncontig=False)
    check(lambda a, b: aten.tanh_backward(a, b), g, torch.tanh(x), noncontig=False)
    check(lambda a, b: aten.gelu_backward(a, b, approximate="tanh"), g, x, noncontig=False)
    check(lambda a, b: aten.hardtanh_backward(a, b, -1.0, 1.0), g, x, noncontig=False)
    check(lambda a, b: aten.leaky_relu_backward(a, b, 0.1, False), g, x, noncontig=False)
    check(lambda a, b: aten.elu_backward(a, 1.0, 1.0, 1.0, True, b), g, F.elu(x), noncontig=False)
    check(lambda a, b: aten.elu_backward(a, 1.5, 1.2, 0.5, False, b), g, x, noncontig=False)
    check(lambda a, b: aten.softplus_backward(a, b, 1.0, 20.0), g, x, noncontig=False)
    check(lambda a, b: aten.log_sigmoid_backward(a, b, torch.exp(-b.abs())), g, x, noncontig=False)
    check(lambda a: aten.log_sigmoid_forward(a), x, noncontig=False)
    edge = torch.tensor([-0.5, 0.0, 0.3, 1.0]).expand(3, 4).contiguous()
    check(lambda a, b: aten.logit_backward(a, b), g, edge, noncontig=False)
    check(lambda a, b: aten.logit_backward(a, b, 0.25), g, edge, noncontig=False)
    check(lambda a, b: aten.glu_backward(a[:, :2], b, 1), g, x, noncontig=False)


# ------------------------------------------------------------------ autograd through math ops

@pytest.mark.parametrize("fn", [
    lambda t: (t.exp() * t.sin() + t.cos().abs()).log1p(),
    lambda t: torch.where(t > 0, t ** 2, t.abs().sqrt()),
    lambda t: t.pow(t.abs() + 0.5) + (2.0 ** t),
    lambda t: t.clamp(-0.5, 0.5) * t.sign() + t.round() + t.frac(),
    lambda t: torch.lerp(t, t * 2, t.sigmoid()) + torch.addcdiv(t, t, t.exp()),
    lambda t: t.masked_fill(t > 1, 0.0).tanh().erf().asinh(),
])
def test_composite_gradients(fn):
    check(fn, rand(3, 4, requires_grad=True, low=-2, high=2), grad=True, noncontig=False)


def test_silu_backward_is_one_op():
    """silu_backward is CompositeImplicitAutograd in PyTorch (a tensor of
    ones and six ops for a device without its own kernel); on tpu it is one
    op with CPU's formula: values of each float dtype, special values,
    non-contiguous inputs and its out= form against CPU, one program in
    strict mode, and gradients of the gradient still through autograd."""
    import torchtpu

    for dt in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        x = rand(6, 10, dtype=dt, low=-8, high=8)
        x[0, :5] = torch.tensor([NAN, INF, -INF, -100.0, 100.0], dtype=dt)
        g = rand(6, 10, dtype=dt, seed=3)
        same(torch.ops.aten.silu_backward, g, x)
        same(lambda a, b: torch.ops.aten.silu_backward(a.t(), b.t()), g, x)
        same(lambda a, b: torch.ops.aten.silu_backward.grad_input(
            a.t(), b.t(), grad_input=torch.empty(10, 6, dtype=a.dtype, device=a.device)), g, x)
    same(torch.ops.aten.silu_backward, rand(3, dtype=torch.int64), rand(3, dtype=torch.int64))
    same(torch.ops.aten.silu_backward, rand(0, 3), rand(0, 3, seed=1))
    same(torch.ops.aten.silu_backward, rand(2, 3), rand(3, seed=1))    # broadcast like CPU's kernel

    g, x = rand(64, 32).to(DEV), rand(64, 32, seed=4).to(DEV)
    torch.ops.aten.silu_backward(g, x).cpu()
    before = torchtpu.debug.metrics()["executions"]
    with torchtpu.set_eager_mode("strict"):
        r = torch.ops.aten.silu_backward(g, x)
    torch.tpu.synchronize()
    assert torchtpu.debug.metrics()["executions"] - before == 1
    torch.testing.assert_close(r.cpu(), torch.ops.aten.silu_backward(g.cpu(), x.cpu()))

    # the gradient of silu in bf16, and the gradient of the gradient
    check(F.silu, rand(4, 4, dtype=torch.bfloat16, low=-4, high=4, requires_grad=True), grad=True,
          noncontig=False)
    xc = rand(5, 7, dtype=torch.float64, requires_grad=True)
    xt = xc.detach().to(DEV).requires_grad_()
    for mode in ("strict", "fused"):
        with torchtpu.set_eager_mode(mode):
            (gt,) = torch.autograd.grad(F.silu(xt).sum(), xt, create_graph=True)
            (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
        (gc,) = torch.autograd.grad(F.silu(xc).sum(), xc, create_graph=True)
        (ggc,) = torch.autograd.grad((gc * gc).sum(), xc)
        torch.testing.assert_close(gt.cpu(), gc)
        torch.testing.assert_close(ggt.cpu(), ggc)
