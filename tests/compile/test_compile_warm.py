"""A warm process's torch.compile(backend="tpu") step: PyTorch's AOTAutograd
cache gives back the graphs (hit counter), the engine's disk cache gives
back their programs (no compile), and the losses are the cold process's."""
import json
import os
import subprocess
import sys

import torchtpu.dynamo

from _proc import ROOT as REPO

CHILD = r"""
import json, sys
import torch, torchtpu, torchtpu.dynamo
from torchtpu import _C
from torchtpu.demo import GPT
from torch._dynamo.utils import counters
torch.manual_seed(0)
model = GPT(11, d=32, layers=1, heads=2, block=16).to("tpu")
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randint(0, 11, (4, 16)).to("tpu")
y = torch.randint(0, 11, (4, 16)).to("tpu")

def step(x, y):
    loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss

step = torch.compile(step, backend="tpu")
losses = [step(x, y).item() for _ in range(3)]
st = _C._compile_stats()
print("RESULT " + json.dumps(dict(losses=losses, compiles=st["compiles"], disk_hits=st["disk_hits"],
                                  aot=dict(counters["aot_autograd"]))))
"""


def _child(tmp_path, **env):
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    e["TORCHTPU_CACHE_DIR"] = str(tmp_path / "torchtpu")
    e["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "torch")
    e.update(env)
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=e, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_warm_process_loads_graphs_and_programs(tmp_path):
    cold = _child(tmp_path)
    warm = _child(tmp_path)
    assert cold["compiles"] > 0 and cold["disk_hits"] == 0
    assert warm["losses"] == cold["losses"]
    assert cold["losses"][0] != cold["losses"][2]  # it trains
    assert warm["compiles"] == 0 and warm["disk_hits"] > 0
    if torchtpu.dynamo.cache_enabled():
        # forward + backward (one training graph) and the optimizer graph
        graphs = cold["aot"].get("autograd_cache_miss", 0)
        assert graphs >= 2 and cold["aot"].get("autograd_cache_saved", 0) == graphs
        assert warm["aot"].get("autograd_cache_hit", 0) == graphs
        assert warm["aot"].get("autograd_cache_miss", 0) == 0
