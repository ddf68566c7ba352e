"""The in-place forms of every OpInfo entry that has one, on tpu against
the CPU (tests/conformance/inplace_sweep.py, one sample per entry): self
as given, a non-contiguous view, int64 and bool.

Every difference must be listed in KNOWN with its reason; a listed one
that now matches fails too, so the list stays true.
"""
import functools

import pytest

from conformance import inplace_sweep, out_sweep

# Every OpInfo entry with an in-place form, four cases each: a long sweep.
pytestmark = pytest.mark.long

KNOWN = {
    **{("addbmm", c): "self of shape [1]: the CPU resizes self to the result's shape (a "
                      "deprecated resize of an in-place op's self), tpu refuses the broadcast "
                      "(as the meta kernel and CUDA do)" for c in ("float32", "view")},
}

@functools.lru_cache(maxsize=None)
def _entries():
    return list(inplace_sweep.entries())


@pytest.mark.parametrize("part", range(2))
def test_inplace_forms_match_cpu(part):
    out_sweep.check_against_known(_entries()[part::2], inplace_sweep.check_entry, KNOWN, samples=2)


def test_sweep_covers_the_inplace_forms():
    assert len(_entries()) > 140
