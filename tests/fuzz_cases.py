"""Runs one fuzz case on the CPU and on tpu and compares them (worker side).

A case is a JSON object (so a failing one prints as a reproducer and can be
replayed: `tests/fuzz_long.py --case '<json>'`). Its "kind" says what it is:

  opinfo  an op_db entry's sample (sample_inputs or reference_inputs) for a
          dtype, with a layout applied to every tensor (transposed, stepped,
          storage offset, broadcast), run as the function, its in-place
          variant (on those views), its out= form (out tensors of the right
          or wrong shape, dtype, layout or device), or with one tensor left
          on the CPU (mixed devices)
  error   an op_db entry's error_inputs sample: the CPU's exception type is
          the answer tpu must give
  call    a hand-written call: a torch function or Tensor method with
          arguments described by value specs (below), drawn by
          fuzz_strategies.py

Every case ends in one status:

  pass         same result (values, dtype, shape; written inputs too) or
               the same exception type as the CPU
  mismatch     a different answer, or the CPU raises and tpu does not
  error        tpu raises where the CPU does not, or another exception type
  unsupported  tpu raised NotImplementedError naming tpu (a coverage gap:
               loud, never wrong)
  skip         nothing to compare (no such sample, the CPU cannot build it)

Value specs of a "call" case (JSON, built into tensors here):
  {"T": shape, "dtype": d, "layout": l, "seed": s, "vals": "normal"|"special"|"small", "dev": "cpu"}
      a tensor; "dev": "cpu" keeps it on the CPU in the tpu run
  {"I": shape, "lo": a, "hi": b, "dtype": "int64", "layout": l, "seed": s}   integers in [a, b)
  {"M": shape, "layout": l, "seed": s}                                      a random bool mask
  {"D": "float32"}            a dtype        {"L": [spec, ...]}  a list
  {"S": [start, stop, step]}  a slice        {"E": null}         Ellipsis
  anything else is itself (numbers, strings, None, lists of numbers)
"""
import itertools
import json
import math
import operator
import warnings

import torch

import torchtpu
from conformance import expected as xf
from conformance import worker as cw
from fuzz_strategies import DTYPE_NAMES

MAX_SAMPLES = 24
# The conformance helpers retry a bf16 mismatch against f32 math rounded
# back (XLA computes low-precision elementwise math in f32 and rounds
# once); half precision is the same case.
cw.WIDER.setdefault("float16", "float32")

# Entries whose samples address their storage directly (a layout would
# change what they mean) or whose CPU results depend on more than the
# arguments.
NO_LAYOUT = {"as_strided", "as_strided_scatter", "as_strided_copy", "as_strided.partial_views",
             "_refs.as_strided", "new_empty_strided", "empty_strided", "resize_", "resize_as_", "set_"}


def _dt(name):
    return getattr(torch, name)


# ---- the catalog of op_db entries the fuzzer draws from

_ENTRIES = None


def _entries():
    global _ENTRIES
    if _ENTRIES is None:
        import os
        try:
            here = os.path.dirname(os.path.abspath(__file__))
            with open(os.path.join(os.path.dirname(here), "docs", "ops.json")) as f:
                swept = {r["op"] for r in json.load(f)["results"] if r["status"] == "pass"}
        except OSError:
            swept = set()
        registered = {n.split(".")[0] for n in torchtpu.registered_ops}
        _ENTRIES = {}
        for op in cw.op_db():
            name = cw.entry_name(op)
            if name in swept or (op.aten_name or op.name).split(".")[-1] in registered:
                _ENTRIES.setdefault(name, op)
    return _ENTRIES


def catalog():
    """What the strategies may draw: every implemented op_db entry with the
    dtypes the CPU supports and the variants it has."""
    out = []
    for name, op in _entries().items():
        sup = op.supported_dtypes("cpu")
        dts = [d for d in DTYPE_NAMES if _dt(d) in sup]
        if not dts:
            continue
        out.append(dict(name=name, dtypes=dts, out=bool(op.supports_out),
                        inplace=op.inplace_variant is not None, errors=op.error_inputs_func is not None,
                        ref=op.reference_inputs_func is not None))
    return out


# ---- layouts: the same CPU tensor stored another way

def with_layout(t, layout):
    """t stored as `layout`: same values, except "expand", which repeats
    t's first slice along its first dim of size > 1 (a stride-0 view; the
    CPU and tpu runs get the same values)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or layout == "contig" or t.dim() == 0:
        return t
    # Lazy conjugate/negative bits are not part of the storage copied to
    # tpu: the values they stand for are.
    t = t.detach().resolve_conj().resolve_neg()
    if layout == "T" and t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "step":
        big = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        big[..., ::2] = t
        return big[..., ::2]
    if layout == "offset":
        flat = torch.zeros(t.numel() + 3, dtype=t.dtype)
        flat[3:] = t.reshape(-1)
        return flat[3:].view(t.shape)
    if layout == "expand":
        dims = [d for d in range(t.dim()) if t.shape[d] > 1]
        if dims:
            return t.narrow(dims[0], 0, 1).expand(t.shape)
    return t


def _relayout(x, layout):
    return cw._map(x, lambda v: with_layout(v, layout))


def _sample_with_layout(s, layout):
    from torch.testing._internal.opinfo.core import SampleInput
    return SampleInput(_relayout(s.input, layout), args=_relayout(tuple(s.args), layout),
                       kwargs=_relayout(dict(s.kwargs), layout),
                       output_process_fn_grad=s.output_process_fn_grad, broadcasts_input=s.broadcasts_input,
                       name=s.name)


def _copy_sample(s):
    from torch.testing._internal.opinfo.core import SampleInput
    return SampleInput(cw._to_cpu_copy(s.input), args=cw._to_cpu_copy(tuple(s.args)),
                       kwargs=cw._to_cpu_copy(dict(s.kwargs)), name=s.name)


def _clone_keep_layout(t):
    """A CPU copy with t's sizes, strides and offset into a private storage."""
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,)).clone()
    return flat.as_strided(t.shape, t.stride(), t.storage_offset())


def _root(t):
    """The whole storage under t, as a 1-d tensor of t's dtype."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, (n,), (1,))


# ---- running both sides

def _tensors(x):
    return [t for t in cw._flatten(x, []) if isinstance(t, torch.Tensor) and t.layout == torch.strided]


def _unsupported(e):
    """tpu cannot run it (no lowering, no kernel for the dtype, no meta
    function): a coverage gap, loud and never wrong."""
    return isinstance(e, NotImplementedError)


def _written_tol(tensors, tol):
    """Written storages hold results in their own dtype, computed from
    inputs that may be less precise: the loosest input dtype's tolerance."""
    if tol != (0.0, 0.0):
        return tol
    tols = [cw.FWD_TOL.get(str(t.dtype)[6:], (0.0, 0.0)) for t in tensors]
    return max(tols, default=tol)


def _on_tpu(x):
    return cw._map(x, lambda t: t.to("tpu") if isinstance(t, torch.Tensor) and t.device.type == "cpu" else t)


def both(call, cpu_args, tpu_args, tol=(0.0, 0.0), shape_only=False, ties=None, written=(),
         mixdev=False, wider=None):
    """Runs call(cpu_args) and call(tpu_args) and compares: results, and
    the storages of the `written` argument positions (indices into the
    flattened tensors of the args) after the call. mixdev: the tpu run has
    a CPU tensor among tpu ones, so a RuntimeError is as good as the CPU's
    answer. wider(): a CPU answer computed in a wider dtype, accepted when
    the plain one differs."""
    cpu_t, tpu_t = _tensors(cpu_args), _tensors(tpu_args)
    wtol = _written_tol(cpu_t, tol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = call(cpu_args)
        except Exception as e:  # noqa: BLE001  the CPU rejects it: tpu must too
            expected, cpu_exc = None, e
        else:
            cpu_exc = None
        try:
            actual = call(tpu_args)
            if mixdev:  # a result may rightly stay with its CPU operand
                actual = _on_tpu(actual)
            if cpu_exc is None:
                try:
                    cw.compare(actual, expected, tol, shape_only, ties=ties)
                except cw.Mismatch:
                    hi = wider() if wider else None
                    if hi is None:
                        raise
                    cw.compare(actual, hi, tol, shape_only, ties=ties)
                for i in written:
                    if i < len(cpu_t) and cpu_t[i].device.type == "cpu" and tpu_t[i].device.type == "tpu":
                        try:
                            cw.compare(_root(tpu_t[i]), _root(cpu_t[i]), wtol, shape_only)
                        except cw.Mismatch as m:
                            raise cw.Mismatch(f"written argument {i} (its whole storage): {m}") from None
            torch.tpu.synchronize()
        except cw.Mismatch as m:
            return "mismatch", str(m)
        except Exception as e:  # noqa: BLE001
            if cpu_exc is not None and type(e) is type(cpu_exc):
                return "pass", None
            if _unsupported(e):
                return "unsupported", cw._short(e)
            if mixdev and isinstance(e, RuntimeError):
                return "pass", None
            cpu_says = f"CPU raises {cw._short(cpu_exc)}" if cpu_exc is not None else "CPU does not raise"
            return "error", f"tpu raises {cw._short(e)}; {cpu_says}"
    if cpu_exc is not None:
        return "mismatch", f"CPU raises {cw._short(cpu_exc)}, tpu does not"
    return "pass", None


def _tpu(x, keep=()):
    """x with tensors copied to tpu in the same storage layout; CPU device
    names become tpu. Flattened tensor positions in `keep` stay on the CPU."""
    n = [0]

    def leaf(v):
        if isinstance(v, torch.Tensor):
            i = n[0]
            n[0] += 1
            if i in keep:
                return v
        return cw._leaf_to_tpu(v)

    return cw._map(x, leaf)


# ---- op_db cases

def _samples(op, case):
    dt = _dt(case["dtype"])
    torch.manual_seed(case.get("seed", 0))
    if case.get("source") == "ref" and op.reference_inputs_func is not None:
        gen = op.reference_inputs("cpu", dt)
    else:
        gen = op.sample_inputs("cpu", dt)
    return list(itertools.islice(gen, MAX_SAMPLES))


def _as_args(s):
    return [s.input, list(s.args), dict(s.kwargs)]


def _call_fn(fn):
    return lambda a: fn(a[0], *a[1], **a[2])


def _out_like(ref, form):
    """An out= argument for a CPU result `ref` (a tensor or a tuple)."""
    def one(r):
        if not isinstance(r, torch.Tensor):
            raise TypeError("not a tensor result")
        if form in ("exact", "device"):
            return torch.zeros_like(r, memory_format=torch.contiguous_format)
        if form == "empty":
            return torch.empty(0, dtype=r.dtype)
        if form == "resize":
            return torch.zeros(r.numel() + 2, dtype=r.dtype)
        if form == "noncontig":
            return with_layout(torch.zeros_like(r, memory_format=torch.contiguous_format),
                               "T" if r.dim() >= 2 else "step")
        # "dtype": a dtype the result cannot always be cast to
        other = torch.int64 if (r.is_floating_point() or r.is_complex()) else torch.bool
        return torch.zeros(r.shape, dtype=other)
    if isinstance(ref, (tuple, list)):
        return tuple(one(r) for r in ref)
    return one(ref)


def _known(name, status):
    """Failures the conformance table already lists for the entry (any
    dtype: the listed reasons are not about one dtype's arithmetic)."""
    if status in ("mismatch", "error") and any(k[0] == name for k in xf.EXPECTED_FAILURES):
        return "xfail"
    return status


def run_opinfo(case):
    try:
        status, detail = _run_opinfo(case)
    except cw.Mismatch as m:
        return "mismatch", str(m)
    return _known(case["op"], status), detail


def _run_opinfo(case):
    ents = _entries()
    op = ents.get(case["op"])
    if op is None:
        return "skip", "no such entry"
    try:
        samples = _samples(op, case)
    except Exception as e:  # noqa: BLE001  the CPU cannot build this dtype's samples
        return "skip", "sample inputs: " + cw._short(e)
    if not samples:
        return "skip", "no samples"
    s = samples[case.get("sample", 0) % len(samples)]
    name = cw.entry_name(op)
    layout = "contig" if name in NO_LAYOUT else case.get("layout", "contig")
    s = _sample_with_layout(s, layout)
    dn = case["dtype"]
    tol = cw.tolerance(op, dn, "fwd")
    shape_only = xf.shape_only(name, s)
    variant = case.get("variant", "fn")
    if variant == "fn":
        return cw.run_sample_fwd(op, s, tol, shape_only, dtype_name=dn)
    keep_cpu = xf.KEEP_ON_CPU.get(name, ())
    if any(isinstance(a, torch.Tensor) for k, a in enumerate(s.args) if k in keep_cpu):
        return "skip", "the entry keeps an argument on the CPU"
    cpu = _as_args(_copy_sample(s))
    if variant == "inplace":
        if op.inplace_variant is None:
            return "skip", "no in-place variant"
        # The input keeps its layout (a view into a larger storage for
        # step/offset, stride 0 for expand): the write goes through it.
        cpu[0] = _clone_keep_layout(s.input) if isinstance(s.input, torch.Tensor) else s.input
        return both(_call_fn(op.inplace_variant), cpu, _tpu(cpu), tol, shape_only, written=(0,))
    if variant == "out":
        if not op.supports_out:
            return "skip", "no out= form"
        form = case.get("out", "exact")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = op(s.input, *s.args, **s.kwargs)
            out = _out_like(ref, form)
        except Exception:  # noqa: BLE001  the CPU rejects the sample or gives no tensor
            return "skip", "no tensor result to write"
        cpu.append(out)
        n_in = len(_tensors(cpu[:3]))
        outs = list(range(n_in, n_in + len(_tensors(out))))
        tpu = _tpu(cpu, keep=outs if form == "device" else ())
        call = (lambda a: op(a[0], *a[1], out=a[3], **a[2]))
        if form == "device":
            return both(call, cpu, tpu, tol, shape_only, mixdev=True)
        # A resized out= tensor's strides (and so its storage's order) are
        # the kernel's choice; the values it holds are compared as results.
        written = outs if form in ("exact", "noncontig") else ()
        call_and_out = (lambda a: (call(a), a[3]))
        return both(call_and_out, cpu, tpu, tol, shape_only, written=written)
    if variant == "mixdev":
        n = len(_tensors(cpu))
        if n < 2:
            return "skip", "fewer than two tensors"
        keep = (case.get("which", 1) % (n - 1) + 1,)  # never the input itself
        return both(_call_fn(op), cpu, _tpu(cpu, keep=keep), tol, shape_only, mixdev=True)
    return "skip", f"unknown variant {variant}"


def run_error(case):
    op = _entries().get(case["op"])
    if op is None or op.error_inputs_func is None:
        return "skip", "no error inputs"
    torch.manual_seed(case.get("seed", 0))
    try:
        eis = list(itertools.islice(op.error_inputs("cpu"), MAX_SAMPLES))
    except Exception as e:  # noqa: BLE001
        return "skip", "error_inputs: " + cw._short(e)
    if not eis:
        return "skip", "no error inputs"
    s = _sample_with_layout(eis[case.get("sample", 0) % len(eis)].sample_input, case.get("layout", "contig"))
    try:
        cpu = _as_args(_copy_sample(s))
    except Exception as e:  # noqa: BLE001  e.g. a meta tensor: nothing to copy
        return "skip", cw._short(e)
    status, detail = both(_call_fn(op), cpu, _tpu(cpu), shape_only=xf.shape_only(case["op"], s))
    return _known(case["op"], status), detail


# ---- hand-written calls

def _values(spec, shape, dt, gen):
    kind = spec.get("vals", "normal")
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dt.is_floating_point or dt.is_complex:
        real = torch.float64 if dt.is_complex else dt
        v = torch.randn(shape, generator=gen, dtype=torch.float64) * (0.5 if kind == "small" else 3.0)
        if kind == "special" and v.numel():
            pick = torch.randint(0, 8, shape, generator=gen)
            specials = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, 1e30, -1e-30],
                                    dtype=torch.float64)
            v = torch.where(pick < 4, specials[torch.randint(0, 8, shape, generator=gen)], v)
        v = v.to(real)
        if dt.is_complex:
            v = torch.complex(v, (torch.randn(shape, generator=gen, dtype=torch.float64) * 3).to(real))
        return v.to(dt)
    lo, hi = (0, 20) if dt == torch.uint8 else ((-3, 4) if kind == "small" else (-20, 21))
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dt)


def build(spec):
    """A value spec (see the module's docstring) as a CPU object; returns
    (value, [flattened positions of tensors that stay on the CPU])."""
    stay = []
    count = [0]

    def make(v):
        if isinstance(v, dict):
            if "T" in v or "I" in v or "M" in v:
                shape = tuple(v.get("T", v.get("I", v.get("M"))))
                gen = torch.Generator().manual_seed(int(v.get("seed", 0)))
                if "I" in v:
                    t = torch.randint(int(v["lo"]), int(v["hi"]), shape, generator=gen,
                                      dtype=_dt(v.get("dtype", "int64")))
                elif "M" in v:
                    t = torch.randint(0, 2, shape, generator=gen).bool()
                else:
                    t = _values(v, shape, _dt(v.get("dtype", "float32")), gen)
                t = with_layout(t, v.get("layout", "contig"))
                if v.get("dev") == "cpu":
                    stay.append(count[0])
                count[0] += 1
                return t
            if "D" in v:
                return _dt(v["D"])
            if "L" in v:
                return [make(x) for x in v["L"]]
            if "S" in v:
                return slice(*v["S"])
            if "E" in v:
                return Ellipsis
            return {k: make(x) for k, x in v.items()}
        if isinstance(v, list):
            return [make(x) for x in v]
        return v

    return make(spec), stay


def resolve(path):
    """"torch.add", "Tensor.add_", "F.relu", "operator.getitem", ..."""
    roots = {"torch": torch, "Tensor": torch.Tensor, "F": torch.nn.functional, "operator": operator,
             "linalg": torch.linalg, "special": torch.special}
    head, _, rest = path.partition(".")
    obj = roots[head]
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def _upcast_args(args, to):
    return cw._map(args, lambda t: t.to(to) if isinstance(t, torch.Tensor)
                   and t.dtype in (torch.bfloat16, torch.float16) else t)


def run_call(case):
    fn = resolve(case["fn"])
    (args, kwargs), stay = build([case.get("args", []), case.get("kwargs", {})])
    cpu = [list(args), dict(kwargs)]
    tpu = _tpu(cpu, keep=stay)
    written = range(len(_tensors(cpu))) if case.get("writes") else ()

    def call(a):
        return fn(*a[0], **a[1])

    def wider():
        # XLA computes bf16/half math in f32 and rounds once; the CPU may
        # round steps in between. A tpu answer matching the f32 answer
        # rounded to the result dtype is right.
        if not any(t.dtype in (torch.bfloat16, torch.float16) for t in _tensors(cpu)):
            return None
        up = _upcast_args(cw._to_cpu_copy(cpu), torch.float32)
        lo, hi = call(cw._to_cpu_copy(cpu)), call(up)
        if not (isinstance(hi, torch.Tensor) and isinstance(lo, torch.Tensor)):
            return None
        return hi.to(lo.dtype)

    return both(call, cpu, tpu, written=written, mixdev=bool(stay), wider=wider,
                shape_only=_unspecified(case["fn"], cpu))


def _unspecified(fn, cpu):
    """Calls whose CPU values are not defined: the median of nothing is
    whatever the CPU kernel's buffer held (NaN for floats)."""
    x = cpu[0][0] if cpu[0] else None
    return fn in ("torch.median", "torch.nanmedian") and isinstance(x, torch.Tensor) and x.numel() == 0 \
        and not x.is_floating_point()


def _die(case):
    """The worker's own failure modes, for the tests of its handling."""
    import os
    import signal
    import time
    if case["how"] == "hang":
        time.sleep(3600)
    os.kill(os.getpid(), signal.SIGSEGV if case["how"] == "segv" else signal.SIGABRT)


RUNNERS = {"opinfo": run_opinfo, "error": run_error, "call": run_call, "die": _die}


def run_case(case):
    torchtpu._C._set_cpu_fallback(False)
    return RUNNERS[case["kind"]](case)
