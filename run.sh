#!/usr/bin/env bash
# The project's entry point on a fresh machine. Does all set-up itself
# (virtualenv, pinned dependencies, build), then:
#   ./run.sh demo    train the demo GPT on device tpu, checked against CPU
#   ./run.sh test    the whole test suite (layering check, C tests, then pytest)
#   ./run.sh test-long  the long sweeps, soaks and stress runs (pytest -m long)
#   ./run.sh setup   only the set-up
#   ./run.sh wheel   set-up, then a binary wheel in dist/
#   ./run.sh check-torch VERSION   build against torch VERSION, run the quick tests
#   ./run.sh check-vision  torch 2.14.1 with torchvision 0.29.1: the
#                  detection ops and Faster R-CNN against torchvision's CPU kernels
set -euo pipefail
cd "$(dirname "$0")"

# Dependencies come from the package's own metadata (pyproject.toml, with
# the extras the tests use); constraints.txt pins every version for CI.
PIP=(.venv/bin/pip install -q --disable-pip-version-check -c constraints.txt)

setup() {
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  if [ ! -f .venv/.deps-stamp ] || [ pyproject.toml -nt .venv/.deps-stamp ] \
     || [ constraints.txt -nt .venv/.deps-stamp ] || [ setup.py -nt .venv/.deps-stamp ]; then
    # The extension builds against the venv's torch (no build isolation),
    # so torch and the build tools come first.
    "${PIP[@]}" torch setuptools wheel ninja
    "${PIP[@]}" --no-build-isolation -e ".[test,tpu,kernels]" >.venv/build.log 2>&1 \
      || { cat .venv/build.log; exit 1; }
    touch .venv/.deps-stamp
  fi
  # Incremental: make rebuilds only changed C files, ninja only changed C++.
  .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . \
    >.venv/build.log 2>&1 || { cat .venv/build.log; exit 1; }
}

# A binary wheel in dist/ for the venv's torch: installs with no compiler.
wheel() {
  rm -rf dist
  .venv/bin/pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w dist . \
    >.venv/wheel.log 2>&1 || { cat .venv/wheel.log; exit 1; }
  ls dist/*.whl
}

# The quick tests against another torch (e.g. 2.14.1): a copy of the tree
# under build/, its own venv and build, so the main venv stays as it is.
QUICK_TESTS=(tests/runtime/test_device.py tests/runtime/test_modes.py
             tests/runtime/test_packaging.py tests/runtime/test_profiler.py
             tests/ops/test_ops_elementwise.py tests/ops/test_ops_reduce.py
             tests/ops/test_ops_nn.py tests/ops/test_ops_matrix.py tests/ops/test_autocast.py
             tests/compile/test_compile.py tests/distributed/test_distributed.py
             tests/models/test_training.py tests/models/test_examples.py
             tests/project/test_api_parity.py)
# check_torch VERSION DIR [EXTRA_PACKAGES...] -- TESTS...
check_torch() {
  local version=$1 dir=$2
  shift 2
  local extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do extra+=("$1"); shift; done
  shift
  local tests=("$@")
  mkdir -p "$dir/src"
  git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$dir/src"
  cd "$dir/src"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  # torch and the packages its own metadata bounds (torch 2.11 and 2.12
  # require setuptools<82) come from that torch's requirements.
  grep -v -E '^(torch|setuptools)==' ../../../constraints.txt >constraints.txt
  "${PIP[@]}" "torch==$version" "${extra[@]}" setuptools wheel ninja
  # Verbose, so the compilers' warnings reach the log.
  .venv/bin/pip install -v --disable-pip-version-check -c constraints.txt --no-build-isolation \
    -e ".[test]" >.venv/build.log 2>&1 || { cat .venv/build.log; exit 1; }
  # Our code must build without warnings against this torch too.
  if grep "warning:" .venv/build.log; then
    echo "build warnings against torch $version" >&2
  fi
  .venv/bin/python -c 'import torch, torchtpu; print("torch", torch.__version__, "->", torchtpu.platform())'
  exec .venv/bin/python -m pytest -q "${tests[@]}"
}

case "${1:-}" in
  setup)
    setup
    ;;
  wheel)
    setup
    wheel
    ;;
  check-torch)
    [ $# -eq 2 ] || { echo "usage: $0 check-torch VERSION (e.g. 2.14.1)" >&2; exit 2; }
    check_torch "$2" "build/check-torch-$2" -- "${QUICK_TESTS[@]}"
    ;;
  check-vision)
    # torchvision's wheels need this torch (a CUDA build, several GB)
    check_torch 2.14.1 build/check-vision torchvision==0.29.1 -- tests/ops/test_ops_vision.py
    ;;
  demo)
    setup
    shift
    exec .venv/bin/python -m torchtpu.demo "$@"
    ;;
  test)
    setup
    shift
    python3 tools/check_layering.py
    make -s -j2 ctest
    # The long sweeps, soaks and stress runs are `./run.sh test-long`.
    # Pytest runs on one worker per usable core, at most 4 (whole files
    # each; most of the suite's time is one-op compiles, about one core
    # each), then the timing-sensitive tests (marked serial) alone.
    # TORCHTPU_TEST_WORKERS=1 runs everything in one pytest process.
    cores=$(nproc 2>/dev/null || echo 1)
    workers=${TORCHTPU_TEST_WORKERS:-$(( cores < 4 ? cores : 4 ))}
    if [ "$workers" -le 1 ]; then
      exec .venv/bin/python -m pytest -q -m "not long" tests "$@"
    fi
    rc=0
    .venv/bin/python -m pytest -q -n "$workers" --dist loadfile \
      -m "not long and not serial" tests "$@" || rc=$?
    .venv/bin/python -m pytest -q -m "serial and not long" tests "$@" || rc=$?
    exit "$rc"
    ;;
  test-long)
    setup
    shift
    exec .venv/bin/python -m pytest -q -m long tests "$@"
    ;;
  *)
    echo "usage: $0 demo|test|test-long|setup|wheel|check-torch VERSION|check-vision" >&2
    exit 2
    ;;
esac
