#!/usr/bin/env bash
# The project's entry point on a fresh machine. Does all set-up itself
# (virtualenv, pinned dependencies, build), then:
#   ./run.sh demo    train the demo GPT on device tpu, checked against CPU
#   ./run.sh test    the whole test suite (C tests, then pytest)
#   ./run.sh setup   only the set-up
set -euo pipefail
cd "$(dirname "$0")"

setup() {
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  if ! .venv/bin/python -c 'import torch, xla_plugins.xla_cpu_pjrt, pytest, ninja' 2>/dev/null \
     || [ requirements.txt -nt .venv/.deps-stamp ]; then
    .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
    touch .venv/.deps-stamp
  fi
  # Incremental: make rebuilds only changed C files, ninja only changed C++.
  .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . \
    >.venv/build.log 2>&1 || { cat .venv/build.log; exit 1; }
}

case "${1:-}" in
  setup)
    setup
    ;;
  demo)
    setup
    shift
    exec .venv/bin/python -m torchtpu.demo "$@"
    ;;
  test)
    setup
    shift
    make -s -j2 ctest
    if [ $# -gt 0 ]; then
      exec .venv/bin/python -m pytest -q tests "$@"
    fi
    # The XLA CPU plugin maps ~4 memory regions per compiled program and a
    # process keeps every program it compiled (the engine does not evict
    # executables yet), so the whole suite in one process would run into the
    # kernel's per-process limit (vm.max_map_count, 65530) at ~17,000
    # programs. It runs as three pytest processes, then one summary line.
    rc=0
    log=$(mktemp)
    start=$(date +%s)
    for part in "$(ls tests/test_*.py | grep -v '^tests/test_ops_')" \
                "$(ls tests/test_ops_[a-l]*.py)" "$(ls tests/test_ops_[m-z]*.py)"; do
      # shellcheck disable=SC2086  # one path per word
      # (pipefail: the pipeline fails when pytest does)
      .venv/bin/python -m pytest -q $part 2>&1 | tee -a "$log" || rc=1
    done
    .venv/bin/python - "$log" "$(( $(date +%s) - start ))" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
totals = {}
for line in text.splitlines():
    if re.match(r"^=*\s*\d+ \w+.* in [\d.]+s", line.strip("= ")) or re.search(r" in [\d.]+s( \(.*\))? =*$", line):
        for n, what in re.findall(r"(\d+) (passed|failed|xfailed|xpassed|skipped|errors?|deselected)", line):
            totals[what] = totals.get(what, 0) + int(n)
order = ["failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "error", "errors"]
parts = [f"{totals[k]} {k}" for k in order if totals.get(k)]
print(f"{', '.join(parts) or 'no tests ran'} in {sys.argv[2]}s (3 pytest processes)")
PY
    rm -f "$log"
    exit $rc
    ;;
  *)
    echo "usage: $0 demo|test|setup" >&2
    exit 2
    ;;
esac
