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
    # One pytest process: the engine keeps a bounded number of compiled
    # programs loaded (TORCHTPU_PROGRAM_CACHE_SIZE), so the suite no longer
    # runs into the kernel's per-process mapping limit.
    exec .venv/bin/python -m pytest -q tests "$@"
    ;;
  *)
    echo "usage: $0 demo|test|setup" >&2
    exit 2
    ;;
esac
