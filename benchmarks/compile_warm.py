"""torch.compile start-up, cold vs warm: a fresh process each time, the same
TORCHTPU_CACHE_DIR and PyTorch cache dir (TORCHINDUCTOR_CACHE_DIR).

    .venv/bin/python benchmarks/compile_warm.py [--model gpt|llama|both]

Per model (the demo GPT training step of benchmarks/compile.py, the LLaMA of
benchmarks/llama.py), three processes in a row: cold (both caches empty),
warm with only the engine's disk cache (TORCHTPU_AOT_AUTOGRAD_CACHE=0), and
warm with both. Each reports seconds to the first and second loss and where
the first step went: Dynamo's bytecode tracing, AOTAutograd's tracing and
partitioning, the rest of the backend call (our graph compile, and on a hit
the AOTAutograd cache's key and load), and the engine's compiles or disk
loads.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(model_name):
    import torch
    import torchtpu  # noqa: F401
    import torchtpu.dynamo  # noqa: F401
    from torch._dynamo.utils import compilation_time_metrics, counters
    from torchtpu import _C

    torch.manual_seed(0)
    if model_name == "gpt":
        from torchtpu.demo import GPT

        model, vocab, shape = GPT(43, d=64, layers=2, heads=4, block=64), 43, (16, 64)
    else:
        sys.path.insert(0, HERE)
        from llama import Llama

        model, vocab, shape = Llama(256), 256, (8, 128)
    model = model.to("tpu")
    x = torch.randint(0, vocab, shape).to("tpu")
    y = torch.randint(0, vocab, shape).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step(x, y):
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    step = torch.compile(step, backend="tpu")
    t0 = time.perf_counter()
    l1 = step(x, y).item()
    t1 = time.perf_counter()
    l2 = step(x, y).item()
    t2 = time.perf_counter()
    m = {k: sum(v) for k, v in compilation_time_metrics.items()}
    st = _C._compile_stats()
    user = m.get("OutputGraph.call_user_compiler", 0.0)
    aot = m.get("create_aot_dispatcher_function", 0.0)
    print("RESULT " + json.dumps(dict(
        first=t1 - t0, second=t2 - t1, losses=[l1, l2],
        dynamo=m.get("_compile.compile_inner", 0.0) - user, aot_autograd=aot, backend=user - aot,
        engine_compiles=st["compiles"], engine_compile_s=st["compile_seconds"],
        disk_loads=st["disk_hits"], disk_load_s=st["disk_load_seconds"],
        aot_cache=dict(counters["aot_autograd"]))))


def run(model_name, dirs, **env):
    e = dict(os.environ, TORCHTPU_CACHE_DIR=dirs[0], TORCHINDUCTOR_CACHE_DIR=dirs[1], **env)
    e["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + e.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, __file__, "--child", model_name], capture_output=True, text=True, env=e)
    if p.returncode:
        sys.exit(p.stdout + p.stderr)
    return json.loads([l for l in p.stdout.splitlines() if l.startswith("RESULT ")][-1][7:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="both", choices=["gpt", "llama", "both"])
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        return child(a.child)
    print("load average:", open("/proc/loadavg").read().split()[:3])
    for name in (["gpt", "llama"] if a.model == "both" else [a.model]):
        tmp = tempfile.mkdtemp()
        dirs = (os.path.join(tmp, "torchtpu"), os.path.join(tmp, "torch"))
        rows = [("cold", run(name, dirs))]
        rows.append(("warm, engine cache only", run(name, dirs, TORCHTPU_AOT_AUTOGRAD_CACHE="0")))
        rows.append(("warm, both caches", run(name, dirs)))
        print(f"\n{name}: seconds   first  second  | dynamo  aot_autograd  backend+cache  engine (compiles / loads)")
        for label, r in rows:
            eng = (f"{r['engine_compiles']} compiled {r['engine_compile_s']:.2f} s / "
                   f"{r['disk_loads']} loaded {r['disk_load_s']:.2f} s")
            hits = r["aot_cache"].get("autograd_cache_hit", 0)
            print(f"  {label:<24} {r['first']:6.2f}  {r['second']:6.2f}  | {r['dynamo']:6.2f}  {r['aot_autograd']:12.2f}"
                  f"  {r['backend']:13.2f}  {eng}; AOTAutograd cache hits {hits}; losses {r['losses']}")
        shutil.rmtree(tmp, ignore_errors=True)
    print("load average:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
