"""Where a training step's time goes in each mode: host time issuing the
step's ops, device time of the programs it runs, programs and windows per
step, and host syncs, side by side for strict, fused and compiled.

    .venv/bin/python benchmarks/fused_breakdown.py [--layers 4] [--dim 256] [--rounds 5]

The model is benchmarks/llama.py's (vocab 512, 8x128 tokens, AdamW), one
process: the three modes alternate per round, so load hits them alike, and
each round's ratios (fused's step rate against strict's and compiled's in
the same round) are reported with their median and range. Compiled mode
trains its own copy of the model and optimizer, seeded alike: Dynamo wraps
the optimizer whose step it traces, and the eager modes' optimizer stays
untouched (their windows and programs are the same before and after).
Per mode (medians over rounds):

- step: wall time per step of a round of --steps steps, each ending with
  a host read of the loss, from a synchronized device to a synchronized
  device;
- issue: time until the step's last op returned (loss.item() not yet
  called): Python, autograd, dispatch, the glue and recording (fused) or
  enqueueing (strict: programs may run inline meanwhile); per op: issue
  divided by the ATen ops strict mode runs;
- device: the time the device ran the programs the step launched, from the
  engine's own timing (torch.profiler's tpu track; where programs are
  launched while others run, each moment counted once), and how many;
- windows (fused): windows per step, ops per window, and why they ended;
- faults: the process's minor page faults per step (getrusage), and its
  kernel (system) CPU time per step: a program whose temporaries the
  plugin maps afresh at each run pays for them here;
- CPU: the process's CPU time per step (user and system, every thread:
  the plugin's, which run the programs, and the host's), the calling
  thread's share of it (Python, dispatch, recording), and the cores' idle
  time (cores x step - CPU): on the CPU plugin host and programs share
  the cores, so host time a mode adds slows its programs too; and the
  CPU time by thread (the plugin's threads, tf_XLAEigen and its unnamed
  ones, run the programs).

Then the floor every mode shares: the plugin's threads' CPU per step
divided by the cores is the shortest step its programs allow on this
machine (the least of the three modes'), and each mode's step against it;
and the step's matrix-multiply work (torch.utils.flop_counter over the
same model's forward and backward on the CPU) at the rate the plugin
multiplies 1024x1024 matrices here, per core-second of its threads' CPU.
"""
import argparse
import os
import resource
import statistics
import sys
import time

import torch

import torchtpu
import torchtpu.dynamo  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from steady import training_step  # noqa: E402

CORES = len(os.sched_getaffinity(0))
TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu():
    """CPU seconds so far by thread name (/proc): the calling thread
    ("calling"), PyTorch's autograd thread (pt_autograd_0), the engine's
    compile threads (ttpu_compile), the plugin's Eigen threads
    (tf_XLAEigen), and the plugin's unnamed threads ("plugin other": they
    launch programs and run parts of them; every other thread of this
    process has a name)."""
    by = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            if int(tid) == os.getpid():
                name = "calling"
            elif name == "python":
                name = "plugin other"
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        by[name] = by.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return by


def plugin_cpu(by):
    """The CPU seconds of a by-thread-name map (thread_cpu, or a
    difference of two) that the plugin's threads, which run the programs,
    spent."""
    return sum(v for k, v in by.items() if k.startswith("tf_XLA") or k == "plugin other")


def device_time(fn):
    """Run fn() under torch.profiler; return (seconds of tpu program time,
    programs launched, the four longest)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn()
    programs = tpu_events(prof)
    spans = [(e.time_range.start, e.time_range.end) for e in programs]
    each = [(e.name[:40], e.time_range.elapsed_us() / 1e6) for e in programs]
    return busy_us(spans) / 1e6, len(spans), sorted(each, key=lambda p: -p[1])[:4]


def tpu_events(prof):
    """The programs on a torch.profiler run's tpu track."""
    return [e for e in prof.events()
            if getattr(e, "device_type", None) == torch.autograd.DeviceType.PrivateUse1]


def busy_us(spans):
    """The time covered by (start, end) spans in microseconds, each moment
    once: programs launched while others run overlap on the profiler's
    track, and their sum would exceed the time the device was busy."""
    total, until = 0.0, None
    for start, end in sorted(spans):
        if until is None or start >= until:
            total += end - start
            until = end
        elif end > until:
            total += end - until
            until = end
    return total


def step_matmul_flops(d, layers):
    """Matrix-multiply FLOPs of one training step of the model: forward
    and backward on the CPU, counted by torch.utils.flop_counter (the
    optimizer multiplies no matrices)."""
    from torch.utils.flop_counter import FlopCounterMode

    from llama import Llama

    torch.manual_seed(0)
    model = Llama(512, d=d, layers=layers)
    x = torch.randint(0, 512, (8, 128))
    with FlopCounterMode(display=False) as counter:
        model(x, x).backward()
    return counter.get_total_flops()


def plugin_matmul_rate(n=1024, reps=20):
    """FLOPs per CPU-second of the plugin's threads for an n x n matrix
    product on tpu (strict mode, one program per product)."""
    a = torch.randn(n, n, device="tpu")
    b = torch.randn(n, n, device="tpu")
    with torchtpu.set_eager_mode("strict"):
        for _ in range(3):
            (a @ b).sum().item()
        torch.tpu.synchronize()
        c0 = thread_cpu()
        for _ in range(reps):
            c = a @ b
        c.sum().item()
        torch.tpu.synchronize()
        c1 = thread_cpu()
    cpu = plugin_cpu({k: v - c0.get(k, 0.0) for k, v in c1.items()})
    return 2 * n ** 3 * reps / max(cpu, 1e-9)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args(argv)

    step, x, y = training_step(d=a.dim, layers=a.layers)
    compiled = torch.compile(training_step(d=a.dim, layers=a.layers)[0], backend="tpu")
    modes = ("strict", "fused", "compiled")

    def one(mode, steps):
        """A round of `steps` steps from a synchronized device to a
        synchronized device: (wall per step, issue per step, counters)."""
        torch.tpu.synchronize()
        m0 = torchtpu.debug.metrics()  # (synchronizes too)
        issue = 0.0
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        h0 = time.thread_time()
        c0 = thread_cpu()
        t0 = time.perf_counter()
        with torchtpu.set_eager_mode("strict" if mode == "compiled" else mode):
            for _ in range(steps):
                ts = time.perf_counter()
                loss = compiled(x, y) if mode == "compiled" else step(x, y)
                issue += time.perf_counter() - ts
                loss.item()
            torch.tpu.synchronize()
        wall = time.perf_counter() - t0
        host = time.thread_time() - h0
        c1 = thread_cpu()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        m1 = torchtpu.debug.metrics()
        d = {k: (m1[k] - m0[k]) / steps for k in ("executions", "fused_windows", "fused_ops")}
        d["faults"] = (r1.ru_minflt - r0.ru_minflt) / steps
        d["sys"] = (r1.ru_stime - r0.ru_stime) / steps
        d["cpu"] = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / steps
        d["host"] = host / steps
        d["idle"] = CORES * wall / steps - d["cpu"]
        d["threads"] = {k: (v - c0.get(k, 0.0)) / steps for k, v in c1.items() if v - c0.get(k, 0.0) > 0}
        d["ends"] = {k: (v - m0["fused_window_ends"].get(k, 0)) / steps
                     for k, v in m1["fused_window_ends"].items() if v - m0["fused_window_ends"].get(k, 0)}
        return wall / steps, issue / steps, d

    rows = {m: [] for m in modes}
    dev = {}
    for mode in modes:  # warm-up: every program compiled
        one(mode, 3)
    for _ in range(a.rounds):
        for mode in modes:
            rows[mode].append(one(mode, a.steps))
    for mode in modes:
        if mode == "compiled":
            dev[mode] = device_time(lambda: (compiled(x, y).item(), torch.tpu.synchronize()))
        else:
            def f(mode=mode):
                with torchtpu.set_eager_mode(mode):
                    step(x, y).item()
                torch.tpu.synchronize()
            dev[mode] = device_time(f)
    # ATen ops per step as the engine sees them: strict mode runs one
    # program per op.
    ops = rows["strict"][-1][2]["executions"]

    def med(mode, key):
        return statistics.median(r[2][key] for r in rows[mode]) * 1e3

    print(f"LLaMA-style d={a.dim}, {a.layers} layers, 8x128 tokens, AdamW; load average "
          f"{os.getloadavg()[0]:.2f}; medians of {a.rounds} rounds")
    print(f"| mode | step ms | issue ms | issue us/op | device ms (programs) | windows/step | ends "
          f"| faults/step | kernel ms/step | CPU ms/step (calling thread) | idle core-ms/step ({CORES} cores) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for mode in modes:
        wall = statistics.median(r[0] for r in rows[mode]) * 1e3
        issue = statistics.median(r[1] for r in rows[mode]) * 1e3
        d = rows[mode][-1][2]
        win = f'{d["fused_windows"]:.0f}' if mode == "fused" else "-"
        ends = ", ".join(f"{k} {v:.0f}" for k, v in d["ends"].items()) if mode == "fused" else "-"
        print(f"| {mode} | {wall:.1f} | {issue:.1f} | {issue * 1e3 / max(ops, 1):.1f} | "
              f"{dev[mode][0] * 1e3:.1f} ({dev[mode][1]}) | {win} | {ends} | "
              f"{d['faults']:.0f} | {d['sys'] * 1e3:.0f} | "
              f"{med(mode, 'cpu'):.0f} ({med(mode, 'host'):.0f}) | {med(mode, 'idle'):.0f} |")
    for mode in modes:
        names = sorted({k for r in rows[mode] for k in r[2]["threads"]})
        by = {k: sum(r[2]["threads"].get(k, 0.0) for r in rows[mode]) / len(rows[mode]) * 1e3 for k in names}
        print(f"{mode}: CPU ms/step by thread (mean of rounds; clock ticks of {1e3 / TICK:.0f} ms) " +
              ", ".join(f"{k} {v:.1f}" for k, v in sorted(by.items(), key=lambda p: -p[1])))
    for mode in modes:
        print(f"{mode}: longest programs " + ", ".join(f"{n} {t * 1e3:.1f} ms" for n, t in dev[mode][2]))
    print(f"ops per step (strict executions): {ops}; fused ops recorded: {rows['fused'][-1][2]['fused_ops']}")
    for other in ("strict", "compiled"):
        ratios = sorted(o[0] / f[0] for f, o in zip(rows["fused"], rows[other]))
        print(f"fused's step rate against {other}'s, round by round: median {statistics.median(ratios):.2f}x, "
              f"range {ratios[0]:.2f}-{ratios[-1]:.2f}x ({len(ratios)} rounds)")

    def xla_cpu(mode):
        return statistics.median(plugin_cpu(r[2]["threads"]) for r in rows[mode]) * 1e3

    # Strict mode runs its smallest programs on the calling thread, so its
    # share counts a little low; the least of the three is the floor.
    own = {m: xla_cpu(m) / CORES for m in modes}
    floor = min(own.values())
    print(f"floor: the plugin's threads' CPU / {CORES} cores, ms/step: " +
          ", ".join(f"{m} {own[m]:.0f}" for m in modes) +
          f"; each step against the least ({floor:.0f}): " +
          ", ".join(f"{m} {statistics.median(r[0] for r in rows[m]) * 1e3 / max(floor, 1e-9):.2f}x" for m in modes))
    flops = step_matmul_flops(a.dim, a.layers)
    rate = plugin_matmul_rate()
    print(f"matmul work: {flops / 1e9:.1f} GFLOP a step; the plugin multiplies 1024x1024 matrices at "
          f"{rate / 1e9:.0f} GFLOP per core-second here: {flops / rate * 1e3:.0f} core-ms a step, "
          f"{flops / rate / CORES * 1e3:.0f} ms on {CORES} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
