"""The fast part of the op_db conformance sweep (tests/conformance/): common
ops a model uses, every sample input, on tpu against the CPU. The full
sweep is `.venv/bin/python tests/conformance/sweep.py` (docs/ops.md).

A result must pass, or be listed with its reason in
tests/conformance/expected.py; a listed failure that now passes fails
here too, so the table stays true.
"""
import pytest

from conformance import worker

ENTRIES = [
    "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding", "neg", "abs", "exp", "log",
    "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "pow", "maximum", "where", "clamp", "eq", "lt",
    "sum", "mean", "amax", "argmax", "var", "max.reduction_with_dim", "cumsum", "logsumexp",
    "softmax", "log_softmax", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    "nn.functional.layer_norm", "nn.functional.linear", "matmul", "bmm", "addmm",
    "nn.functional.embedding", "nn.functional.cross_entropy", "nn.functional.conv2d",
    "nn.functional.max_pool2d", "nn.functional.scaled_dot_product_attention",
    "cat", "stack", "reshape", "transpose", "permute", "expand", "index_select", "gather",
    "masked_fill", "topk", "tril", "zeros_like", "full", "arange", "to",
]

_BY_NAME = None


def _entry(name):
    global _BY_NAME
    if _BY_NAME is None:
        _BY_NAME = {worker.entry_name(op): op for op in worker.op_db()}
    return _BY_NAME[name]


@pytest.mark.parametrize("name", ENTRIES)
def test_op_db_entry(name):
    bad = [r for r in worker.run_entry(_entry(name), max_samples=5) if r["status"] not in ("pass", "xfail")]
    assert not bad, "\n".join(f"{r['dtype']}/{r['phase']}: {r['status']}: "
                              f"{r.get('reason') or r.get('expected_reason')}" for r in bad)


def test_entries_exist():
    missing = [n for n in ENTRIES if n not in {worker.entry_name(op) for op in worker.op_db()}]
    assert not missing
