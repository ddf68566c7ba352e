"""Stress run: many Python threads using tpu at once, every result checked.

    python benchmarks/stress_threads.py --minutes 10 [--threads 4] [--devices 2]
                                        [--modes] [--seed 0]

The run, its tasks and its checks are tests/support/stress_threads.py (the
tests run a short version); see its docstring, or --help.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from support.stress_threads import main  # noqa: E402

if __name__ == "__main__":
    main()
