"""The out= forms of every OpInfo entry that has one, on tpu against the
CPU (tests/conformance/out_sweep.py, one sample per entry): outs empty,
non-contiguous, of a wider float dtype and of an integer dtype.

Allowed: where a CPU kernel refuses an out of another dtype that the
result can be cast to, tpu casts into it (PyTorch's reference out=
wrapper, which its meta kernels follow). Every other difference must be
listed in KNOWN with its reason; a listed one that now matches fails too,
so the list stays true.
"""
import pytest

from conformance import out_sweep, worker

# Every OpInfo entry with an out= form, four cases each: a long sweep.
pytestmark = pytest.mark.long

# (entry, case) -> why tpu differs from the CPU there
_NO_EIG = "general (non-symmetric) eigendecomposition has no tpu lowering"
_NO_LDL = "LDL factorization has no tpu lowering"
KNOWN = {
    ("bernoulli", "int64"): "bernoulli's reference meta refuses an integer out; the CPU fills it with 0/1",
    **{("linalg.eig", c): _NO_EIG for c in out_sweep.CASES},
    **{("linalg.eigvals", c): _NO_EIG for c in out_sweep.CASES},
    **{(e, c): _NO_LDL for e in ("linalg.ldl_factor", "linalg.ldl_factor_ex", "linalg.ldl_solve")
       for c in ("empty", "strided")},
}

_ENTRIES = None


def _entries():
    global _ENTRIES
    if _ENTRIES is None:
        _ENTRIES = list(out_sweep.entries())
    return _ENTRIES


def _allowed(case, problem):
    # the CPU is stricter about the out's dtype than PyTorch's reference
    return case in ("float64", "int64") and problem.startswith("error: the CPU raises") \
        and problem.endswith("tpu does not")


@pytest.mark.parametrize("part", range(4))
def test_out_forms_match_cpu(part):
    found = {}
    for op in _entries()[part::4]:
        for case, problem in out_sweep.check_entry(op, samples=1):
            if not _allowed(case, problem):
                found[(worker.entry_name(op), case)] = problem
    new = {k: v for k, v in found.items() if k not in KNOWN}
    fixed = [k for k in KNOWN if k not in found and k[0] in {worker.entry_name(o) for o in _entries()[part::4]}]
    assert not new, "\n".join(f"{e} [{c}]: {p}" for (e, c), p in sorted(new.items()))
    assert not fixed, f"listed in KNOWN but matching now: {fixed}"


def test_sweep_covers_the_out_forms():
    assert len(_entries()) > 300
