"""Helpers for tests that run a script in a fresh interpreter (an
environment fixed before the runtime starts, signals, long runs) and for
watchdogs that turn a hang into a failure with every thread's stack."""
import contextlib
import faulthandler
import os
import subprocess
import sys
import textwrap

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)

# Prepended to every script: if it is still running after WATCHDOG_S
# seconds it prints all threads' stacks and exits (status 1), before the
# parent's own timeout kills it without a word. tests/ goes on sys.path, as
# pytest puts it there for the tests: scripts import `support` as they do.
_PRELUDE = """\
import faulthandler, sys
faulthandler.dump_traceback_later({watchdog}, exit=True)
sys.path.insert(0, {tests!r})
"""


def run_script(code, timeout=120, **env):
    """Runs `code` (dedented) with extra environment variables; returns the
    CompletedProcess with text stdout/stderr. A hang shows as a traceback on
    stderr and a non-zero status."""
    full_env = dict(os.environ, PYTHONUNBUFFERED="1")
    full_env.update({k: str(v) for k, v in env.items()})
    script = _PRELUDE.format(watchdog=max(1, timeout - 10), tests=TESTS)
    script += textwrap.dedent(code)
    try:
        return subprocess.run([sys.executable, "-c", script], env=full_env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"script still running after {timeout} s\nstdout:\n{out[-3000:]}"
                             f"\nstderr:\n{err[-5000:]}") from None


def check(result, expect="ok"):
    """Asserts a run_script result exited 0 and printed `expect`; returns
    its stdout."""
    assert result.returncode == 0, (f"status {result.returncode}\nstdout:\n{result.stdout[-3000:]}"
                                    f"\nstderr:\n{result.stderr[-5000:]}")
    if expect:
        assert expect in result.stdout, result.stdout[-3000:]
    return result.stdout


@contextlib.contextmanager
def watchdog(seconds):
    """In-process: if the block takes longer than `seconds`, every thread's
    stack is printed and the process exits, so CI fails instead of hanging."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
