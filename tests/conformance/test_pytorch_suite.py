"""A fast, representative part of PyTorch's own device-generic test files, on tpu.

The tests named in tests/pytorch_suite/ci_tests.txt (quick tests of each file
that pass in the full run, docs/pytorch_suite.md) run through the same runner
as the full suite: PyTorch's test files from Debian's source package, one
pytest worker per file, the CPU fallback off. Every one of them must pass (or
skip, as it does on this machine); a failure names the test and its error.
"""
import os
import subprocess
import sys
import urllib.error

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)

from pytorch_suite import run  # noqa: E402


@pytest.fixture(scope="module")
def test_dir():
    try:
        return run.download()
    except (urllib.error.URLError, OSError) as e:
        pytest.skip(f"PyTorch's source package could not be fetched ({run.SOURCE_DESCRIPTION}): {e}")


def test_ci_subset_passes(test_dir, tmp_path):
    out = tmp_path / "suite.json"
    p = subprocess.run([sys.executable, os.path.join(TESTS, "pytorch_suite", "run.py"),
                        "--src", test_dir, "--ids", run.CI_IDS, "--one-worker", "--out", str(out),
                        "--timeout", "60"],
                       capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-3000:]
    n = sum(1 for line in open(run.CI_IDS) if line.strip() and not line.startswith("#"))
    assert n >= 80
