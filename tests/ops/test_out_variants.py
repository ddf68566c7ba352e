"""The out= forms of every OpInfo entry that has one, on tpu against the
CPU (tests/conformance/out_sweep.py, one sample per entry): outs empty,
non-contiguous, of a wider float dtype and of an integer dtype.

Allowed: where a CPU kernel refuses an out of another dtype that the
result can be cast to, tpu casts into it (PyTorch's reference out=
wrapper, which its meta kernels follow). Every other difference must be
listed in KNOWN with its reason; a listed one that now matches fails too,
so the list stays true.
"""
import functools

import pytest

from conformance import out_sweep

# Every OpInfo entry with an out= form, four cases each: a long sweep.
pytestmark = pytest.mark.long

# (entry, case) -> why tpu differs from the CPU there
KNOWN = {
    ("bernoulli", "int64"): "bernoulli's reference meta refuses an integer out; the CPU fills it with 0/1",
}

@functools.lru_cache(maxsize=None)
def _entries():
    return list(out_sweep.entries())


def _allowed(case, problem):
    # the CPU is stricter about the out's dtype than PyTorch's reference
    return case in ("float64", "int64") and problem.startswith("error: the CPU raises") \
        and problem.endswith("tpu does not")


@pytest.mark.parametrize("part", range(4))
def test_out_forms_match_cpu(part):
    out_sweep.check_against_known(_entries()[part::4], out_sweep.check_entry, KNOWN, samples=1,
                                  allowed=_allowed)


def test_sweep_covers_the_out_forms():
    assert len(_entries()) > 300
