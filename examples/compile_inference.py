"""``torch.compile(model, backend="tpu")`` inference, cold and warm.

Each graph Dynamo captures becomes one XLA program, compiled once and
written to the persistent compile cache (``TORCHTPU_CACHE_DIR``, default
``~/.cache/torchtpu``). A second process with the same cache directory
loads the programs from disk and compiles nothing: only Dynamo's own
tracing is left in its first call.

This script runs itself twice in fresh processes that share one cache
directory (a new empty one unless ``--cache-dir`` names one), and prints
each run's first-call time, steady-state latency and the compile counters
of ``torchtpu.debug.metrics()``:

    python examples/compile_inference.py                  # transformer encoder, d=256, 4 layers, batch 32x128
    python examples/compile_inference.py --cache-dir DIR  # keep the cache: run it again and both runs are warm
    python examples/compile_inference.py --d-model 32 --layers 1 --batch 2 --seq 16 --iters 3   # tiny

The same by hand: ``TORCHTPU_CACHE_DIR=DIR python examples/compile_inference.py --run``
twice (the second prints ``compiled 0 programs``).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run(args):
    """One process: compile the model, time its calls, report the counters."""
    import torch
    import torch.nn as nn

    import torchtpu

    class Encoder(nn.Module):
        """Token classifier: embedding, a stack of transformer encoder layers,
        mean pooling, a linear head."""

        def __init__(self, vocab, d, heads, layers, classes, seq):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d, classes)

        def forward(self, ids):
            x = self.encoder(self.tok(ids) + self.pos[: ids.shape[1]])
            return self.head(x.mean(dim=1))

    torch.manual_seed(0)
    model = Encoder(args.vocab, args.d_model, args.heads, args.layers, 10, args.seq).eval()
    ids = torch.randint(args.vocab, (args.batch, args.seq))
    with torch.no_grad():
        expected = model(ids)  # eager CPU, to check the compiled result

    model.to("tpu")
    compiled = torch.compile(model, backend="tpu")
    ids = ids.to("tpu")
    before = torchtpu.debug.metrics()

    with torch.no_grad():
        t0 = time.perf_counter()
        out = compiled(ids)
        torch.tpu.synchronize()
        first = time.perf_counter() - t0

        t0 = time.perf_counter()
        for _ in range(args.iters):
            out = compiled(ids)
        torch.tpu.synchronize()
        steady = (time.perf_counter() - t0) / args.iters

    m = torchtpu.debug.metrics()
    result = {
        "first_call_s": first,
        "steady_ms": steady * 1e3,
        "compiles": m["compiles"] - before["compiles"],
        "compile_s": m["compile_seconds"] - before["compile_seconds"],
        "disk_hits": m["disk_hits"] - before["disk_hits"],
        "disk_load_s": m["disk_load_seconds"] - before["disk_load_seconds"],
        "graph_replays": m["graph_replays"] - before["graph_replays"],
        "max_abs_diff": (out.cpu() - expected).abs().max().item(),
        "cache_dir": m["cache_dir"],
        "programs": [f"{c['what']}: loaded from disk" if c["from_disk"] else c["reason"]
                     for c in torchtpu.debug.compiles() if c["what"].startswith("graph")],
    }
    print(f"first call {first:.2f} s, then {steady * 1e3:.2f} ms per call; "
          f"compiled {result['compiles']} programs ({result['compile_s']:.2f} s), "
          f"{result['disk_hits']} loaded from disk ({result['disk_load_s']:.2f} s), "
          f"{result['graph_replays']} graph replays; "
          f"max |tpu - cpu| {result['max_abs_diff']:.2e}")
    for line in result["programs"]:
        print("  ", line)
    if args.json:
        print("RESULT " + json.dumps(result))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--iters", type=int, default=20, help="timed calls after the first")
    p.add_argument("--cache-dir", help="compile cache directory (default: a new empty one)")
    p.add_argument("--run", action="store_true",
                   help="one run in this process, with the cache TORCHTPU_CACHE_DIR names")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args, rest = p.parse_known_args(argv)
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.run:
        return run(args)

    cache = args.cache_dir or tempfile.mkdtemp(prefix="torchtpu-cache-")
    env = dict(os.environ, TORCHTPU_CACHE_DIR=cache)
    child_argv = [a for a in (argv if argv is not None else sys.argv[1:])]
    results = []
    for name in ("cold", "warm"):
        print(f"--- {name} process (TORCHTPU_CACHE_DIR={cache})", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), *child_argv,
                               "--run", "--json"], env=env, stdout=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        lines = proc.stdout.splitlines()
        print("\n".join(l for l in lines if not l.startswith("RESULT ")))
        if proc.returncode != 0:
            sys.exit(f"{name} run failed with status {proc.returncode}")
        res = json.loads(next(l for l in lines if l.startswith("RESULT "))[len("RESULT "):])
        res["process_s"] = wall
        results.append(res)
    cold, warm = results
    print(f"first call: cold {cold['first_call_s']:.2f} s ({cold['compiles']} programs compiled), "
          f"warm {warm['first_call_s']:.2f} s ({warm['compiles']} compiled, "
          f"{warm['disk_hits']} loaded from disk); whole process: cold {cold['process_s']:.1f} s, "
          f"warm {warm['process_s']:.1f} s")
    return results


if __name__ == "__main__":
    main()
