"""pytest plugin loaded into each suite worker (`-p pytorch_suite.plugin`).

It imports torchtpu before PyTorch's test modules are collected (so
`instantiate_device_type_tests` sees the PrivateUse1 backend), skips the
tests an earlier attempt of the same file already recorded, gives each test a
time limit, and appends one JSON line per finished test to the results file
the runner names, flushed at once: when a test takes the worker down, the
runner knows which test was running from the `start` line without an end.
"""
import json
import os
import signal
import time
import traceback

import pytest

import torchtpu  # noqa: F401  (registers the tpu device before collection)
from pytorch_suite.causes import normal_id


def _compat():
    """Names the source tree's test files import that the installed torch's
    testing package no longer defines, rebuilt from what it does define (so
    a file written for an older torch still collects)."""
    from torch.testing._internal import common_methods_invocations as cmi
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo
    if not hasattr(cmi, "binary_ufuncs_and_refs"):
        cmi.binary_ufuncs_and_refs = tuple(
            op for op in cmi.op_db + cmi.python_ref_db if isinstance(op, BinaryUfuncInfo))
    from torch.testing._internal import common_cuda
    if not hasattr(common_cuda, "tf32_is_not_fp32"):
        # "this CUDA device computes float32 matmuls in TF32": never on tpu
        common_cuda.tf32_is_not_fp32 = lambda: False
    from torch.testing._internal import common_device_type, common_mkldnn, common_nn
    for name in ("skip", "xfail"):  # moved to common_device_type
        if not hasattr(cmi, name) and hasattr(common_device_type, name):
            setattr(cmi, name, getattr(common_device_type, name))
    if not hasattr(cmi, "skipOps") and hasattr(common_device_type, "skipOps"):
        # older files name the test class and test (also in the decorated
        # function's qualified name, where the newer one reads them)
        cmi.skipOps = lambda *args: common_device_type.skipOps(args[-1])
    if not hasattr(common_nn, "new_module_tests") and hasattr(common_nn, "get_new_module_tests"):
        common_nn.new_module_tests = common_nn.get_new_module_tests()
    _instantiate_with_own_class_super(common_device_type)
    if not hasattr(common_mkldnn, "bf32_on_and_off"):
        # oneDNN's bf32 matmul mode is a CPU setting; on tpu the test runs as written
        common_mkldnn.bf32_on_and_off = lambda *args, **kwargs: (lambda fn: fn)



def _instantiate_with_own_class_super(common_device_type):
    """Older files' setUp/tearDown call `super(self.__class__, self)`, which
    ends where the device classes (TestLinalgCPU) held their own copy of the
    method and derived from an empty copy of the generic class. Newer
    instantiation derives them from the generic class itself, so the call
    finds the same method again and recurses without end. Such methods are
    moved from the generic class onto each device class, as before."""
    instantiate = common_device_type.instantiate_device_type_tests
    if getattr(instantiate, "_moves_own_class_super", False):
        return

    def own_class_super(fn):
        names = getattr(getattr(fn, "__code__", None), "co_names", ())
        return "super" in names and "__class__" in names

    def wrapper(generic_test_class, scope, *args, **kwargs):
        moved = {n: f for n, f in vars(generic_test_class).items()
                 if n in ("setUp", "tearDown") and own_class_super(f)}
        for name in moved:
            delattr(generic_test_class, name)
        before = set(scope)
        result = instantiate(generic_test_class, scope, *args, **kwargs)
        for name in set(scope) - before:
            cls = scope[name]
            if isinstance(cls, type) and issubclass(cls, generic_test_class):
                for method, fn in moved.items():
                    setattr(cls, method, fn)
        return result

    wrapper._moves_own_class_super = True
    common_device_type.instantiate_device_type_tests = wrapper


_compat()

_RESULTS = os.environ.get("TTPU_SUITE_RESULTS")
_TIMEOUT = float(os.environ.get("TTPU_SUITE_TIMEOUT", "60"))
_DONE = set()
if os.environ.get("TTPU_SUITE_DONE") and os.path.exists(os.environ["TTPU_SUITE_DONE"]):
    with open(os.environ["TTPU_SUITE_DONE"]) as f:
        _DONE = {line.strip() for line in f if line.strip()}


class TestTimeout(BaseException):
    """Raised in the test's thread when its time limit passes."""


def _write(rec):
    if not _RESULTS:
        return
    with open(_RESULTS, "a") as f:
        f.write(json.dumps(rec) + "\n")
        f.flush()


_ONLY = None
if os.environ.get("TTPU_SUITE_ONLY"):
    with open(os.environ["TTPU_SUITE_ONLY"]) as f:
        _ONLY = {normal_id(line.strip()) for line in f if line.strip()}


def pytest_collection_modifyitems(session, config, items):
    if _ONLY is not None:
        items[:] = [it for it in items if normal_id(it.nodeid) in _ONLY]
    if _DONE:
        done = {normal_id(t) for t in _DONE}
        items[:] = [it for it in items if normal_id(it.nodeid) not in done]


def _on_alarm(signum, frame):
    raise TestTimeout(f"test took longer than {_TIMEOUT:g} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _write({"event": "start", "id": item.nodeid})
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
    item._suite_t0 = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _describe(excinfo):
    """(exception type, first message line, innermost frames) of a failure."""
    if excinfo is None:
        return None, "", ""
    etype = excinfo.type.__name__
    msg = str(excinfo.value).strip()
    frames = traceback.extract_tb(excinfo.tb)
    where = [f"{os.path.basename(fr.filename)}:{fr.lineno}:{fr.name}" for fr in frames[-4:]]
    return etype, msg[:2000], " < ".join(reversed(where))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed") \
            or (rep.when == "teardown" and rep.outcome == "failed"):
        res = rep.outcome
        if hasattr(rep, "wasxfail"):
            res = "xfail" if rep.skipped else "xpass"
        etype, msg, where = _describe(call.excinfo) if rep.outcome != "passed" else (None, "", "")
        if rep.skipped and call.excinfo is not None:
            etype, msg = "Skipped", str(call.excinfo.value)[:500]
        if call.excinfo is not None and call.excinfo.errisinstance(TestTimeout):
            res = "timeout"
        _write({"event": "end", "id": item.nodeid, "when": rep.when, "outcome": res,
                "type": etype, "msg": msg, "where": where,
                "s": round(time.monotonic() - getattr(item, "_suite_t0", time.monotonic()), 3)})
