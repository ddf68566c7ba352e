"""python -m torchtpu.aot --fill-cache: a TPU compile cache written here.

The script's programs, compiled for v5e:2x2 by libtpu, land in the cache
directory under the namespace a libtpu client computes, with the keys the
runtime itself uses for them (compared against the keys the CPU plugin's
runtime stores for the same script). Skipped where libtpu is not installed.
"""
import os
import subprocess
import sys

import pytest

import torchtpu
import torchtpu.aot as aot
from torchtpu import _C

from _proc import ROOT as REPO

TOPOLOGY = "v5e:2x2"

_ok, _why = aot.available()
pytestmark = pytest.mark.skipif(not _ok, reason=f"libtpu not installed: {_why}")

SCRIPT = """
import sys
import torch
import torchtpu
x = torch.arange(12., device="tpu").reshape(3, 4)
w = torch.ones(4, 2, device="tpu")
print("loss", float(((x @ w).relu() + 1).sum()))
torchtpu.modes.set_eager_mode("fused")
y = (x * 3 - 1).tanh().mean(dim=1)
print("fused", y.sum().item())
"""


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _run(args, **env):
    p = subprocess.run([sys.executable] + args, capture_output=True, text=True, env=_env(**env), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def _entries(root):
    """{namespace dir: {key: entry}} read with the disk cache's own reader."""
    out = {}
    for ns in sorted(os.listdir(root)):
        d = os.path.join(root, ns)
        for f in os.listdir(d):
            if f.startswith("."):
                continue
            e = _C._disk_read_entry(os.path.join(d, f))
            assert e is not None, f"{ns}/{f} is not a valid entry"
            assert e["namespace"] == ns
            out.setdefault(ns, {})[e["key"]] = e
    return out


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fill")
    script = tmp / "tiny.py"
    script.write_text(SCRIPT)
    tpu_dir, cpu_dir = tmp / "tpu-cache", tmp / "cpu-cache"
    first = _run(["-m", "torchtpu.aot", "--topology", TOPOLOGY, "--fill-cache", str(tpu_dir), str(script)])
    cpu_out = _run([str(script)], TORCHTPU_CACHE_DIR=str(cpu_dir))
    return dict(script=script, tpu_dir=tpu_dir, cpu_dir=cpu_dir, first=first, cpu_out=cpu_out)


def test_fill_reports_and_runs_the_script(filled):
    out = filled["first"]
    assert "loss 138.0" in out and "fused" in out  # the script ran, and its output is its own
    summary = out.strip().splitlines()[-1]
    assert "0 already cached, 0 failed" in summary, out
    assert " compiled," in summary and "MiB written" in summary
    assert "compiled        mm" in out and "fused window" in out


def test_namespace_is_what_a_libtpu_client_computes(filled):
    t = aot.target(TOPOLOGY)
    assert t["platform_name"] == "tpu"
    expected = _C._disk_namespace_id(t["platform_name"], t["platform_version"], *t["api_version"], None, False)
    assert _C._aot_fill_namespace(TOPOLOGY, str(filled["tpu_dir"])) == expected
    assert list(_entries(filled["tpu_dir"])) == [expected]
    # The same function gives the CPU runtime's own directory for what its
    # client reports; changing any input changes the id.
    p = torchtpu.platform_info()
    cpu = _C._disk_namespace_id(p["name"], p["version"], *p["api_version"], p["compile_options"],
                                bool(_C._caps()["host_code"]))
    assert list(_entries(filled["cpu_dir"])) == [cpu]
    assert cpu != expected
    assert _C._disk_namespace_id("tpu", t["platform_version"] + "x", *t["api_version"]) != expected
    assert _C._disk_namespace_id("tpu", t["platform_version"], *t["api_version"], "other-options") != expected


def test_keys_equal_the_runtimes_keys(filled):
    (tpu,) = _entries(filled["tpu_dir"]).values()
    (cpu,) = _entries(filled["cpu_dir"]).values()
    assert len(tpu) >= 7
    assert set(tpu) == set(cpu)
    for key, e in tpu.items():
        assert e["n_results"] == cpu[key]["n_results"]
        assert e["exe_bytes"] > 0 and e["exe_bytes"] != cpu[key]["exe_bytes"]


def test_second_fill_is_all_cached(filled):
    out = _run(["-m", "torchtpu.aot", "--topology", TOPOLOGY, "--fill-cache", str(filled["tpu_dir"]), str(filled["script"])])
    (tpu,) = _entries(filled["tpu_dir"]).values()
    summary = out.strip().splitlines()[-1]
    assert f"{len(tpu)} programs" in summary and f"0 compiled, {len(tpu)} already cached, 0 failed" in summary, out


def test_fill_cache_needs_a_script(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "torchtpu.aot", "--fill-cache", str(tmp_path)],
        capture_output=True, text=True, env=_env(), timeout=120,
    )
    assert p.returncode == 2 and "needs a SCRIPT" in p.stderr


def test_fill_from_generate_covers_other_lengths(tmp_path):
    """A TPU cache filled from one generate() with explicit bucket sizes
    holds every program a later generate() of other prompt lengths and
    fewer tokens needs: the keys the runtime stores for those runs are a
    subset of the filled keys, so the TPU host compiles nothing for them."""
    script = os.path.join(REPO, "benchmarks", "shapes", "generate_lengths.py")
    env = dict(TORCHTPU_BUCKETS="16,32,64,128", TORCHTPU_EAGER_MODE="fused")
    tpu_dir, cpu_dir = tmp_path / "tpu", tmp_path / "cpu"
    out = _run(["-m", "torchtpu.aot", "--topology", TOPOLOGY, "--fill-cache", str(tpu_dir), script,
                "--model", "gpt2", "--tokens", "56", "--no-cpu-check"], **env)
    assert "0 failed" in out.strip().splitlines()[-1], out
    out = _run([script, "--model", "gpt2", "--prompts", "5,13", "--tokens", "40"],
               TORCHTPU_CACHE_DIR=str(cpu_dir), **env)
    assert out.count("tokens equal the CPU's") == 2, out
    (tpu,) = _entries(tpu_dir).values()
    (cpu,) = _entries(cpu_dir).values()
    assert cpu and set(cpu) <= set(tpu), sorted(set(cpu) - set(tpu))
