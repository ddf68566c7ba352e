"""Programs compiled by torch.compile(backend="tpu") training over sequence
lengths that vary, against one length: the LLaMA-style model and lengths
of changing_shapes.py's `train` workload (d=128, 2 layers, AdamW outside
the graph), with Dynamo's automatic dynamic shapes (default) or
dynamic=True. Each run is a fresh process with the disk cache off.

    .venv/bin/python benchmarks/shapes/compiled_training.py

Prints, per run: programs compiled (all of them: the graphs and the eager
optimizer's ops), graph programs by name, the wall time, and the largest
relative difference of the losses from the CPU's.
"""
import collections
import copy
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one(variant, dynamic):
    sys.path.insert(0, HERE)
    import torch

    import changing_shapes as cs
    import torchtpu

    lengths = cs.VARIED_LENS if variant == "varied" else [cs.FIXED_LEN] * cs.STEPS
    model = cs.build("llama").train()
    tmodel = copy.deepcopy(model).to("tpu")
    ref = cs.train_run(model, lengths, "cpu")
    compiled = torch.compile(tmodel, backend="tpu", dynamic=dynamic)

    class Step:  # what train_run calls: the model, and its parameters
        def __call__(self, **kw):
            return compiled(**kw)

        def parameters(self):
            return tmodel.parameters()

    t0 = time.perf_counter()
    got = cs.train_run(Step(), lengths, "tpu")
    wall = time.perf_counter() - t0
    m = torchtpu.debug.metrics()
    graphs = collections.Counter(c["what"].split(" (")[0] for c in torchtpu._C._compile_log()
                                 if c["what"].startswith("graph"))
    rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, ref))
    print(json.dumps(dict(variant=variant, dynamic=dynamic, compiles=m["compiles"],
                          graph_programs=dict(graphs), replays=m["graph_replays"],
                          wall_s=round(wall, 1), loss_rel_diff=rel)))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        return one(sys.argv[2], json.loads(sys.argv[3]))
    env = dict(os.environ, TORCHTPU_DISK_CACHE="0", TORCHTPU_RECOMPILE_WARN="0",
               PYTHONWARNINGS="ignore", TRANSFORMERS_VERBOSITY="error")
    for variant, dynamic in (("fixed", None), ("varied", None), ("varied", True)):
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", variant,
                            json.dumps(dynamic)], env=env, capture_output=True, text=True)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        print(lines[-1] if lines else f"{variant} dynamic={dynamic}: FAILED\n{p.stderr[-2000:]}",
              flush=True)


if __name__ == "__main__":
    main()
