"""Many distinct shapes in one process: the program cache stays bounded.

    .venv/bin/python benchmarks/program_cache.py [--shapes 20000] [--every 2000]

The run and its checks are tests/support/program_cache.py (the tests run a
short version); see its docstring, or --help.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from support.program_cache import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
