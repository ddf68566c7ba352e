"""Code the tests share with the benchmarks: workloads, models and their
checks that tests run in short and benchmarks/ runs at full length.

tests/ never import benchmarks/ (tools/check_layering.py), so what both
use lives here and the scripts in benchmarks/ are command-line front ends
that import it (they put tests/ on sys.path). The tests import it as
`support` (pytest puts tests/ on sys.path; _proc.run_script does the same
for its scripts).
"""
