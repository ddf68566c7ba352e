"""Packaging: the binary wheel installs into a fresh virtualenv that has only
torch and runs the device (no compiler, no source tree); the package metadata
brings the CPU plugin; another torch gets a clear error."""
import email
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch

from _proc import ROOT

TORCH_RELEASE = torch.__version__.split("+")[0]
TORCH_MINOR = ".".join(TORCH_RELEASE.split(".")[:2])

# A few training steps, checked against the CPU, run from the fresh venv.
TRAIN = textwrap.dedent("""
    import torch, torchtpu
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    ref.load_state_dict(model.state_dict())
    model.to("tpu")
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    losses = {}
    for name, m, dev in (("tpu", model, "tpu"), ("cpu", ref, "cpu")):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        out = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev))
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[name] = out
    assert losses["tpu"][-1] < losses["tpu"][0], losses
    assert max(abs(a - b) for a, b in zip(losses["tpu"], losses["cpu"])) < 1e-4, losses
    print("platform", torchtpu.platform_info()["name"], "module", torchtpu.__file__)
    print("losses", " ".join(f"{v:.4f}" for v in losses["tpu"]))
""")


def _pip(python, *args, timeout=600):
    return subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel `./run.sh wheel` builds (same command), into a temp dir."""
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                        "--no-build-isolation", "--no-deps", "-w", str(out), ROOT],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = list(out.glob("torchtpu-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_contents(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(z.read(meta_name))
        entry_points = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
        build_info = z.read("torchtpu/_build_info.py").decode()
        ext = z.read(next(n for n in names if n.startswith("torchtpu/_C.") and n.endswith(".so")))
    # File names in the extension (the locations in warnings and assertion
    # messages, the engine's debug info) are relative to the source tree and
    # to site-packages: no directory of the machine that built it.
    assert os.path.abspath(ROOT).encode() not in ext
    assert os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__))).encode() not in ext
    assert b"csrc/torch/aten/engine_kernel.cpp" in ext
    assert any(n.startswith("torchtpu/_C.") and n.endswith(".so") for n in names), names
    assert "torchtpu/data/lighthouse.txt" in names
    assert not any(n.startswith(("tests/", "csrc/", "benchmarks/")) for n in names)
    requires = meta.get_all("Requires-Dist")
    # The torch the extension was built against, and the default plugin.
    assert f"torch=={TORCH_MINOR}.*" in requires, requires
    assert "xla-cpu-pjrt==0.0.1" in requires, requires
    assert "numpy" in requires, requires
    assert any(r.startswith("libtpu==") and 'extra == "tpu"' in r for r in requires), requires
    assert any(r.startswith("jax-cuda13-pjrt==") and 'extra == "gpu"' in r for r in requires)
    assert any(r.startswith("jax==") and 'extra == "kernels"' in r for r in requires)
    assert f"TORCH_VERSION = {torch.__version__!r}" in build_info
    assert "torchtpu = torchtpu:_autoload" in entry_points
    assert "tpu = torchtpu.dynamo:backend" in entry_points
    # The engine is linked in: the extension needs no library of ours.
    assert not any(n.endswith(".a") for n in names)


def test_fresh_venv_installs_wheel_and_trains(wheel, tmp_path):
    """A venv with only torch: `pip install torchtpu-*.whl` brings the CPU
    plugin, and the device trains, with no compiler and no source tree."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    r = _pip(python, f"torch=={TORCH_RELEASE}")
    assert r.returncode == 0, r.stderr[-3000:]
    r = _pip(python, str(wheel))
    assert r.returncode == 0, r.stderr[-3000:]
    # Run outside the source tree, with no compiler on PATH.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TORCHTPU_PLUGIN"))}
    env["PATH"] = str(venv / "bin") + ":/usr/bin:/bin"
    env["CC"] = env["CXX"] = "false"
    r = subprocess.run([python, "-c", TRAIN], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "platform cpu" in r.stdout, r.stdout
    assert str(venv) in r.stdout, r.stdout  # the installed package, not the tree
    # torch.compile finds the backend through the wheel's entry point.
    r = subprocess.run([python, "-c", "import torch\n"
                        "f = torch.compile(lambda x: x * 2 + 1, backend='tpu')\n"
                        "print(f(torch.ones(3, device='tpu')).cpu().tolist())"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[3.0, 3.0, 3.0]" in r.stdout


def test_other_torch_release_is_a_clear_error():
    """Against another torch minor release, import says which torch it needs
    (instead of the loader's "undefined symbol")."""
    code = ("import torch\n"
            "torch.__version__ = '2.99.0+cpu'\n"
            "try:\n"
            "    import torchtpu\n"
            "except ImportError as e:\n"
            "    print('ImportError:', e)\n")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ImportError: torchtpu was built against torch " + torch.__version__ in r.stdout, r.stdout
    assert "torch 2.99.0+cpu is installed" in r.stdout
    assert f"install torch=={TORCH_MINOR}.*" in r.stdout
