"""Runs OpInfo entries of PyTorch's op_db on tpu and on the CPU and compares.

Used two ways:
  * in-process by tests/conformance/test_conformance.py (run_entry on a few ops), and
  * as a worker subprocess of the sweep (``python -m conformance.worker``):
    it reads op_db indices, one per line, on stdin and answers with JSON
    lines on its protocol pipe (the stdout it was started with; the
    process's own stdout is pointed at stderr so stray prints cannot
    corrupt the protocol).

For one entry it runs, for each dtype of DTYPES the entry supports on the
CPU, the forward of every sample input (up to MAX_SAMPLES), and for float32
and differentiable entries the backward: gradients of a weighted sum of the
(float) outputs with respect to every input that requires grad. Each
(entry, dtype, phase) gets one status:

  pass         every sample matches the CPU (values, dtype, shape)
  mismatch     some sample gives a different answer (the silent-wrong case)
  error        some sample raises where the CPU does not (or another type)
  unsupported  our backend raised NotImplementedError (an op without a
               lowering): loud, never wrong
  xfail/xpass  the entry is in expected.EXPECTED_FAILURES: how it really
               ended is kept in `actual`

The worst sample decides (mismatch > error > unsupported > pass).
"""
import json
import math
import os
import sys
import time
import traceback

DTYPE_NAMES = ["float32", "bfloat16", "int64", "bool"]
MAX_SAMPLES = 12
SEVERITY = {"pass": 0, "unsupported": 1, "error": 2, "mismatch": 3}

# Defaults when the OpInfo states no looser tolerance for the dtype. float32
# allows a few ulps more than assert_close's default (XLA's transcendental
# approximations differ from the CPU's libm by a few ulps); bfloat16 allows
# about two ulps (XLA computes bf16 elementwise math in f32 and rounds once,
# the CPU sometimes rounds intermediate results).
FWD_TOL = {"float32": (1e-5, 1e-5), "bfloat16": (1e-2, 1.6e-2), "float64": (1e-7, 1e-7),
           "float16": (1e-3, 1e-3), "complex64": (1e-5, 1e-5), "complex128": (1e-7, 1e-7)}
# Gradients go through more ops (and reductions in another order).
BWD_TOL = {"float32": (1e-4, 1e-4)}

_op_db = None


def op_db():
    global _op_db
    if _op_db is None:
        from torch.testing._internal.common_methods_invocations import op_db as db
        _op_db = db
    return _op_db


def entry_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _dtype(name):
    import torch
    return getattr(torch, name)


def _opinfo_tol(op, dtype):
    """Largest (atol, rtol) the OpInfo's own toleranceOverride decorators
    grant this dtype in any of PyTorch's tests, or None."""
    from torch.testing._internal.common_device_type import toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo
    best = None
    for d in op.decorators:
        decs = d.decorators if isinstance(d, DecorateInfo) else [d]
        for dec in decs:
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                t = dec.d[dtype]
                best = (max(best[0], t.atol), max(best[1], t.rtol)) if best else (t.atol, t.rtol)
    return best


def tolerance(op, dtype_name, phase):
    base = (BWD_TOL if phase == "bwd" else FWD_TOL).get(dtype_name)
    if base is None:
        return (0.0, 0.0)
    from . import expected as xf
    own = _opinfo_tol(op, _dtype(dtype_name))
    t = xf.TOLERANCE.get((entry_name(op), dtype_name, phase), xf.TOLERANCE.get((entry_name(op), dtype_name)))
    if t:
        own = (max(own[0], t[0]), max(own[1], t[1])) if own else t
    if own:
        base = (max(base[0], own[0]), max(base[1], own[1]))
    return base


def _flatten(x, out):
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flatten(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _flatten(v, out)
    else:
        out.append(x)
    return out


class Mismatch(Exception):
    pass


def compare(actual, expected, tol, shape_only=False, ties=None):
    """Raises Mismatch naming the first difference between the tpu result
    `actual` and the CPU result `expected` (nested tensors/sequences).
    ties(a, e) may accept index tensors that differ only among equal values."""
    import torch
    act, exp = _flatten(actual, []), _flatten(expected, [])
    if len(act) != len(exp):
        raise Mismatch(f"{len(act)} outputs, CPU gives {len(exp)}")
    for i, (a, e) in enumerate(zip(act, exp)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise Mismatch(f"output {i}: {type(a).__name__}, CPU gives a tensor")
            if a.device.type != "tpu":
                raise Mismatch(f"output {i} is on {a.device}, not tpu")
            if a.dtype != e.dtype:
                raise Mismatch(f"output {i}: dtype {a.dtype}, CPU gives {e.dtype}")
            if a.shape != e.shape:
                raise Mismatch(f"output {i}: shape {tuple(a.shape)}, CPU gives {tuple(e.shape)}")
            if shape_only or e.layout != torch.strided:
                continue
            a_cpu = a.detach().cpu()
            e = e.detach()
            if e.is_complex() or e.dtype.is_floating_point:
                # An integer sample with a float result (sin of int64) is
                # held to the result dtype's default tolerance.
                atol, rtol = tol if tol != (0.0, 0.0) else FWD_TOL.get(str(e.dtype)[6:], (0.0, 0.0))
                ok = torch.isclose(a_cpu, e, rtol=rtol, atol=atol, equal_nan=True)
                if not bool(ok.all()):
                    bad = (~ok).nonzero()[0].tolist()
                    where = tuple(bad)
                    raise Mismatch(f"output {i}{list(where)}: {a_cpu[where].item()} vs CPU {e[where].item()} "
                                   f"({int((~ok).sum())}/{e.numel()} elements off, atol={atol:g} rtol={rtol:g})")
            elif not torch.equal(a_cpu, e) and not (ties and ties(a_cpu, e)):
                bad = (a_cpu != e).nonzero()[0].tolist()
                where = tuple(bad)
                raise Mismatch(f"output {i}{list(where)}: {a_cpu[where].item()} vs CPU {e[where].item()}")
        elif isinstance(e, float) and isinstance(a, float):
            if not (a == e or (math.isnan(a) and math.isnan(e)) or abs(a - e) <= tol[0] + tol[1] * abs(e)):
                raise Mismatch(f"output {i}: {a} vs CPU {e}")
        elif not shape_only and a != e:
            raise Mismatch(f"output {i}: {a!r} vs CPU {e!r}")


def _map(x, f):
    """f applied to every leaf of nested lists/tuples/dicts."""
    if isinstance(x, (list, tuple)):
        return type(x)(_map(v, f) for v in x)
    if isinstance(x, dict):
        return {k: _map(v, f) for k, v in x.items()}
    return f(x)


def _leaf_to_tpu(x):
    import torch
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided or x.is_contiguous() and x.storage_offset() == 0 \
                and x.untyped_storage().nbytes() == x.numel() * x.element_size():
            d = x.detach().to("tpu")
        else:
            # Same storage layout on tpu (sizes, strides, offset into the
            # whole storage): as_strided samples address the storage, and
            # non-contiguous samples exercise our strided views.
            n = x.untyped_storage().nbytes() // x.element_size()
            flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,))
            d = flat.to("tpu").as_strided(x.shape, x.stride(), x.storage_offset()).detach()
        if x.requires_grad:
            d.requires_grad_(True)
        return d
    if isinstance(x, torch.device) and x.type == "cpu":
        return torch.device("tpu")
    if isinstance(x, str) and x == "cpu":
        return "tpu"
    return x


def _to_tpu(x):
    """The sample's arguments for the tpu run: tensors copied to tpu
    (leaves keep requires_grad), CPU devices (factory functions' device=,
    Tensor.to's device argument) replaced by tpu."""
    return _map(x, _leaf_to_tpu)


# Entries whose index outputs may pick any of several equal values: an
# index is right when it points at the same value the CPU's index does.
# name -> (position of dim in args, its default, whether the reduced dim is
# kept in the indices' shape by default)
TIE_INDEX = {
    "topk": (1, -1, True), "sort": (0, -1, True), "argsort": (0, -1, True), "msort": (None, 0, True),
    "kthvalue": (1, -1, False), "median": (0, None, False), "nanmedian": (0, None, False),
    "mode": (0, -1, False), "max.reduction_with_dim": (0, None, False),
    "min.reduction_with_dim": (0, None, False), "argmax": (0, None, False), "argmin": (0, None, False),
}


def ties_ok(name, s, a, e):
    """True when the tpu index tensor `a` and the CPU one `e` select equal
    values of the sample's input (e.g. topk of [1, 2, 2] may return either 2)."""
    import torch
    spec = TIE_INDEX.get(name)
    x = s.input
    if spec is None or not isinstance(x, torch.Tensor) or e.dtype != torch.int64:
        return False
    pos, dflt, kept = spec
    dim = s.kwargs.get("dim", s.args[pos] if pos is not None and len(s.args) > pos else dflt)
    if not isinstance(dim, int):
        return False
    keepdim = kept or bool(s.kwargs.get("keepdim", s.args[pos + 1] if pos is not None and len(s.args) > pos + 1
                                        and isinstance(s.args[pos + 1], bool) else False))
    x = x.detach()
    if x.dim() == 0:
        return bool((a == e).all())
    a, e = a.cpu(), e
    if not keepdim:
        a, e = a.unsqueeze(dim), e.unsqueeze(dim)
    try:
        va, ve = x.gather(dim, a), x.gather(dim, e)
    except RuntimeError:
        return False
    return bool(((va == ve) | (va.isnan() & ve.isnan())).all()) if x.is_floating_point() else torch.equal(va, ve)


def _to_cpu_copy(x):
    import torch
    return _map(x, lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t)


def _tpu_sample(s, name=None):
    from torch.testing._internal.opinfo.core import SampleInput
    from . import expected as xf
    keep = xf.KEEP_ON_CPU.get(name, ())
    args = tuple(a if k in keep else _to_tpu(a) for k, a in enumerate(s.args))
    return SampleInput(_to_tpu(s.input), args=args, kwargs=_to_tpu(dict(s.kwargs)),
                       output_process_fn_grad=s.output_process_fn_grad,
                       broadcasts_input=s.broadcasts_input, name=s.name)


def _short(exc):
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    return f"{type(exc).__name__}: {first[:300]}"


def _is_unsupported(exc):
    """Our backend (or the dispatcher, for layouts and dtypes it has no
    tpu kernel for) says it cannot: loud, never a wrong answer."""
    return isinstance(exc, NotImplementedError) and "tpu" in str(exc)


def _call(op, s):
    return op(s.input, *s.args, **s.kwargs)


def _grad_leaves(s):
    import torch
    return [t for t in _flatten([s.input, list(s.args), s.kwargs], [])
            if isinstance(t, torch.Tensor) and t.requires_grad]


def _weighted_sum(outs, weights):
    import torch
    total = None
    for o, w in zip(outs, weights):
        if o.is_complex():
            o = torch.view_as_real(o.resolve_conj())
        term = (o * w.to(o.device)).sum()
        total = term if total is None else total + term
    return total


# The wider dtype a sample is recomputed in when the tpu result differs
# from the CPU's: bf16 math in f32 (what XLA does: it computes bf16
# elementwise math in f32 and rounds once, closer to the exact answer than
# CPU kernels that round intermediate results), f32 math in f64 (the CPU's
# f32 kernels are not exact either, e.g. polygamma near its poles). A tpu
# result that matches the wider answer rounded back passes.
WIDER = {"bfloat16": "float32", "float32": "float64"}


def _upcast(x, frm, to):
    import torch
    return _map(x, lambda t: t.detach().to(to)
                if isinstance(t, torch.Tensor) and t.dtype == frm else t)


def _wider_reference(op, s, like, dtype_name):
    import torch
    from torch.testing._internal.opinfo.core import SampleInput
    frm, to = _dtype(dtype_name), _dtype(WIDER[dtype_name])
    up = SampleInput(_upcast(s.input, frm, to), args=_upcast(tuple(s.args), frm, to),
                     kwargs=_upcast(dict(s.kwargs), frm, to))
    hi = _flatten(_call(op, up), [])
    ref = _flatten(like, [])
    return [h.to(r.dtype) if isinstance(h, torch.Tensor) and isinstance(r, torch.Tensor) else h
            for h, r in zip(hi, ref)]


def _fix_gauge(name, actual, expected):
    """Eigen- and singular vectors are unique only up to sign (phase, for
    linalg.eig's complex ones): each vector
    pair is flipped, on both sides, so that its component where the CPU's
    vector is largest is positive. Columns beyond min(m, n) of a full SVD
    (any orthonormal completion) are compared by what defines them: they
    are orthonormal and orthogonal to the rest."""
    import torch
    if name == "linalg.eig" and isinstance(expected, (tuple, list)):
        # complex vectors, unique up to a phase: each turned so that its
        # component where the CPU's vector is largest is real and positive
        (wa, va), (we, ve) = actual, expected
        va, ve = va.detach().cpu(), ve.detach()
        if ve.numel() == 0 or va.shape != ve.shape:
            return actual, expected
        idx = ve.abs().argmax(dim=-2, keepdim=True)
        fixed = []
        for v in (va, ve):
            top = torch.gather(v, -2, idx)
            ph = torch.where(top.abs() == 0, torch.ones_like(top), top.conj() / top.abs())
            fixed.append(v * ph)
        return (wa, fixed[0].to("tpu")), (we, fixed[1])
    if name not in ("linalg.eigh", "linalg.svd") or not isinstance(expected, (tuple, list)):
        return actual, expected
    if name == "linalg.eigh":
        (wa, va), (we, ve) = actual, expected
        ua = va.detach().cpu()
        ue, ha, he = ve.detach(), None, None
    else:
        if len(expected) != 3:
            return actual, expected
        (ua, sa, ha), (ue, se, he) = actual, expected
        ua, ha, ue, he = ua.detach().cpu(), ha.detach().cpu(), ue.detach(), he.detach()
    if ue.numel() == 0 or ua.shape != ue.shape:
        return actual, expected
    k = min(ue.shape[-2], ue.shape[-1]) if he is None else min(ue.shape[-2], he.shape[-1])
    idx = ue[..., :k].abs().argmax(dim=-2, keepdim=True)                # [..., 1, k]
    sgn_e = torch.sign(torch.gather(ue[..., :k], -2, idx))
    sgn_a = torch.sign(torch.gather(ua[..., :k], -2, idx.to(ua.device)))
    sgn_e, sgn_a = sgn_e.masked_fill(sgn_e == 0, 1), sgn_a.masked_fill(sgn_a == 0, 1)
    ue, ua = ue.clone(), ua.clone()
    ue[..., :k] *= sgn_e
    ua[..., :k] *= sgn_a
    if he is not None:
        he, ha = he.clone(), ha.clone()
        he[..., :k, :] *= sgn_e.transpose(-2, -1)
        ha[..., :k, :] *= sgn_a.transpose(-2, -1)
        for full_a, full_e in ((ua, ue), (ha.transpose(-2, -1), he.transpose(-2, -1))):
            if full_e.shape[-1] > k:  # the completion: check, then compare as the CPU's
                eye = torch.eye(full_a.shape[-1], dtype=full_a.dtype)
                gram = full_a.transpose(-2, -1) @ full_a
                if torch.allclose(gram, eye.expand_as(gram), atol=1e-4):
                    full_a[..., k:] = full_e[..., k:]
        return (ua.to("tpu"), actual[1], ha.to("tpu")), (ue, expected[1], he)
    return (actual[0], ua.to("tpu")), (expected[0], ue)


def run_sample_fwd(op, s, tol, shape_only, dtype_name=None):
    import torch
    from torch.testing._internal.opinfo.core import SampleInput
    # Copies first: the CPU call may write into its inputs.
    t = _tpu_sample(s, entry_name(op))
    orig = _to_cpu_copy(s.input)
    name = entry_name(op)
    ties = (lambda a, e: ties_ok(name, SampleInput(orig, args=s.args, kwargs=s.kwargs), a, e)) \
        if name in TIE_INDEX else None
    ref = SampleInput(_to_cpu_copy(s.input), args=_to_cpu_copy(tuple(s.args)),
                      kwargs=_to_cpu_copy(dict(s.kwargs))) if dtype_name in WIDER else None
    try:
        expected = _call(op, s)
    except Exception as e:  # noqa: BLE001  the CPU rejects this sample too
        expected, cpu_exc = None, e
    else:
        cpu_exc = None
    try:
        actual = _call(op, t)
        if cpu_exc is None:
            actual, expected = _fix_gauge(name, actual, expected)
            try:
                compare(actual, expected, tol, shape_only, ties=ties)
            except Mismatch:
                if ref is None:
                    raise
                try:
                    hi = _wider_reference(op, ref, expected, dtype_name)
                except Exception:  # noqa: BLE001  no f32 reference: keep the mismatch
                    hi = None
                if hi is None:
                    raise
                compare(actual, hi, tol, shape_only, ties=ties)
        torch.tpu.synchronize()
    except Mismatch as m:
        return "mismatch", str(m)
    except Exception as e:  # noqa: BLE001
        if cpu_exc is not None and type(e) is type(cpu_exc):
            return "pass", None
        if _is_unsupported(e):
            return "unsupported", _short(e)
        return "error", _short(e)
    if cpu_exc is not None:
        return "mismatch", f"CPU raises {_short(cpu_exc)}, tpu does not"
    return "pass", None


def run_sample_bwd(op, s, tol, shape_only):
    """Backward of sum(w_k * out_k) over the float outputs (after the
    sample's output_process_fn_grad), weights w_k fixed random."""
    import torch
    t = _tpu_sample(s, entry_name(op))
    try:
        out = s.output_process_fn_grad(_call(op, s))
    except Exception:  # noqa: BLE001  the CPU rejects it: nothing to compare
        return None
    outs = [o for o in _flatten(out, []) if isinstance(o, torch.Tensor) and o.requires_grad
            and (o.dtype.is_floating_point or o.is_complex())]
    leaves = _grad_leaves(s)
    if not outs or not leaves:
        return None
    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(torch.view_as_real(o.resolve_conj()).shape if o.is_complex() else o.shape, generator=g)
               .to(o.real.dtype if o.is_complex() else o.dtype) for o in outs]
    try:
        expected = torch.autograd.grad(_weighted_sum(outs, weights), leaves, allow_unused=True)
    except Exception:  # noqa: BLE001
        return None
    try:
        out_t = t.output_process_fn_grad(_call(op, t))
        outs_t = [o for o in _flatten(out_t, []) if isinstance(o, torch.Tensor) and o.requires_grad
                  and (o.dtype.is_floating_point or o.is_complex())]
        if len(outs_t) != len(outs):
            return "mismatch", f"{len(outs_t)} differentiable outputs, CPU has {len(outs)}"
        actual = torch.autograd.grad(_weighted_sum(outs_t, weights), _grad_leaves(t), allow_unused=True)
        exp = [e for e in expected if e is not None]
        act = [a for a, e in zip(actual, expected) if e is not None]
        if any(a is None for a in act):
            return "mismatch", "a gradient the CPU computes is missing"
        compare(act, exp, tol, shape_only)
        torch.tpu.synchronize()
    except Mismatch as m:
        return "mismatch", "grad " + str(m)
    except Exception as e:  # noqa: BLE001
        if _is_unsupported(e):
            return "unsupported", _short(e)
        return "error", _short(e)
    return "pass", None


def run_entry(op, emit=None, max_samples=MAX_SAMPLES, dtypes=None):
    """All (dtype, phase) results of one OpInfo as dicts; emit(result) is
    called after each so a parent process keeps what finished before a
    crash. The CPU fallback is off meanwhile: it must never make a pass."""
    import torchtpu
    was = torchtpu._C._cpu_fallback_enabled()
    torchtpu._C._set_cpu_fallback(False)
    try:
        return _run_entry(op, emit, max_samples, dtypes)
    finally:
        torchtpu._C._set_cpu_fallback(was)


def _run_entry(op, emit, max_samples, dtypes):
    import torch
    from . import expected as xf
    name = entry_name(op)
    supported = op.supported_dtypes("cpu")
    results = []
    for dn in dtypes or DTYPE_NAMES:
        dt = _dtype(dn)
        if dt not in supported:
            continue
        phases = ["fwd"]
        if dn == "float32" and op.supports_autograd and dt in op.supported_backward_dtypes("cpu"):
            phases.append("bwd")
        for phase in phases:
            t0 = time.perf_counter()
            tol = tolerance(op, dn, phase)
            status, reason, n, npass = "pass", None, 0, 0
            torch.manual_seed(0)
            try:
                samples = op.sample_inputs("cpu", dt, requires_grad=(phase == "bwd"))
                for s in samples:
                    if n >= max_samples:
                        break
                    shape_only = xf.shape_only(name, s)
                    if phase == "fwd":
                        r = run_sample_fwd(op, s, tol, shape_only, dtype_name=dn)
                    else:
                        r = run_sample_bwd(op, s, tol, shape_only)
                    if r is None:
                        continue
                    n += 1
                    st, why = r
                    npass += st == "pass"
                    if SEVERITY[st] > SEVERITY[status]:
                        status, reason = st, why
            except Exception as e:  # noqa: BLE001  sample generation itself failed
                status, reason = "error", "sample inputs: " + _short(e)
            if n == 0 and status == "pass":
                status, reason = "nosamples", "no sample inputs"
            res = dict(op=name, dtype=dn, phase=phase, status=status, reason=reason,
                       samples=n, passed=npass, seconds=round(time.perf_counter() - t0, 3))
            key = xf.lookup(name, dn, phase)
            if key is not None:
                res["actual"] = status
                res["expected_reason"] = key
                res["status"] = "xpass" if status == "pass" else "xfail"
            results.append(res)
            if emit:
                emit(res)
    return results


def main():
    # The protocol goes to the pipe we were given as stdout; everything
    # else printed by anyone goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.pop("TORCHTPU_CPU_FALLBACK", None)
    import torch  # noqa: F401
    import torchtpu
    torchtpu._C  # noqa: B018  the runtime must come up before we start timing
    torch.ones(1, device="tpu").cpu()
    db = op_db()

    def send(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    send({"event": "ready"})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        idx = int(line)
        op = db[idx]
        t0 = time.perf_counter()
        send({"event": "start", "index": idx, "op": entry_name(op)})
        try:
            run_entry(op, emit=lambda r: send({"event": "result", "index": idx, **r}))
        except Exception:  # noqa: BLE001  a bug of the runner: record it, go on
            send({"event": "runner_error", "index": idx, "trace": traceback.format_exc()[-2000:]})
        send({"event": "done", "index": idx, "seconds": round(time.perf_counter() - t0, 3),
              "fallbacks": sum(torchtpu.debug.metrics()["cpu_fallbacks"].values())})


if __name__ == "__main__":
    main()
