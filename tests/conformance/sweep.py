"""The full conformance sweep over PyTorch's op_db, then the report.

    .venv/bin/python tests/conformance/sweep.py            # all entries, 2 workers
    .venv/bin/python tests/conformance/sweep.py --jobs 1 --ops add,sum,nn.functional.relu
    .venv/bin/python tests/conformance/sweep.py --report-only   # docs/ops.md from docs/ops.json

Each worker is a subprocess (conformance/worker.py) running entries one at
a time; an entry that takes longer than --timeout seconds, or crashes its
worker, is recorded as `timeout`/`crash` for its remaining dtypes and the
worker is restarted, so no entry can take the sweep down. The CPU fallback
is switched off in the workers: a fallback never counts as a pass.

Writes docs/ops.json (every result, machine-readable) and docs/ops.md.
With --ops, results are merged into an existing docs/ops.json.
"""
import argparse
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)

from conformance import report  # noqa: E402


class Worker:
    def __init__(self, slot, log):
        self.slot, self.log = slot, log
        self.proc = None

    def start(self):
        env = dict(os.environ)
        env.pop("TORCHTPU_CPU_FALLBACK", None)
        env["PYTHONPATH"] = TESTS + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "conformance.worker"], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True, bufsize=1, start_new_session=True)
        self.buf = ""
        msg = self.read(600)
        if not msg or msg.get("event") != "ready":
            raise RuntimeError(f"worker {self.slot} did not start: {msg}")

    def read(self, timeout):
        """One protocol message, None on EOF, "timeout" after timeout s."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while "\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return "timeout"
            chunk = os.read(fd, 65536).decode()
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split("\n", 1)
        return json.loads(line)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc:
            self.proc.wait()
            rc = self.proc.returncode
            self.proc = None
            return rc
        return None


def entry_plan(op):
    """(dtype, phase) pairs the worker will report for op."""
    import torch
    from conformance.worker import DTYPE_NAMES
    sup = op.supported_dtypes("cpu")
    out = []
    for dn in DTYPE_NAMES:
        if getattr(torch, dn) in sup:
            out.append((dn, "fwd"))
            if dn == "float32" and op.supports_autograd and torch.float32 in op.supported_backward_dtypes("cpu"):
                out.append((dn, "bwd"))
    return out


def run_slot(slot, todo, db, results, timings, timeout, lock, log_dir, progress):
    from conformance.worker import entry_name
    log = open(os.path.join(log_dir, f"worker{slot}.log"), "a")
    w = Worker(slot, log)
    w.start()
    while True:
        try:
            idx = todo.get_nowait()
        except queue.Empty:
            break
        op = db[idx]
        name = entry_name(op)
        got = {}
        t0 = time.monotonic()
        end = None
        try:
            w.proc.stdin.write(f"{idx}\n")
            w.proc.stdin.flush()
        except BrokenPipeError:
            end = ("crash", None)
        while end is None:
            left = timeout - (time.monotonic() - t0)
            msg = w.read(left) if left > 0 else "timeout"
            if msg == "timeout":
                end = ("timeout", f"no answer within {timeout:g} s (worker killed)")
                break
            if msg is None:
                end = ("crash", None)
                break
            ev = msg.pop("event")
            if ev == "result":
                msg.pop("index", None)
                got[(msg["dtype"], msg["phase"])] = msg
            elif ev == "runner_error":
                print(f"runner error on {name}:\n{msg['trace']}", file=sys.stderr)
            elif ev == "done":
                if msg.get("fallbacks"):
                    print(f"warning: {name} used the CPU fallback", file=sys.stderr)
                break
        secs = round(time.monotonic() - t0, 3)
        if end is not None:
            rc = w.kill()
            why = end[1] or f"worker died (exit status {rc})"
            for dn, ph in entry_plan(op):
                if (dn, ph) not in got:
                    got[(dn, ph)] = dict(op=name, dtype=dn, phase=ph, status=end[0], reason=why,
                                         samples=0, passed=0, seconds=0.0)
            w.start()
        with lock:
            results.extend(got.values())
            timings[name] = secs
            progress[0] += 1
            bad = [f"{k[0]}/{k[1]}:{v['status']}" for k, v in got.items() if v["status"] not in ("pass", "xfail")]
            print(f"[{progress[0]}/{progress[1]}] {name} {secs:.1f}s {' '.join(bad)}", flush=True)
    w.kill()
    log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per op_db entry")
    ap.add_argument("--ops", help="comma-separated entry names (name or name.variant); default all")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs"))
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    json_path = os.path.join(args.out, "ops.json")
    if args.report_only:
        report.write(json_path, os.path.join(args.out, "ops.md"))
        return

    from conformance.worker import entry_name, op_db
    db = op_db()
    wanted = set(args.ops.split(",")) if args.ops else None
    idxs = [i for i, op in enumerate(db) if wanted is None or entry_name(op) in wanted or op.name in wanted]
    todo = queue.Queue()
    for i in idxs:
        todo.put(i)
    results, timings, lock = [], {}, threading.Lock()
    progress = [0, len(idxs)]
    log_dir = os.path.join(ROOT, "build", "conformance")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.monotonic()
    threads = [threading.Thread(target=run_slot, args=(s, todo, db, results, timings, args.timeout, lock,
                                                       log_dir, progress))
               for s in range(max(1, min(args.jobs, len(idxs))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0

    import torch
    meta = dict(torch=torch.__version__, entries_in_op_db=len(db), wall_seconds=round(wall, 1),
                jobs=args.jobs, timeout=args.timeout, date=time.strftime("%Y-%m-%d %H:%M"))
    names_run = {entry_name(db[i]) for i in idxs}
    if wanted is not None and os.path.exists(json_path):
        with open(json_path) as f:
            old = json.load(f)
        results = [r for r in old["results"] if r["op"] not in names_run] + results
        timings = {**{k: v for k, v in old["entry_seconds"].items() if k not in names_run}, **timings}
        meta = {**old["meta"], "last_partial_run": meta}
    order = {entry_name(op): i for i, op in enumerate(db)}
    results.sort(key=lambda r: (order.get(r["op"], 1 << 30), r["dtype"], r["phase"]))
    os.makedirs(args.out, exist_ok=True)
    with open(json_path + ".tmp", "w") as f:
        json.dump(dict(meta=meta, entry_seconds=timings, results=results), f, indent=0)
    os.replace(json_path + ".tmp", json_path)
    report.write(json_path, os.path.join(args.out, "ops.md"))
    print(f"{len(idxs)} entries in {wall:.0f} s; wrote {json_path} and ops.md")


if __name__ == "__main__":
    main()
