"""Stress run: many Python threads using tpu at once, every result checked.

    python benchmarks/stress_threads.py --minutes 10 [--threads 4] [--devices 2]
                                        [--modes] [--seed 0]

Each worker thread repeatedly draws a task at random and runs it on tpu and
on the CPU, comparing the results: a chain of ops on a random shape, a new
shape (a compile), an MLP training a few AdamW steps, a forward+backward,
or torch.tpu.synchronize(). With --devices N the workers spread over tpu:0
.. tpu:N-1 (TORCHTPU_NUM_DEVICES is set before the runtime starts). With
--modes one more thread switches the process-wide eager mode between
strict, fused and debug at random moments while the others work.

A watchdog fails the run when no task has finished for --stall seconds: it
prints every thread's stack and exits with status 3. A wrong result or an
exception exits with status 1. The last line is a one-line summary:

    stress: 10.0 min, 4 threads, 2 devices: 123456 ops in 9876 tasks, 0 failures, no deadlock

benchmarks/stress_threads.py is the command; tests/runtime/test_threads.py imports
the tasks from here and runs a short version.
"""
import argparse
import faulthandler
import os
import random
import sys
import threading
import time
import warnings

import torch

TOL = dict(rtol=1e-4, atol=1e-5)
TRAIN_TOL = dict(rtol=1e-3, atol=1e-4)
_SHAPES = [(4,), (3, 5), (16, 16), (7, 9), (32, 8), (2, 3, 4), (64,), (1, 1)]
_MODES = ("strict", "fused", "debug")
_new_shape = {"next": 0, "limit": 500}
_new_shape_lock = threading.Lock()


def _close(got, expected, **tol):
    torch.testing.assert_close(got.cpu(), expected, **(tol or TOL))


def task_ops(rng, device):
    """A chain of elementwise ops, a reduction and a matmul on a random
    shape; returns the number of tpu ops it ran."""
    shape = rng.choice(_SHAPES)
    g = torch.Generator().manual_seed(rng.randrange(2**31))
    a = torch.randn(shape, generator=g)
    b = torch.randn(shape, generator=g)

    def chain(x, y):
        z = torch.relu(x * y + 0.5) - torch.tanh(y)
        m = z.reshape(-1, 1) @ x.reshape(1, -1)
        return z.sum(), m.softmax(-1), z.exp().clamp(max=10)

    got = chain(a.to(device), b.to(device))
    for g_, e_ in zip(got, chain(a, b)):
        _close(g_, e_)
    return 10


def new_shape():
    """A size no earlier call has used (a compile each), for the first
    `limit` calls; after that the sizes repeat, so a long run stays within
    the process's memory-mapping limit while programs are never unloaded."""
    with _new_shape_lock:
        n = _new_shape["next"]
        _new_shape["next"] += 1
        return 1000 + n % _new_shape["limit"]


def task_compile(rng, device, size=None):
    """Ops on a shape not seen before, so each op compiles a new program."""
    size = new_shape() if size is None else size
    a = torch.linspace(-3, 3, size)
    got = ((a.to(device) * 2).sin() + 1).cumsum(0)
    _close(got, ((a * 2).sin() + 1).cumsum(0), rtol=1e-4, atol=1e-3)
    return 4


def _mlp(seed, width=16):
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.GELU(),
                                torch.nn.Linear(width, 4))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return model


def train_pair(seed, device, steps=3, width=16):
    """The same MLP trained with AdamW on tpu and on the CPU from the same
    weights and batches; returns (tpu parameters, cpu parameters)."""
    cpu = _mlp(seed, width)
    dev = _mlp(seed, width).to(device)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (cpu, dev)]
    g = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        x, y = torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)
        for model, opt, d in ((cpu, opts[0], "cpu"), (dev, opts[1], device)):
            loss = torch.nn.functional.mse_loss(model(x.to(d)), y.to(d))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return list(dev.parameters()), list(cpu.parameters())


def task_train(rng, device):
    got, expected = train_pair(rng.randrange(2**20), device)
    for g_, e_ in zip(got, expected):
        _close(g_.detach(), e_.detach(), **TRAIN_TOL)
    return 60


def task_backward(rng, device):
    """Forward and backward of an MLP; gradients compared with the CPU."""
    seed = rng.randrange(2**20)
    cpu, dev = _mlp(seed, 12), _mlp(seed, 12).to(device)
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(seed))
    for model, d in ((cpu, "cpu"), (dev, device)):
        model(x.to(d)).pow(2).mean().backward()
    for p, q in zip(dev.parameters(), cpu.parameters()):
        _close(p.grad, q.grad, **TRAIN_TOL)
    return 15


def task_sync(rng, device):
    torch.tpu.synchronize(device if rng.random() < 0.5 else None)
    return 0


TASKS = {"ops": task_ops, "compile": task_compile, "train": task_train,
         "backward": task_backward, "sync": task_sync}
WEIGHTS = {"ops": 5, "compile": 1, "train": 2, "backward": 2, "sync": 1}


def run_threads(targets, timeout, what="threads"):
    """Runs each callable on its own daemon thread and waits up to `timeout`
    seconds in all. Returns their results in order; re-raises the first
    exception; on a timeout prints every thread's stack and raises
    AssertionError (a deadlock fails instead of hanging)."""
    results = [None] * len(targets)
    errors = [None] * len(targets)

    def body(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: B036 - reported to the caller
            errors[i] = e

    threads = [threading.Thread(target=body, args=(i, fn), daemon=True, name=f"{what}-{i}")
               for i, fn in enumerate(targets)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        raise AssertionError(f"{what}: {stuck} still running after {timeout:.0f} s (deadlock?)")
    for e in errors:
        if e is not None:
            raise e
    return results


class Stress:
    """The random mix on `threads` workers over `devices` devices."""

    def __init__(self, seconds, threads=4, devices=1, modes=False, seed=0, stall=120.0):
        self.seconds, self.stall = seconds, stall
        self.devices = [f"tpu:{i % devices}" for i in range(threads)]
        self.modes, self.seed = modes, seed
        self.ops = self.tasks = 0
        self.per_task = {k: 0 for k in TASKS}
        self.failures = []
        self.mode_switches = 0
        self.last_progress = time.monotonic()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.report_every = 0

    def progress(self, elapsed):
        import torchtpu
        with open("/proc/self/maps") as f:
            maps = sum(1 for _ in f)
        m = torchtpu._C._compile_stats()
        print(f"  {elapsed / 60:5.1f} min: {self.ops} ops in {self.tasks} tasks, "
              f"{m['compiles']} compiles, {maps} memory mappings", flush=True)

    def _worker(self, index):
        rng = random.Random(self.seed * 1000 + index)
        names, weights = list(WEIGHTS), list(WEIGHTS.values())
        device = self.devices[index]
        while not self.stop.is_set():
            name = rng.choices(names, weights)[0]
            try:
                n = TASKS[name](rng, device)
            except Exception as e:  # a wrong result or an engine error
                with self.lock:
                    self.failures.append(f"{threading.current_thread().name} {name} "
                                         f"on {device}: {type(e).__name__}: {e}")
                self.stop.set()
                return
            with self.lock:
                self.ops += n
                self.tasks += 1
                self.per_task[name] += 1
                self.last_progress = time.monotonic()

    def _mode_switcher(self):
        import torchtpu
        rng = random.Random(self.seed)
        while not self.stop.wait(rng.uniform(0.05, 0.5)):
            torchtpu.set_eager_mode(rng.choice(_MODES))
            self.mode_switches += 1
        torchtpu.set_eager_mode("strict")

    def run(self):
        """Returns 0 (all good), 1 (a failure) or 3 (no progress: deadlock)."""
        workers = [threading.Thread(target=self._worker, args=(i,), daemon=True,
                                    name=f"worker-{i}") for i in range(len(self.devices))]
        if self.modes:
            workers.append(threading.Thread(target=self._mode_switcher, daemon=True,
                                            name="mode-switcher"))
        start = time.monotonic()
        for t in workers:
            t.start()
        status = 0
        next_report = start + self.report_every
        while not self.stop.wait(0.5):
            now = time.monotonic()
            if now - start >= self.seconds:
                break
            if self.report_every and now >= next_report:
                next_report += self.report_every
                self.progress(now - start)
            if now - self.last_progress > self.stall:
                print(f"stress: no task finished for {self.stall:.0f} s; stacks:", file=sys.stderr)
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                return 3
        self.stop.set()
        for t in workers:
            t.join(self.stall)
        if any(t.is_alive() for t in workers):
            print("stress: a worker did not stop; stacks:", file=sys.stderr)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            return 3
        if self.failures:
            status = 1
        torch.tpu.synchronize()
        self.elapsed = time.monotonic() - start
        return status

    def summary(self):
        ndev = len(set(self.devices))
        mix = ", ".join(f"{k} {v}" for k, v in self.per_task.items())
        modes = f", {self.mode_switches} mode switches" if self.modes else ""
        return (f"stress: {self.elapsed / 60:.1f} min, {len(self.devices)} threads, {ndev} "
                f"device{'s' if ndev > 1 else ''}: {self.ops} ops in {self.tasks} tasks "
                f"({mix}){modes}, {len(self.failures)} failures, no deadlock")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--modes", action="store_true", help="switch the eager mode at random meanwhile")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--new-shapes", type=int, default=500,
                   help="distinct sizes the compile task draws before they repeat")
    p.add_argument("--stall", type=float, default=120.0,
                   help="seconds without a finished task that count as a deadlock")
    p.add_argument("--report-every", type=float, default=60.0,
                   help="seconds between progress lines (0: none)")
    args = p.parse_args(argv)
    if args.devices > 1:
        os.environ["TORCHTPU_NUM_DEVICES"] = str(args.devices)
    _new_shape["limit"] = args.new_shapes
    warnings.filterwarnings("ignore", message=".*recompiled")  # new shapes are the point
    import torchtpu
    if torch.tpu.device_count() < args.devices:
        sys.exit(f"stress: {args.devices} devices asked for, {torch.tpu.device_count()} present "
                 "(the runtime had started before TORCHTPU_NUM_DEVICES was set)")
    before = torchtpu.debug.metrics()
    stress = Stress(args.minutes * 60, args.threads, args.devices, args.modes, args.seed, args.stall)
    stress.report_every = args.report_every
    status = stress.run()
    if status == 3:
        print(f"stress: DEADLOCK after {stress.ops} ops in {stress.tasks} tasks", flush=True)
        os._exit(3)
    for f in stress.failures:
        print("FAILURE:", f)
    after = torchtpu.debug.metrics()
    print(f"engine: {after['compiles'] - before['compiles']} compiles, "
          f"{after['executions'] - before['executions']} executions")
    line = stress.summary()
    print(line if status == 0 else line.replace("no deadlock", "FAILED"), flush=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
