"""libtpu's compile of one training step's programs, fused mode against
torch.compile: the LLaMA-style step of scan_layers.py (d=128, AdamW) at
2 and 12 layers, run once on the CPU plugin with TORCHTPU_DUMP_DIR set (a
fresh process per cell, disk cache off), then every fused window and every
program of 20 KB or more (the graphs; not the one-op fills) compiled for v5e:2x2
through torchtpu.aot, one at a time.

    .venv/bin/python benchmarks/scan/step_programs_libtpu.py [--layers 2,12]

Prints per cell each program's StableHLO size, op count, libtpu compile
seconds and temporary HBM, and the sum.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

STEP = r"""
import sys, torch
sys.path.insert(0, {here!r})
import scan_layers as sl
import torchtpu
layers, mode = int(sys.argv[1]), sys.argv[2]
model, data = sl.build(layers, False)
model = model.to("tpu")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

def step(x, y):
    loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss

if mode == "compiled":
    step = torch.compile(step, backend="tpu")
x, y = data[0]
print(float(step(x.to("tpu"), y.to("tpu"))))
"""


def cell(layers, mode, topology):
    import torchtpu.aot as aot

    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        os.mkdir(dump)
        env = dict(os.environ, TORCHTPU_DISK_CACHE="0", TORCHTPU_DUMP_DIR=dump,
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TORCHTPU_EAGER_MODE="fused" if mode == "fused" else "strict")
        p = subprocess.run([sys.executable, "-c", STEP.format(here=HERE), str(layers), mode],
                           env=env, capture_output=True, text=True)
        if p.returncode:
            print(f"{mode} {layers} layers: FAILED\n{p.stderr[-2000:]}")
            return
        programs = [q for q in aot._read_dir(dump)
                    if len(q[1]) >= 20000 or q[0].startswith("fused_window")]
        total = 0.0
        print(f"{mode}, {layers} layers:")
        for name, text, runs in programs:
            t0 = time.perf_counter()
            rep = aot.compile_programs([(name, text, runs)], topology=topology)
            dt = time.perf_counter() - t0
            total += dt
            ops = sum(collections.Counter(re.findall(r"stablehlo\.([a-z_]+)", text)).values())
            temp = rep.programs[0].temp_bytes if rep.programs else -1
            print(f"  {name.split('-')[0][:36]:36s} {len(text) // 1024:5d} KB {ops:5d} ops "
                  f"{dt:6.2f} s  temp {temp / 2**20:6.2f} MiB"
                  + (f"  FAILED: {rep.failures[0][1][:200]}" if rep.failures else ""))
        print(f"  sum: {total:.2f} s for {len(programs)} programs", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default="2,12")
    ap.add_argument("--modes", default="fused,compiled")
    ap.add_argument("--topology", default="v5e:2x2")
    a = ap.parse_args()
    import torchtpu.aot as aot

    ok, why = aot.available()
    if not ok:
        raise SystemExit(f"libtpu not available: {why}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    for layers in [int(v) for v in a.layers.split(",")]:
        for mode in a.modes.split(","):
            cell(layers, mode, a.topology)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
