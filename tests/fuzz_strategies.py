"""Hypothesis strategies that draw fuzz cases (JSON objects, see
fuzz_cases.py) and the check that runs one through a worker.

Two sources of cases:
  * PyTorch's op_db: which entry, which dtype, which of its samples
    (sample_inputs or reference_inputs) or error_inputs, which layout, and
    which form of the call (function, in-place on views, out=, mixed
    devices); the catalog of entries comes from the worker;
  * a hand-written layer: elementwise, reduction, shape and indexing calls
    with random shapes (0-size and 0-d included), dtypes, layouts and
    arguments, many of them invalid (dims out of range, mismatched shapes,
    wrong dtypes, indices out of range, negative sizes, CPU tensors among
    tpu ones).
"""
import json

import torch
from hypothesis import strategies as st

from fuzz_worker import reproducer

DTYPE_NAMES = ["float32", "float64", "bfloat16", "float16", "int64", "int32", "int16", "int8", "uint8",
               "bool", "complex64", "complex128"]
LAYOUTS = ["contig", "T", "step", "offset", "expand"]
OUT_FORMS = ["exact", "empty", "resize", "noncontig", "dtype", "device"]

FLOAT = ["float32", "float64", "bfloat16", "float16"]
INT = ["int64", "int32", "int16", "int8", "uint8"]
REAL = FLOAT + INT
ALL = REAL + ["bool", "complex64"]

# Dims are small (programs compile per shape); 0 is drawn now and then.
dim_size = st.sampled_from([1, 2, 3, 4, 5, 2, 3, 0])
shapes = st.lists(dim_size, min_size=0, max_size=4)
seeds = st.integers(0, 2 ** 16)
layouts = st.sampled_from(LAYOUTS)


# ---- op_db cases

@st.composite
def opinfo_cases(draw, catalog):
    entry = draw(st.sampled_from(catalog))
    variants = ["fn", "fn", "mixdev"] + (["inplace"] if entry["inplace"] else []) + (["out"] if entry["out"] else [])
    case = dict(kind="opinfo", op=entry["name"], dtype=draw(st.sampled_from(entry["dtypes"])),
                source=draw(st.sampled_from(["sample", "ref"] if entry["ref"] else ["sample"])),
                sample=draw(st.integers(0, 23)), layout=draw(layouts), variant=draw(st.sampled_from(variants)),
                seed=draw(seeds))
    if case["variant"] == "out":
        case["out"] = draw(st.sampled_from(OUT_FORMS))
    if case["variant"] == "mixdev":
        case["which"] = draw(st.integers(0, 3))
    return case


@st.composite
def error_cases(draw, catalog):
    entry = draw(st.sampled_from([e for e in catalog if e["errors"]]))
    return dict(kind="error", op=entry["name"], sample=draw(st.integers(0, 23)), layout=draw(layouts),
                seed=draw(seeds))


# ---- hand-written calls

@st.composite
def tensors(draw, shape=None, dtypes=ALL, layout=None, vals=None, cpu_ok=True):
    spec = {"T": draw(shapes) if shape is None else list(shape), "dtype": draw(st.sampled_from(dtypes)),
            "layout": draw(layouts) if layout is None else layout, "seed": draw(seeds)}
    spec["vals"] = draw(st.sampled_from(["normal", "normal", "small", "special"])) if vals is None else vals
    if cpu_ok and draw(st.integers(0, 19)) == 0:
        spec["dev"] = "cpu"  # a CPU tensor among tpu ones (0-d: a scalar, allowed)
    return spec


@st.composite
def broadcast_shape(draw, shape):
    """A shape broadcastable with `shape` (mostly), or an incompatible one."""
    out = [draw(st.sampled_from([d, d, 1])) for d in shape]
    out = out[draw(st.integers(0, len(out))):] if out else out
    if draw(st.integers(0, 9)) == 0:  # a mismatch, or an extra leading dim
        out = [draw(dim_size)] + out
        if len(out) > 1:
            out[-1] = out[-1] + 1
    return out


dims_of = lambda rank: st.integers(-rank - 2, rank + 1)  # noqa: E731  a third out of range


UNARY = ["torch.neg", "torch.abs", "torch.exp", "torch.log", "torch.sqrt", "torch.sin", "torch.tanh",
         "torch.sigmoid", "torch.floor", "torch.round", "torch.sign", "torch.reciprocal", "torch.relu",
         "torch.erf", "torch.bitwise_not", "torch.logical_not", "torch.isnan", "torch.square", "torch.trunc",
         "torch.exp2", "torch.log1p", "torch.rsqrt", "torch.isfinite", "torch.signbit", "torch.frac",
         "torch.nan_to_num", "torch.positive", "torch.sgn", "torch.angle"]
BINARY = ["torch.add", "torch.sub", "torch.mul", "torch.div", "torch.remainder", "torch.fmod", "torch.pow",
          "torch.maximum", "torch.minimum", "torch.eq", "torch.lt", "torch.ge", "torch.ne", "torch.logical_and",
          "torch.logical_xor", "torch.bitwise_and", "torch.bitwise_or", "torch.bitwise_xor", "torch.atan2",
          "torch.floor_divide", "torch.fmax", "torch.fmin", "torch.hypot", "torch.copysign",
          "torch.bitwise_left_shift", "torch.bitwise_right_shift", "torch.xlogy", "torch.true_divide"]


@st.composite
def elementwise_calls(draw):
    a = draw(tensors())
    if draw(st.booleans()):
        fn = draw(st.sampled_from(UNARY))
        args, kwargs = [a], {}
    else:
        fn = draw(st.sampled_from(BINARY))
        other = draw(st.one_of(tensors(shape=draw(broadcast_shape(a["T"]))),
                               st.integers(-5, 5), st.floats(-4, 4, allow_nan=False), st.booleans()))
        args, kwargs = [a, other], {}
        if fn in ("torch.add", "torch.sub") and draw(st.integers(0, 3)) == 0:
            kwargs["alpha"] = draw(st.sampled_from([2, -1, 0.5, True]))
        if fn == "torch.div" and draw(st.booleans()):
            kwargs["rounding_mode"] = draw(st.sampled_from(["trunc", "floor", "bogus"]))
    inplace = fn.split(".")[1] + "_"
    if hasattr(torch.Tensor, inplace) and draw(st.integers(0, 3)) == 0:
        # the method's in-place form on a (possibly strided or broadcast) view
        return dict(kind="call", fn="Tensor." + inplace, args=args, kwargs=kwargs, writes=True)
    if draw(st.integers(0, 4)) == 0 and fn != "torch.isnan":
        kwargs["out"] = draw(tensors(shape=draw(st.sampled_from([a["T"], [0], [7]])), cpu_ok=True))
        return dict(kind="call", fn=fn, args=args, kwargs=kwargs, writes=True)
    return dict(kind="call", fn=fn, args=args, kwargs=kwargs)


REDUCE = ["torch.sum", "torch.mean", "torch.prod", "torch.amax", "torch.amin", "torch.argmax", "torch.argmin",
          "torch.std", "torch.var", "torch.logsumexp", "torch.all", "torch.any", "torch.nansum",
          "torch.count_nonzero", "torch.cumsum", "torch.cumprod", "torch.max", "torch.min", "torch.norm",
          "torch.median", "torch.aminmax", "torch.var_mean", "torch.std_mean", "torch.logcumsumexp", "torch.cummax"]


@st.composite
def reduction_calls(draw):
    a = draw(tensors(cpu_ok=False))
    fn = draw(st.sampled_from(REDUCE))
    rank = len(a["T"])
    kwargs = {}
    form = draw(st.integers(0, 3))
    if form == 1:
        kwargs["dim"] = draw(dims_of(rank))
    elif form == 2:
        kwargs["dim"] = draw(st.lists(dims_of(rank), max_size=3))
    if form and draw(st.booleans()):
        kwargs["keepdim"] = draw(st.booleans())
    if fn in ("torch.sum", "torch.prod", "torch.cumsum", "torch.mean", "torch.nansum") and draw(st.integers(0, 3)) == 0:
        kwargs["dtype"] = {"D": draw(st.sampled_from(ALL))}
    if fn in ("torch.std", "torch.var", "torch.var_mean", "torch.std_mean") and draw(st.booleans()):
        kwargs["correction"] = draw(st.sampled_from([0, 1, 2, 7]))
    return dict(kind="call", fn=fn, args=[a], kwargs=kwargs)


@st.composite
def shape_calls(draw):
    a = draw(tensors(cpu_ok=False, vals="normal"))
    shape, rank = a["T"], len(a["T"])
    n = 1
    for d in shape:
        n *= d
    k = draw(st.integers(0, 16))
    dim = draw(dims_of(rank))
    sizes = st.lists(st.sampled_from([-1, 0, 1, 2, 3, n, -2]), max_size=4)
    if k == 0:
        return dict(kind="call", fn="torch.reshape", args=[a, draw(st.one_of(sizes, st.just([n])))])
    if k == 1:
        return dict(kind="call", fn="Tensor.view", args=[a, *draw(sizes)])
    if k == 2:
        perm = draw(st.one_of(st.permutations(list(range(rank))), st.lists(dims_of(rank), max_size=rank + 1)))
        return dict(kind="call", fn="torch.permute", args=[a, perm])
    if k == 3:
        return dict(kind="call", fn="torch.transpose", args=[a, dim, draw(dims_of(rank))])
    if k == 4:
        return dict(kind="call", fn="torch.narrow", args=[a, dim, draw(st.integers(-3, 5)), draw(st.integers(-1, 5))])
    if k == 5:
        return dict(kind="call", fn="torch.select", args=[a, dim, draw(st.integers(-6, 5))])
    if k == 6:
        return dict(kind="call", fn="torch.flip", args=[a, draw(st.lists(dims_of(rank), max_size=3))])
    if k == 7:
        return dict(kind="call", fn="torch.roll", args=[a, draw(st.integers(-7, 7)), dim])
    if k == 8:
        reps = draw(st.lists(st.integers(-1, 3), min_size=max(0, rank - 1), max_size=rank + 1))
        return dict(kind="call", fn="Tensor.repeat", args=[a, reps])
    if k == 9:
        others = [draw(tensors(shape=draw(st.sampled_from([shape, shape[:-1] + [2], [0]])), cpu_ok=True))
                  for _ in range(draw(st.integers(0, 3)))]
        fn = draw(st.sampled_from(["torch.cat", "torch.stack", "torch.hstack", "torch.vstack"]))
        return dict(kind="call", fn=fn, args=[{"L": [a] + others}], kwargs={} if "h" in fn or "v" in fn
                    else {"dim": draw(dims_of(rank))})
    if k == 10:
        return dict(kind="call", fn="Tensor.expand", args=[a, *draw(st.lists(st.sampled_from([-1, 1, 2, 3, 0, -2]),
                                                                             max_size=5))])
    if k == 11:
        fn = draw(st.sampled_from(["torch.squeeze", "torch.unsqueeze", "torch.flatten", "torch.movedim"]))
        args = [a, dim] + ([draw(dims_of(rank))] if fn in ("torch.flatten", "torch.movedim") else [])
        return dict(kind="call", fn=fn, args=args)
    if k == 12:
        fn = draw(st.sampled_from(["torch.split", "torch.chunk", "torch.tensor_split", "torch.unbind"]))
        args = [a] + ([] if fn == "torch.unbind" else [draw(st.integers(-1, 4))]) + [dim]
        return dict(kind="call", fn=fn, args=args)
    if k == 13:
        fn = draw(st.sampled_from(["torch.tril", "torch.triu", "torch.diagonal", "torch.diag_embed",
                                   "torch.trace", "torch.diag"]))
        args = [a] + ([draw(st.integers(-4, 4))] if fn != "torch.trace" else [])
        return dict(kind="call", fn=fn, args=args)
    if k == 14:
        fn = draw(st.sampled_from(["torch.clone", "Tensor.contiguous", "torch.t", "torch.ravel",
                                   "Tensor.tril_", "Tensor.triu_", "Tensor.zero_", "Tensor.fill_"]))
        args = [a] + ([draw(st.floats(-3, 3))] if fn == "Tensor.fill_" else [])
        return dict(kind="call", fn=fn, args=args, writes=fn.endswith("_"))
    if k == 15:
        fn = draw(st.sampled_from(["Tensor.copy_", "torch.where", "torch.lerp", "torch.addcmul", "torch.clamp"]))
        b = draw(tensors(shape=draw(broadcast_shape(shape))))
        c = draw(tensors(shape=draw(broadcast_shape(shape))))
        args = {"Tensor.copy_": [a, b], "torch.where": [{"M": draw(broadcast_shape(shape)), "seed": 1}, a, b],
                "torch.lerp": [a, b, draw(st.one_of(st.floats(-1, 2), st.just(c)))],
                "torch.addcmul": [a, b, c], "torch.clamp": [a, b, c]}[fn]
        return dict(kind="call", fn=fn, args=args, writes=fn.endswith("_"))
    fn = draw(st.sampled_from(["torch.sort", "torch.argsort", "torch.topk", "torch.kthvalue", "torch.cumsum",
                               "torch.nonzero", "torch.unique", "torch.msort"]))
    args = [a] + ([draw(st.integers(-1, 6)), dim] if fn in ("torch.topk", "torch.kthvalue") else
                  [] if fn in ("torch.nonzero", "torch.unique", "torch.msort") else [dim])
    return dict(kind="call", fn=fn, args=args)


@st.composite
def index_calls(draw):
    a = draw(tensors(cpu_ok=False, dtypes=REAL + ["bool"]))
    shape, rank = a["T"], len(a["T"])
    dim = draw(dims_of(rank))
    size = shape[dim] if -rank <= dim < rank else 3
    lo, hi = draw(st.sampled_from([(0, max(size, 1)), (-size, max(size, 1)), (-size - 2, size + 3)]))
    index = {"I": draw(shapes.filter(lambda s: len(s) <= 2)), "lo": lo, "hi": hi, "seed": draw(seeds),
             "layout": draw(layouts), "dtype": draw(st.sampled_from(["int64", "int64", "int32", "int16"]))}
    if draw(st.integers(0, 19)) == 0:
        index["dev"] = "cpu"
    k = draw(st.integers(0, 11))
    src = draw(tensors(shape=draw(st.sampled_from([index["I"], shape, [2, 2]])), dtypes=[a["dtype"]],
                       cpu_ok=False))
    if k == 0:
        return dict(kind="call", fn="torch.index_select", args=[a, dim, index])
    if k == 1:
        index["I"] = draw(st.lists(dim_size, min_size=rank, max_size=rank))
        return dict(kind="call", fn="torch.gather", args=[a, dim, index])
    if k == 2:
        fn = draw(st.sampled_from(["Tensor.scatter_", "Tensor.scatter_add_", "torch.scatter", "torch.scatter_add"]))
        index["I"] = draw(st.lists(dim_size, min_size=rank, max_size=rank))
        src = draw(st.one_of(tensors(shape=index["I"], dtypes=[a["dtype"]], cpu_ok=False), st.floats(-2, 2))) \
            if "add" not in fn else draw(tensors(shape=index["I"], dtypes=[a["dtype"]], cpu_ok=False))
        return dict(kind="call", fn=fn, args=[a, dim, index, src], writes=fn.endswith("_"))
    if k == 3:
        fn = draw(st.sampled_from(["Tensor.index_add_", "Tensor.index_copy_", "torch.index_add", "torch.index_copy"]))
        src_shape = list(shape)
        if -rank <= dim < rank:
            src_shape[dim] = index["I"][0] if index["I"] else 1
        index["I"] = index["I"][:1]
        src = draw(tensors(shape=draw(st.sampled_from([src_shape, shape])), dtypes=[a["dtype"]], cpu_ok=False))
        return dict(kind="call", fn=fn, args=[a, dim, index, src], writes=fn.endswith("_"))
    if k == 4:
        return dict(kind="call", fn="Tensor.index_fill_", args=[a, dim, index, draw(st.floats(-2, 2))], writes=True)
    if k == 5:
        mask = {"M": draw(st.sampled_from([shape, draw(broadcast_shape(shape))])), "seed": draw(seeds),
                "layout": draw(layouts)}
        fn = draw(st.sampled_from(["torch.masked_fill", "Tensor.masked_fill_", "torch.masked_select"]))
        args = [a, mask] + ([draw(st.one_of(st.floats(-2, 2), st.integers(-2, 2)))] if "fill" in fn else [])
        return dict(kind="call", fn=fn, args=args, writes=fn.endswith("_"))
    if k == 6:
        return dict(kind="call", fn="torch.take", args=[a, index])
    if k == 7:
        return dict(kind="call", fn="Tensor.put_", args=[a, index, src, draw(st.booleans())], writes=True)
    if k in (8, 9):
        key = draw(st.sampled_from([index, {"S": [draw(st.integers(-4, 4)), None, draw(st.sampled_from([1, 2, 3]))]},
                                    draw(st.integers(-6, 5)), {"L": [{"E": None}, index]},
                                    {"M": shape, "seed": 3}, [0, -1]]))
        if k == 8:
            return dict(kind="call", fn="operator.getitem", args=[a, key])
        value = draw(st.one_of(st.floats(-2, 2), tensors(shape=[], dtypes=[a["dtype"]], cpu_ok=True), st.just(src)))
        return dict(kind="call", fn="operator.setitem", args=[a, key, value], writes=True)
    if k == 10:
        weight = draw(tensors(shape=[draw(st.integers(0, 5)), draw(st.integers(0, 3))], dtypes=FLOAT, cpu_ok=False))
        return dict(kind="call", fn="F.embedding", args=[index, weight])
    index["I"] = draw(shapes.filter(lambda s: len(s) <= 2))
    fn = draw(st.sampled_from(["F.one_hot", "torch.bincount", "torch.searchsorted"]))
    args = {"F.one_hot": [index, draw(st.integers(-1, 6))], "torch.bincount": [index],
            "torch.searchsorted": [draw(tensors(shape=shape[-1:] or [3], dtypes=REAL, cpu_ok=False)), a]}[fn]
    return dict(kind="call", fn=fn, args=args)


call_cases = st.one_of(elementwise_calls(), reduction_calls(), shape_calls(), index_calls())


# ---- the check

class Tally:
    """What a run saw: cases by status, ops covered, coverage gaps and
    the failing cases (first few of each op/status)."""

    FAIL = ("mismatch", "error", "crash", "hang", "runner_error")

    def __init__(self):
        self.status, self.ops, self.gaps, self.failures, self.known = {}, set(), {}, [], {}

    def add(self, case, result):
        st_ = result["status"]
        self.status[st_] = self.status.get(st_, 0) + 1
        op = case.get("op") or case.get("fn")
        if st_ != "skip":
            self.ops.add(op)
        if st_ == "unsupported":
            self.gaps[op] = self.gaps.get(op, 0) + 1
        if st_ == "known":
            self.known[result["known"]] = self.known.get(result["known"], 0) + 1
        if st_ in self.FAIL:
            self.failures.append((case, result))

    def summary(self):
        lines = [f"cases: {sum(self.status.values())} " + json.dumps(dict(sorted(self.status.items()))),
                 f"ops covered: {len(self.ops)}; coverage gaps (NotImplementedError): {sum(self.gaps.values())} "
                 f"cases in {len(self.gaps)} ops"]
        if self.known:
            lines.append("known bugs hit: " + json.dumps(self.known))
        return "\n".join(lines)


# Failures the fuzzer has found and that are not fixed yet, by the shape of
# their report ("status: detail"). The seeded CI subset counts them as
# known instead of failing; the long run lists them. Each is a bug to fix
# (tests/conformance/test_fuzz.py pins one case of most of them as a strict xfail).
KNOWN_BUGS = [
    # Both raise, but another exception type: PyTorch's meta functions
    # check arguments in another order than the CPU kernels (dim before
    # dtype, shape before index dtype) or raise RuntimeError for the CPU's
    # IndexError/TypeError.
    (r"^error: tpu raises \w+: .*; CPU raises ", "another exception type (check order)"),
    # Dtype checks that live in the lowerings, skipped when nothing is
    # lowered (0 elements), or missing from the meta functions.
    (r"CPU raises NotImplementedError: .*tpu does not", "a dtype the CPU has no kernel for"),
    (r"CPU raises RuntimeError: (std and var only support|result type \w+ can't be cast|Boolean alpha|"
     r"masked_scatter_ only supports boolean|Expected object of scalar type|Subtraction, the `-` operator|"
     r"value cannot be converted to type)", "a dtype check the meta function lacks"),
    # Index and shape checks the engine's path lacks.
    (r"CPU raises (IndexError|RuntimeError): (index_select\(\)|index_fill_\(\)|index_copy_\(\)|put_\(\)|"
     r"INDICES element is out of DATA bounds|index -?\d+ is out of bounds for dimension \d+ with size 0|"
     r"Dimension out of range)", "an index check the engine's path lacks"),
    (r"CPU raises RuntimeError: output with shape \[\] doesn't match", "a 0-d out= of a reduction"),
    (r"CPU raises RuntimeError: Expected X.is_contiguous", "the CPU kernel refuses non-contiguous input"),
    (r"negative dimension -\d+: \[.*0.*\]; CPU does not raise", "expand to 0 elements with -1 sizes"),
    (r"output 0\[.*\]: inf vs CPU", "float32 overflow where the CPU's kernel stays finite (polygamma)"),
]


def known_bug(result):
    import re
    text = f"{result['status']}: {result.get('detail')}"
    for pattern, what in KNOWN_BUGS:
        if re.search(pattern, text):
            return what
    return None


def describe(case, result):
    return (f"{result['status']}: {result.get('detail')}\n  case: {json.dumps(case)}\n"
            f"  reproduce: {reproducer(case)}")


def check(worker, case, tally=None):
    """Runs case; returns the result, or raises AssertionError describing a
    failure when no tally collects it."""
    result = worker.run(case)
    if result["status"] in Tally.FAIL and known_bug(result):
        result = dict(result, status="known", known=known_bug(result))
    if tally is not None:
        tally.add(case, result)
        return result
    assert result["status"] not in Tally.FAIL, describe(case, result)
    return result
