"""Seconds to the second loss of a LLaMA-style stack at 2 and 12 layers, with
and without torchtpu.scan_layers, in strict, fused and compiled modes; and,
where libtpu is installed, the same training step compiled for a v5e.

    .venv/bin/python benchmarks/scan/scan_layers.py [--layers 2,12]
        [--modes strict,fused,compiled] [--optimizer adamw|sgd|none] [--no-libtpu]

The model: tests/support/llama.py's decoder (d=128, 4 heads, vocab 256,
batch 4 x 64 tokens), AdamW (lr 1e-3; --optimizer sgd: SGD lr 0.1 without
foreach, one small program per parameter shape; none: no update, backward
only); "scan" runs its blocks through
torchtpu.scan_layers(blocks, x, cos, sin) instead of a Python loop.
Every measurement is a fresh process (this script with --one) with
TORCHTPU_DISK_CACHE=0, so every program compiles in it. Reported: seconds
from the first step's start to the second loss on the host (.item()),
programs compiled by then (torchtpu.debug.metrics()["compiles"]), and
whether both losses equal the CPU's (the unscanned model trained on the
CPU, relative 1e-4). The ratio column is 12 layers over 2.

libtpu (v5e:2x2, torchtpu.aot.compile_for): the wall seconds of capturing
one training step on the CPU plugin and compiling its programs for the
TPU, and the programs compiled, at each depth, with and without scan.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D, HEADS, VOCAB, BATCH, BLOCK, STEPS = 128, 4, 256, 4, 64, 2


def build(layers, scanned):
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import torch
    import torchtpu
    from support.llama import Llama

    class Scanned(Llama):
        def forward(self, idx, targets=None):
            T = idx.shape[1]
            x = torchtpu.scan_layers(self.blocks, self.tok(idx), self.cos[:T], self.sin[:T])
            logits = self.head(self.norm(x))
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     targets.reshape(-1))

    torch.manual_seed(0)
    model = (Scanned if scanned else Llama)(VOCAB, d=D, layers=layers, heads=HEADS, block=BLOCK)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, VOCAB, (BATCH, BLOCK), generator=g),
             torch.randint(0, VOCAB, (BATCH, BLOCK), generator=g)) for _ in range(STEPS)]
    return model, data


def make_optimizer(name, params):
    import torch

    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3)
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, foreach=False)
    return None


def train(model, data, device, compiled=False, optimizer="adamw"):
    import torch

    model = model.to(device)
    opt = make_optimizer(optimizer, model.parameters())
    fwd = torch.compile(model, backend="tpu") if compiled else model
    losses = []
    for x, y in data:
        loss = fwd(x.to(device), y.to(device))
        loss.backward()
        if opt is not None:
            opt.step()
            opt.zero_grad()
        losses.append(loss.item())
    return losses


def one(mode, layers, scanned, optimizer):
    import torch
    import torchtpu
    import torchtpu.dynamo

    torchtpu.dynamo.register()
    model, data = build(layers, scanned)
    ref, _ = build(layers, False)
    want = train(ref, data, "cpu", optimizer=optimizer)
    if mode != "compiled":
        torchtpu.set_eager_mode(mode)
    before = torchtpu.debug.metrics()["compiles"]
    t0 = time.perf_counter()
    got = train(model, data, "tpu", compiled=mode == "compiled", optimizer=optimizer)
    seconds = time.perf_counter() - t0
    programs = torchtpu.debug.metrics()["compiles"] - before
    match = all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(got, want))
    return {"seconds": seconds, "programs": programs, "match": match, "losses": got, "cpu": want}


def one_libtpu(layers, scanned, optimizer):
    import torch
    import torchtpu.aot as aot

    ok, why = aot.available()
    if not ok:
        return {"skipped": why}
    model, data = build(layers, scanned)
    x, y = data[0]
    t0 = time.perf_counter()
    opt = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD, "none": None}[optimizer]
    report = aot.compile_for(model, (x, y), topology="v5e:2x2", optimizer=opt)
    return {"seconds": time.perf_counter() - t0, "programs": len(report.programs),
            "failures": len(report.failures)}


def run_one(args, timeout):
    env = dict(os.environ, TORCHTPU_DISK_CACHE="0")
    cmd = [sys.executable, os.path.abspath(__file__), "--one", json.dumps(args)]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "TIMEOUT"}
    if p.returncode:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="2,12")
    ap.add_argument("--modes", default="strict,fused,compiled")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd", "none"])
    ap.add_argument("--no-libtpu", action="store_true")
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--one")
    a = ap.parse_args()
    if a.one:
        spec = json.loads(a.one)
        args = (spec["layers"], spec["scan"], spec["optimizer"])
        out = one_libtpu(*args) if spec["mode"] == "libtpu" else one(spec["mode"], *args)
        print(json.dumps(out))
        return
    depths = [int(n) for n in a.layers.split(",")]
    modes = a.modes.split(",") + ([] if a.no_libtpu else ["libtpu"])
    rows = []
    load0 = os.getloadavg()[0]
    for mode in modes:
        for scanned in (False, True):
            res = {n: run_one({"mode": mode, "layers": n, "scan": scanned, "optimizer": a.optimizer},
                              a.timeout) for n in depths}
            rows.append((mode, scanned, res))
            print(f"# {mode} scan={scanned}: {json.dumps(res)}", file=sys.stderr, flush=True)
    load = os.getloadavg()
    head = f"d={D}, {HEADS} heads, batch {BATCH}x{BLOCK}, optimizer {a.optimizer}, load average {load0:.2f} at the start, {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end"
    cols = " | ".join(f"{n} layers: s (programs)" for n in depths)
    print(head)
    print(f"| mode | scan | {cols} | ratio {depths[-1]}/{depths[0]} | losses = CPU |")
    print("|---|---|" + "---|" * len(depths) + "---|---|")
    for mode, scanned, res in rows:
        cells, ok = [], []
        for n in depths:
            r = res[n]
            if "error" in r or "skipped" in r:
                cells.append(r.get("error") or f"skipped ({r['skipped']})")
                continue
            cells.append(f"{r['seconds']:.1f} ({r['programs']})")
            ok.append(r.get("match", not r.get("failures")))
        first, last = res[depths[0]], res[depths[-1]]
        ratio = (f"{last['seconds'] / first['seconds']:.2f}"
                 if "seconds" in first and "seconds" in last else "-")
        same = ("yes" if ok and all(ok) else "NO") if mode != "libtpu" else \
            ("no failures" if ok and all(ok) else "FAILURES")
        print(f"| {mode} | {'yes' if scanned else 'no'} | " + " | ".join(cells) + f" | {ratio} | {same} |")


if __name__ == "__main__":
    main()
