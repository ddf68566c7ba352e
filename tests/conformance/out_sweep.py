"""out= forms of PyTorch's OpInfo entries on tpu, against the CPU.

For every op_db entry that supports `out=` (float32, its first samples)
the same calls run on the CPU and on tpu and must end the same way, as
PyTorch's own test_ops.py test_out does:

  empty       `out=` empty tensors of the result dtypes (resized)
  strided     `out=` non-contiguous views of the result shapes (written
              through, the same tensors returned)
  float64     `out=` of a wider float dtype (pointwise ops cast into it;
              others refuse)
  int64       `out=` of an integer dtype (a float result cannot be cast)

"The same way" is an exception of the same type, or the same values (as
the forward comparison of worker.py: random entries by shape and dtype,
entries whose forward is an expected failure not by value). The values
of `empty` and `strided` are compared with the functional op's CPU
result: the CPU's own out= kernels of gelu, avg_pool3d and narrow_copy
write wrong values into non-contiguous outs (PyTorch 2.13). tpu raising
NotImplementedError where the CPU works is reported as unsupported (loud,
never wrong).

    .venv/bin/python tests/conformance/out_sweep.py [--ops add,sum] [--samples N]

prints one line per entry and case that does not match, then a summary.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conformance import expected as xf  # noqa: E402
from conformance import worker  # noqa: E402

CASES = ["empty", "strided", "float64", "int64"]


def _results(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)) and x and all(isinstance(t, torch.Tensor) for t in x):
        return list(x)
    return None


def _make_out(case, like, device):
    out = []
    for r in like:
        dtype = r.dtype
        if case == "float64" and r.dtype == torch.float32:
            dtype = torch.float64
        if case == "int64" and r.dtype.is_floating_point:
            dtype = torch.int64
        if case == "strided" and r.dim() > 0:
            base = torch.zeros(tuple(r.shape) + (2,), dtype=dtype, device=device)
            out.append(base[..., 1])
        else:
            out.append(torch.empty(0, dtype=dtype, device=device))
    return out


def _run(op, s, case, like, device):
    """(status, value): the out tensors after the call, or the exception."""
    sample = s if device == "cpu" else worker._tpu_sample(s, worker.entry_name(op))
    outs = _make_out(case, like, device)
    arg = outs[0] if len(outs) == 1 else tuple(outs)
    try:
        ret = op(sample.input, *sample.args, out=arg, **sample.kwargs)
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        return "raise", e
    rets = _results(ret)
    if rets is None or len(rets) != len(outs) or any(a is not b for a, b in zip(rets, outs)):
        if not (rets and len(rets) == len(outs) and all(a.data_ptr() == b.data_ptr() for a, b in zip(rets, outs))):
            return "ok-not-out", outs
    return "ok", outs


def check_entry(op, samples=2):
    """[(case, problem)] for one entry; [] when every case matches."""
    problems = []
    try:
        inputs = list(op.sample_inputs("cpu", torch.float32))[:samples]
    except Exception as e:  # noqa: BLE001
        return [("samples", f"sample_inputs failed: {worker._short(e)}")]
    tol = worker.tolerance(op, "float32", "fwd")
    name = worker.entry_name(op)
    shape_only = name in xf.SHAPE_ONLY
    known = xf.lookup(name, "float32", "fwd") is not None  # its forward differs by design: no values
    for s in inputs:
        try:
            like = _results(op(s.input, *s.args, **s.kwargs))
        except Exception:  # noqa: BLE001 - a sample the CPU refuses: not an out= question
            continue
        if like is None:
            continue
        for case in CASES:
            c_status, c_val = _run(op, s, case, like, "cpu")
            t_status, t_val = _run(op, s, case, like, "tpu")
            if "raise" in (c_status, t_status) or t_status != c_status:
                problem = outcome_problem(c_status, c_val, t_status, t_val)
                if problem:
                    problems.append((case, problem))
                continue
            if known:
                continue
            want = like if case in ("empty", "strided") else c_val
            only = shape_only or (name in xf.SHAPE_ONLY_SAMPLES and xf.SHAPE_ONLY_SAMPLES[name](s))
            try:
                got, want = worker._fix_gauge(name, t_val, want)
                try:
                    worker.compare(got, want, tol, only)
                except worker.Mismatch:
                    # where the CPU's float32 kernel is the one off (polygamma
                    # of negative x), its float64 answer decides
                    hi = worker._wider_reference(op, s, want, "float32")
                    worker.compare(got, [h.to(g.dtype) for h, g in zip(hi, got)], tol, only)
            except worker.Mismatch as e:
                problems.append((case, f"mismatch: {e}"))
    return problems


def entries(names=None):
    for op in worker.op_db():
        if not op.supports_out:
            continue
        if names and worker.entry_name(op) not in names:
            continue
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        yield op


def outcome_problem(c_status, c_val, t_status, t_val):
    """What differs between the CPU's and tpu's outcomes when either raised
    or they returned differently ("ok", "ok-not-out"), or None."""
    if c_status == "raise":
        if t_status != "raise":
            return f"error: the CPU raises {worker._short(c_val)}; tpu does not"
        if not isinstance(t_val, type(c_val)) and not isinstance(c_val, type(t_val)):
            return f"error: the CPU raises {worker._short(c_val)}; tpu {worker._short(t_val)}"
        return None
    if t_status == "raise":
        kind = "unsupported" if worker._is_unsupported(t_val) else "error"
        return f"{kind}: {worker._short(t_val)}"
    if t_status != c_status:
        return f"error: returns {t_status} where the CPU returns {c_status}"
    return None


def check_against_known(ops, check_entry, known, samples, allowed=None):
    """Runs check_entry(op, samples) over ops and fails (assert) on any
    (entry, case) difference not in known, or listed in known for one of
    ops but matching now. allowed(case, problem): differences accepted
    without a listing."""
    found = {}
    for op in ops:
        for case, problem in check_entry(op, samples=samples):
            if allowed is None or not allowed(case, problem):
                found[(worker.entry_name(op), case)] = problem
    new = {k: v for k, v in found.items() if k not in known}
    names = {worker.entry_name(o) for o in ops}
    fixed = [k for k in known if k not in found and k[0] in names]
    assert not new, "\n".join(f"{e} [{c}]: {p}" for (e, c), p in sorted(new.items()))
    assert not fixed, f"listed as known but matching now: {fixed}"


def sweep_main(doc, entries, check_entry):
    """The command line of a sweep over entries(names) with check_entry(op,
    samples): one line per entry and case that does not match, a summary."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--ops", help="comma-separated entry names")
    ap.add_argument("--samples", type=int, default=2)
    args = ap.parse_args()
    import torchtpu  # noqa: F401
    names = set(args.ops.split(",")) if args.ops else None
    counts = {}
    for op in entries(names):
        probs = check_entry(op, args.samples)
        kinds = {p.split(":")[0] for _, p in probs}
        key = "pass" if not probs else ("mismatch" if "mismatch" in kinds else
                                        "unsupported" if kinds == {"unsupported"} else "other")
        counts[key] = counts.get(key, 0) + 1
        for case, p in probs:
            print(f"{worker.entry_name(op)} [{case}] {p}", flush=True)
    print("summary:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def main():
    sweep_main(__doc__, entries, check_entry)


if __name__ == "__main__":
    main()
