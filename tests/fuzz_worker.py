"""The fuzzer's worker process, and the parent's handle on it.

Risky calls never run in the test process: the parent (tests/conformance/test_fuzz.py,
tests/fuzz_long.py) sends each case as one JSON line to a long-lived worker
(`python tests/fuzz_worker.py`), which runs it on the CPU and on tpu
(fuzz_cases.run_case) and answers with one JSON line on its protocol pipe
(the stdout it was started with; the process's own stdout goes to stderr so
stray prints cannot corrupt the protocol). A worker that dies (segfault,
abort) or does not answer within the timeout (a hang) is killed; the case
becomes a "crash" or "hang" result carrying the tail of the worker's
stderr, and the next case gets a fresh worker.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from conformance import sweep  # noqa: E402

CASE_TIMEOUT = float(os.environ.get("TORCHTPU_FUZZ_TIMEOUT", "90"))
# A process keeps every program it compiled (and the CPU plugin maps
# memory for each); a fresh worker after this many cases stays far from
# the kernel's per-process mapping limit.
CASES_PER_WORKER = 400


class FuzzWorker(sweep.Worker):
    def __init__(self, timeout=CASE_TIMEOUT):
        self.log = tempfile.TemporaryFile(mode="w+")
        super().__init__(0, self.log)
        self.timeout = timeout
        self.catalog = None
        self.cases = 0
        self.starts = 0

    def start(self):
        env = dict(os.environ)
        env.pop("TORCHTPU_CPU_FALLBACK", None)
        env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fuzz_worker.py")], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True, bufsize=1, start_new_session=True)
        self.buf = ""
        self.cases = 0
        self.starts += 1
        msg = self.read(600)
        if not isinstance(msg, dict) or msg.get("event") != "ready":
            raise RuntimeError(f"fuzz worker did not start: {msg}: {self._log_tail(0)}")
        self.catalog = msg["catalog"]

    def _log_tail(self, since, n=3000):
        self.log.flush()
        self.log.seek(since)
        text = self.log.read()
        self.log.seek(0, os.SEEK_END)
        return text[-n:]

    def run(self, case):
        """The worker's answer to `case`: dict(status, detail, seconds)."""
        if self.proc is None or self.proc.poll() is not None or self.cases >= CASES_PER_WORKER:
            self.kill()
            self.start()
        self.cases += 1
        self.log.seek(0, os.SEEK_END)
        since = self.log.tell()
        t0 = time.monotonic()
        try:
            self.proc.stdin.write(json.dumps(case) + "\n")
            self.proc.stdin.flush()
            msg = self.read(self.timeout)
        except BrokenPipeError:
            msg = None
        if isinstance(msg, dict):
            return msg
        rc = self.kill()
        if msg == "timeout":
            status, what = "hang", f"no answer within {self.timeout:g} s (worker killed)"
        else:
            status, what = "crash", f"worker died (exit status {rc})"
        return dict(status=status, detail=f"{what}; its stderr ends:\n{self._log_tail(since)}",
                    seconds=round(time.monotonic() - t0, 3))

    def close(self):
        self.kill()
        self.log.close()


def reproducer(case):
    return f".venv/bin/python tests/fuzz_long.py --case '{json.dumps(case)}'"


def main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import torch
    import fuzz_cases
    torch.ones(1, device="tpu").cpu()

    def send(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    send({"event": "ready", "catalog": fuzz_cases.catalog()})
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        print(f"case {line.strip()}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            status, detail = fuzz_cases.run_case(case)
        except Exception:  # noqa: BLE001  a bug of the fuzzer itself: report it as one
            status, detail = "runner_error", traceback.format_exc()[-3000:]
        send(dict(status=status, detail=detail, seconds=round(time.perf_counter() - t0, 3)))


if __name__ == "__main__":
    main()
