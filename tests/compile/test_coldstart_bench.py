"""benchmarks/coldstart.py at its smallest: the structure of its results and
that the figures are positive and consistent (never their speed)."""
import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

from _proc import ROOT

SCRIPT = os.path.join(ROOT, "benchmarks", "coldstart.py")


def _load():
    spec = importlib.util.spec_from_file_location("coldstart", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_op_counts():
    cs = _load()
    text = """module @m {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
    %1 = stablehlo.reshape %0 : (tensor<4xf32>) -> tensor<2x2xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %c) applies stablehlo.add across dimensions = [1] : (tensor<2x2xf32>, tensor<f32>) -> tensor<2xf32>
    %3 = "stablehlo.gather"(%1, %c) <{dimension_numbers = #stablehlo.gather<offset_dims = [0]>}> : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
    return %3 : tensor<2x2xf32>
  }
}
"""
    c = cs.op_counts(text)
    assert c == {"func.func": 1, "stablehlo.add": 1, "stablehlo.reshape": 1, "stablehlo.constant": 1,
                 "stablehlo.reduce": 1, "stablehlo.gather": 1}
    st = cs.program_stats([("a", text), ("b", text)])
    assert st["programs"] == 2 and st["ops"] == 12 and st["bytes"] == 2 * len(text)
    assert st["kinds"]["stablehlo.add"] == 2


def test_i1_constants_spelled_out():
    cs = _load()
    text = 'stablehlo.constant dense<"0x01000101"> : tensor<2x2xi1>'
    assert cs._Plugin._i1_literals(text) == \
        "stablehlo.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>"
    packed = 'dense<"0x0F"> : tensor<2x2xi1>'  # not one byte per element: left alone
    assert cs._Plugin._i1_literals(packed) == packed


def test_quick_run(tmp_path):
    cs = _load()
    out = tmp_path / "cold.json"
    topo = "v5e:2x2" if cs.libtpu_available() else "none"
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, SCRIPT, "--quick", "--models", "gpt", "--modes", "fused",
                        "--topologies", topo, "--json", str(out)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "cold start (seconds" in p.stdout
    r = json.loads(out.read_text())
    has_jax = importlib.util.find_spec("jax") is not None
    modes = [row["mode"] for row in r["rows"]]
    assert modes == (["fused", "jax"] if has_jax else ["fused"])
    vocab = r["rows"][0]["sizes"]["vocab"]
    for row in r["rows"]:
        assert row["model"] == "gpt"
        assert row["setup_s"] > 0
        assert 0 < row["first_loss_s"] <= row["second_loss_s"]
        assert len(row["losses"]) == 2
        for loss in row["losses"]:  # a fresh model: near ln(vocab)
            assert math.isfinite(loss) and 0.5 * math.log(vocab) < loss < 3 * math.log(vocab)
        st = row["program_stats"]
        assert st["programs"] >= 1 and st["ops"] >= st["programs"] and st["bytes"] > 0
        assert sum(st["kinds"].values()) == st["ops"]
        if topo != "none":
            a = row["libtpu"][topo]
            assert a["programs"] == st["programs"] and a["compiled"] == a["programs"]
            assert not a["failures"]
            assert a["sum_s"] > 0 and a["wall_s"] > 0
            assert abs(sum(a["per_program"].values()) - a["sum_s"]) < 1e-6
    fused = r["rows"][0]
    assert fused["compiles"] >= 1 and fused["compile_s"] > 0
    assert fused["fused_windows"] >= 1 and fused["disk_hits"] == 0
    assert fused["log_compiles"] == fused["compiles"]
    # every program of the two steps was compiled (and so dumped) by them
    assert 1 <= fused["program_stats"]["programs"] <= fused["compiles"]
    if has_jax:  # the same data: both losses start near ln(vocab) and agree loosely
        j = r["rows"][1]
        assert abs(j["losses"][0] - fused["losses"][0]) < 1.5
        assert j["compiles"] in (None, 1)  # one jitted step, compiled once
