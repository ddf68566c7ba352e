"""The scripts in examples/, each run at a tiny size in a fresh process, as a
user would run them, with its output checked: the models learn, the warm
compile cache compiles nothing, DDP replicas stay equal."""
import os
import re
import signal
import subprocess
import sys

import pytest

from _proc import ROOT

EXAMPLES = os.path.join(ROOT, "examples")


def run_example(args, cache_dir, timeout=240, module=None):
    """Runs ``python examples/<args[0]> args[1:]`` (or ``python -m module
    args``) with its own compile cache; returns stdout + stderr. A hang kills
    the whole process group and fails the test."""
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(cache_dir), PYTHONUNBUFFERED="1")
    if module:
        cmd = [sys.executable, "-m", module, *args]
    else:
        cmd = [sys.executable, os.path.join(EXAMPLES, args[0]), *args[1:]]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{' '.join(cmd)} still running after {timeout} s:\n{out[-4000:]}")
    assert proc.returncode == 0, f"{' '.join(cmd)}: status {proc.returncode}\n{out[-6000:]}"
    return out


def loss_curve(out):
    m = re.search(r"loss (\d+\.\d+) -> (\d+\.\d+)", out)
    assert m, out[-3000:]
    return float(m.group(1)), float(m.group(2))


def test_hf_causal_lm(tmp_path):
    pytest.importorskip("transformers", reason="examples/hf_causal_lm.py needs transformers "
                        "(pip install transformers)")
    out = run_example(["hf_causal_lm.py", "--layers", "1", "--hidden", "32", "--seq", "32",
                       "--batch", "4", "--steps", "20", "--gen-tokens", "10"], tmp_path)
    first, last = loss_curve(out)
    assert last < first - 0.5, out[-3000:]
    losses = [float(v) for v in re.findall(r"^step +\d+ +loss (\d+\.\d+)", out, re.M)]
    assert len(losses) >= 5 and losses[-1] < losses[len(losses) // 2] < losses[0], losses
    m = re.search(r"generated in [\d.]+ s: '(.*)'", out)
    assert m and m.group(1).startswith("The lighthouse keeper") and \
        len(m.group(1)) == len("The lighthouse keeper") + 10, out[-3000:]


def test_image_classifier(tmp_path):
    out = run_example(["image_classifier.py", "--train-size", "512", "--eval-size", "256",
                       "--size", "16", "--width", "8", "--noise", "1", "--batch", "32",
                       "--epochs", "3"], tmp_path)
    epochs = re.findall(r"^epoch \d+ +loss (\S+) +train acc (\S+) +eval acc (\S+)", out, re.M)
    assert len(epochs) == 3, out[-3000:]
    losses = [float(e[0]) for e in epochs]
    train_acc, eval_acc = float(epochs[-1][1]), float(epochs[-1][2])
    assert losses[-1] < losses[0], out[-3000:]
    # 10 classes: chance is 0.1
    assert train_acc > 0.5 and eval_acc > 0.5, out[-3000:]


def test_compile_inference_warm_cache(tmp_path):
    out = run_example(["compile_inference.py", "--d-model", "32", "--layers", "1",
                       "--batch", "2", "--seq", "16", "--iters", "3",
                       "--cache-dir", str(tmp_path / "cache")], tmp_path / "unused")
    runs = re.findall(r"^first call .* compiled (\d+) programs .*?, (\d+) loaded from disk"
                      r".*max \|tpu - cpu\| (\S+)$", out, re.M)
    assert len(runs) == 2, out[-3000:]
    (cold_compiles, cold_loaded, cold_diff), (warm_compiles, warm_loaded, warm_diff) = runs
    assert int(cold_compiles) >= 1 and int(cold_loaded) == 0, out[-3000:]
    assert int(warm_compiles) == 0 and int(warm_loaded) == int(cold_compiles), out[-3000:]
    assert float(cold_diff) < 1e-4 and float(warm_diff) < 1e-4, out[-3000:]
    assert "(TORCHTPU_CACHE_DIR=" + str(tmp_path / "cache") + ")" in out


def test_ddp_torchrun(tmp_path):
    out = run_example(["--standalone", "--nproc-per-node", "2",
                       os.path.join(EXAMPLES, "ddp_torchrun.py"),
                       "--hidden", "32", "--steps", "30", "--lr", "1e-2"], tmp_path,
                      module="torch.distributed.run")
    assert "2 ranks, backend tpu" in out, out[-3000:]
    first, last = loss_curve(out)
    assert last < first - 0.3, out[-3000:]
    assert "replicas equal: True" in out, out[-3000:]


def test_demo(tmp_path):
    """The demo as `./run.sh demo` runs it (fewer steps): three modes agree
    with the CPU, the warm start compiles nothing, and (libtpu being a
    pinned dependency) the step compiles for v5e."""
    out = run_example(["--steps", "4", "--batch", "4", "--block", "32"], tmp_path,
                      timeout=400, module="torchtpu.demo")
    for mode in ("strict", "fused", "compiled"):
        assert re.search(rf"^   {mode} .* MATCH$", out, re.M), out[-3000:]
    warm = re.search(r"warm: first loss after [\d.]+ s, (\d+) programs compiled, (\d+) loaded", out)
    assert warm and warm.group(1) == "0" and int(warm.group(2)) > 0, out[-3000:]
    assert re.search(r"\d+ programs; HBM per device [\d.]+ MiB", out) or \
        "libtpu is not installed" in out, out[-3000:]
    assert out.rstrip().endswith("result: all modes MATCH the CPU"), out[-3000:]
