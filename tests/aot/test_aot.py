"""Our programs compile for real TPU topologies (libtpu, no TPU needed).

Skipped, with the reason, where libtpu is not installed
(the `tpu` extra, `pip install "torchtpu[tpu]"`, installs it).

The op-suite part runs a representative part of the op tests with program
dumps on and compiles one program of every op they emit. The full sweep
(every op test file, every program):

    TORCHTPU_AOT_OPS=all TORCHTPU_AOT_EVERY_PROGRAM=1 .venv/bin/python -m pytest -q tests/aot/test_aot.py -k op_suite
"""
import os
import subprocess
import sys

import pytest
import torch

import torchtpu  # noqa: F401
import torchtpu.aot as aot
from torchtpu.aot import chips

from _proc import ROOT as REPO

TOPOLOGIES = ["v5e:2x2", "v6e:2x2"]
OPS = os.path.join(REPO, "tests", "ops")

_ok, _why = aot.available()
needs_libtpu = pytest.mark.skipif(not _ok, reason=f"libtpu not installed: {_why}")


def test_chip_table_and_topology_names():
    assert chips.chip_count("v5e:2x2") == 4
    assert chips.chip_count("v4:2x2x1") == 4
    assert chips.generation_of("v5litepod:2x2") == "v5e"
    v5e = chips.chip_for("v5e:2x2")
    assert v5e.peak_bf16_flops == 197e12 and v5e.hbm_bytes == 16 * 10**9
    assert chips.chip_for("v6e:2x2").hbm_bytes_per_s == 1638e9
    for bad in ["v5e", "v5e:2xq", "v5e:0x2"]:
        with pytest.raises(ValueError):
            chips.chip_count(bad)


@needs_libtpu
def test_demo_training_step_compiles():
    from torchtpu import demo

    text, chars, data = demo.load_text()
    torch.manual_seed(0)
    model = demo.GPT(len(chars), block=32)
    x, y = next(demo.batches(data, 1, 4, 32))
    reports = aot.compile_for(model, (x, y), topology=TOPOLOGIES)
    for r in reports:
        assert not r.failures and not r.hbm_failures
        assert len(r.programs) > 20
        assert r.fits and r.device_count == 4 and r.replicas == 4
        # Forward, backward and optimizer programs are all there and ran.
        names = {p.name.split("-")[0] for p in r.programs}
        assert {"bmm", "native_layer_norm_backward", "_foreach_addcdiv_.ScalarList"} <= names, names
        assert r.executions > len(r.programs) / 2
        assert r.step_flops > 0 and r.step_seconds > 0
        text = r.format()
        assert "HBM per device" in text and "fits" in text


@needs_libtpu
def test_compile_for_function_and_single_device():
    def step(a, b):
        (a @ b).relu().sum().item()

    a, b = torch.randn(16, 32, device="tpu"), torch.randn(32, 8, device="tpu")
    r = aot.compile_for(step, (a, b), topology="v6e:2x2", replicas=1)
    mm = [p for p in r.programs if p.name.startswith("mm-")]
    assert mm and mm[0].flops == 2 * 16 * 32 * 8 and mm[0].runs == 1
    assert r.replicas == 1


@needs_libtpu
def test_compile_for_an_inference_module():
    # No parameters: its forward is the step (no optimizer, no backward).
    m = torch.nn.Sequential(torch.nn.Softmax(dim=-1), torch.nn.Flatten())
    r = aot.compile_for(m, (torch.randn(4, 8, 3),), topology="v5e:2x2", replicas=1)
    assert not r.failures and r.programs
    assert any(p.name.startswith("_softmax-") for p in r.programs), [p.name for p in r.programs]


@needs_libtpu
def test_batched_svd_compiles_for_v5e():
    # The SVD is a loop (one-sided Jacobi): its program is the same size at
    # any matrix size, and libtpu takes it.
    def step(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        (u.sum() + s.sum() + vh.sum()).item()

    r = aot.compile_for(step, (torch.randn(8, 64, 64, device="tpu"),), topology="v5e:2x2", replicas=1)
    assert not r.failures and not r.hbm_failures
    assert any(p.name.startswith("_linalg_svd") for p in r.programs), [p.name for p in r.programs]


@needs_libtpu
def test_a_second_capture_sees_programs_compiled_before():
    # The same step twice in one process (another topology, then the same
    # one): every program it runs is captured again, though all are loaded
    # already, and the two captures agree.
    def step(a, b):
        (a @ b).tanh().sum().item()

    a, b = torch.randn(12, 20, device="tpu"), torch.randn(20, 6, device="tpu")
    step(a, b)  # compiled before any capture
    first = aot.compile_for(step, (a, b), topology="v5e:2x2", replicas=1)
    second = aot.compile_for(step, (a, b), topology="v6e:2x2", replicas=1)
    third = aot.compile_for(step, (a, b), topology="v5e:2x2", replicas=1)
    names = lambda r: sorted(p.name for p in r.programs)
    assert names(first) and names(first) == names(second) == names(third)
    assert any(n.startswith("mm-") for n in names(first))
    assert [p.runs for p in first.programs] == [p.runs for p in third.programs]


def test_missing_libtpu_names_the_tpu_extra(tmp_path):
    # Nothing where the search looks: the error says how to install it.
    import torchtpu._C as C

    env = os.environ.pop("TORCHTPU_LIBTPU", None)
    try:
        with pytest.raises(ImportError) as e:
            C._aot_find([str(tmp_path)])
    finally:
        if env is not None:
            os.environ["TORCHTPU_LIBTPU"] = env
    assert "pip install 'torchtpu[tpu]'" in str(e.value)
    assert "requirements-tpu.txt" not in str(e.value)


@needs_libtpu
def test_does_not_fit_is_a_clear_error():
    # 6 Gi f32 elements: 24 GiB out of a scalar, more than a v5e chip's HBM.
    n = 6 * 2**30
    t = f"tensor<{n}xf32>"
    big = (
        f"module @m {{ func.func public @main(%arg0: tensor<f32>) -> ({t}) {{ "
        f'%0 = "stablehlo.broadcast_in_dim"(%arg0) {{broadcast_dimensions = array<i64>}} : '
        f'(tensor<f32>) -> {t}  "func.return"(%0) : ({t}) -> () }} }}'
    )
    r = aot.compile_programs([("broadcast-big", big, 1)], "v5e:2x2")
    assert not r.fits
    with pytest.raises(aot.DoesNotFitError, match="does not fit on v5e:2x2"):
        aot._check(r)


@needs_libtpu
def test_bad_topology():
    with pytest.raises(RuntimeError, match="v5e:9x9x9x9|invalid|Invalid"):
        aot.target("v5e:9x9x9x9")


def _op_files():
    sel = os.environ.get("TORCHTPU_AOT_OPS", "linalg,shape")
    if sel == "all":
        return sorted(
            os.path.join("tests", "ops", f) for f in os.listdir(OPS) if f.startswith("test_ops_") and f.endswith(".py")
        )
    return [os.path.join("tests", "ops", f"test_ops_{s.strip()}.py") for s in sel.split(",")]


@pytest.fixture(scope="module")
def op_programs(tmp_path_factory):
    """Runs the selected op tests in a fresh process with dumps on, and an
    empty disk cache of its own (programs the session's cache already holds
    would load, not compile, and so not be dumped)."""
    d = str(tmp_path_factory.mktemp("op-programs"))
    env = dict(os.environ, TORCHTPU_DUMP_DIR=d,
               TORCHTPU_CACHE_DIR=str(tmp_path_factory.mktemp("op-programs-cache")))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_op_files()],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    programs = aot._read_dir(d)
    if os.environ.get("TORCHTPU_AOT_EVERY_PROGRAM") != "1":
        one = {}
        for name, text, runs in programs:  # sorted: the same pick every run
            one.setdefault(name.rsplit("-", 1)[0], (name, text, runs))
        programs = list(one.values())
    assert len(programs) > 20
    return programs


# Programs of ours that libtpu rejects today, by the compiler's reason. Each
# is an engine limitation on TPU (found by this test), not a test problem;
# a failure of any other kind fails the test.
KNOWN_TPU_LIMITS = {
}


def _known(msg):
    return next((why for key, why in KNOWN_TPU_LIMITS.items() if key in msg), None)


@needs_libtpu
@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_op_suite_programs_compile(op_programs, topology):
    r = aot.compile_programs(op_programs, topology, capture="op test programs")
    failed = r.failures + r.hbm_failures
    unknown = [f"{n}: {m.splitlines()[0]}" for n, m in failed if not _known(m)]
    assert not unknown, f"{len(unknown)} of {len(op_programs)} programs do not compile for {topology}:\n" + "\n".join(unknown[:20])
    for n, m in failed:
        print(f"known TPU limit, {n}: {_known(m)}")
    assert len(r.programs) + len(failed) == len(op_programs)
    assert len(r.programs) >= 0.9 * len(op_programs)


@needs_libtpu
def test_bucketed_programs_compile_for_tpu():
    """A decode loop over a growing KV cache: the bucketed programs (the
    padded cat, attention over the padded keys with their masks) compile
    for v5e and v6e."""
    # (shapes no other test uses: a program another test compiled in this
    # process would be found in the cache, not compiled)
    def step(q, kv):
        for _ in range(5):
            kv = torch.cat([kv, torch.ones(1, 3, 1, 24, device="tpu")], 2)
            out = ((q @ kv.transpose(-1, -2)) * 0.25).softmax(-1) @ kv
        out.sum().item()

    torchtpu.debug.compiles(clear=True)
    args = (torch.randn(1, 3, 1, 24, device="tpu"), torch.randn(1, 3, 70, 24, device="tpu"))
    reports = aot.compile_for(step, args, topology=TOPOLOGIES, replicas=1)
    reasons = [c["reason"] for c in torchtpu.debug.compiles()]
    assert any("holds sizes up to 128" in r for r in reasons), reasons
    for r in reports:
        assert not r.failures, r.format()
        assert any(p.name.startswith("bmm-") for p in r.programs)
