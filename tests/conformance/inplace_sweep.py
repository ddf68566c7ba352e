"""In-place forms of PyTorch's OpInfo entries on tpu, against the CPU.

For every op_db entry with an in-place variant (`x.add_(...)`), its first
float32 samples run on the CPU and on tpu and must end the same way:

  float32   self as the sample gives it
  view      self a non-contiguous view of a larger tensor (written
            through: the base tensor is compared, so a write outside the
            view shows)
  int64     self converted to int64, the other arguments as they are (a
            float result cannot be cast into it: the CPU refuses)
  bool      self converted to bool

"The same way" is an exception of the same type, or the same values of
self (and the call returns self), with the forward comparison of
worker.py. tpu raising NotImplementedError where the CPU works is
reported as unsupported (loud, never wrong).

    .venv/bin/python tests/conformance/inplace_sweep.py [--ops add,mul] [--samples N]

prints one line per entry and case that does not match, then a summary.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conformance import expected as xf  # noqa: E402
from conformance import out_sweep  # noqa: E402
from conformance import worker  # noqa: E402

CASES = ["float32", "view", "int64", "bool"]


def _self_for(case, x, device):
    """The tensor the in-place op writes: (self, what to compare after)."""
    x = x.detach().to(device)
    if case == "int64":
        x = x.to(torch.int64)
    elif case == "bool":
        x = x.to(torch.bool)
    if case == "view" and x.dim() > 0:
        base = torch.zeros(tuple(x.shape) + (2,), dtype=x.dtype, device=device)
        view = base[..., 1]
        view.copy_(x)
        return view, base
    x = x.clone()
    return x, x


def _run(op, s, case, device):
    """(status, value): the compared tensor after the call, or the exception."""
    sample = s if device == "cpu" else worker._tpu_sample(s, worker.entry_name(op))
    target, after = _self_for(case, sample.input, device)
    try:
        ret = op.inplace_variant(target, *sample.args, **sample.kwargs)
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        return "raise", e
    if not isinstance(ret, torch.Tensor) or ret.data_ptr() != target.data_ptr():
        return "ok-not-self", [after]
    return "ok", [after]


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
    known = xf.lookup(name, "float32", "fwd") is not None
    for s in inputs:
        if not isinstance(s.input, torch.Tensor):
            continue
        for case in CASES:
            c_status, c_val = _run(op, s, case, "cpu")
            t_status, t_val = _run(op, s, case, "tpu")
            if "raise" in (c_status, t_status) or t_status != c_status:
                problem = out_sweep.outcome_problem(c_status, c_val, t_status, t_val)
                if problem:
                    problems.append((case, problem))
                continue
            if known:
                continue
            only = shape_only or (name in xf.SHAPE_ONLY_SAMPLES and xf.SHAPE_ONLY_SAMPLES[name](s))
            try:
                got, want = worker._fix_gauge(name, t_val, c_val)
                try:
                    worker.compare(got, want, tol, only)
                except worker.Mismatch:
                    if case not in ("float32", "view"):
                        raise
                    # where the CPU's float32 kernel is the one off (polygamma
                    # of negative x), its float64 answer decides
                    hi = worker._wider_reference(op, s, [c_val[0][..., 1] if case == "view" else c_val[0]],
                                                 "float32")
                    ref = hi[0].to(got[0].dtype)
                    if case == "view":
                        ref = torch.stack([torch.zeros_like(ref), ref], -1)
                    worker.compare(got, [ref], tol, only)
            except worker.Mismatch as e:
                problems.append((case, f"mismatch: {e}"))
    return problems


def entries(names=None):
    for op in worker.op_db():
        if op.inplace_variant is None:
            continue
        if names and worker.entry_name(op) not in names:
            continue
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        yield op


def main():
    out_sweep.sweep_main(__doc__, entries, check_entry)


if __name__ == "__main__":
    main()
