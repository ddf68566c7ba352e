#!/usr/bin/env bash
# The GPU row: one prepared run on a machine with an NVIDIA GPU, a CUDA build
# of torch and the XLA CUDA plugin (jax-cuda13-pjrt) already installed, no
# network needed. It builds torchtpu against that machine's torch, runs the
# demo, the op tests and a bf16 8192^3 matmul (torchtpu vs JAX vs torch.cuda
# on the same GPU), and writes everything under $OUT (default
# ./device_check_out): summary.md (the figures the README shows), plus one
# log per step.
#
#     benchmarks/device_check.sh                 # on the GPU machine
#     PYTHON=.venv/bin/python benchmarks/device_check.sh --cpu   # rehearsal here:
#                                                # CPU plugin, small sizes
#
# Each step has its own time limit, so a hang in one still leaves the others'
# results; the limits add up to under 11 minutes (a typical run: 4-6), the
# most important figures first.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device_check_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
CPU_REHEARSAL=0
[ "${1:-}" = "--cpu" ] && CPU_REHEARSAL=1
JOBS=$(nproc)
SUMMARY="$OUT/summary.md"
: >"$SUMMARY"

note() { echo "$*" | tee -a "$SUMMARY"; }
step() {  # step NAME LIMIT_S COMMAND...: runs it, logs it, notes its status
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  note "- $name: rc $rc, $((SECONDS - start)) s (log: $name.log)"
  return $rc
}

note "# torchtpu device check ($(date -u +%Y-%m-%dT%H:%MZ))"
note ""
note "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
note "- $("$PY" -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda {torch.version.cuda}")' 2>&1)"

if [ "$CPU_REHEARSAL" = 1 ]; then
  unset TORCHTPU_PLUGIN
  N=512
else
  # The plugin the engine's discovery finds on this machine (jax_plugins/
  # xla_cuda13 when an NVIDIA driver is present); named here for the log.
  PLUGIN=$("$PY" -c 'import os, jax_plugins.xla_cuda13 as p; print(os.path.join(os.path.dirname(p.__file__), "xla_cuda_plugin.so"))' 2>/dev/null)
  note "- CUDA plugin: ${PLUGIN:-not installed} ($("$PY" -c 'from importlib.metadata import version; print("jax-cuda13-pjrt", version("jax-cuda13-pjrt"))' 2>/dev/null))"
  N=8192
fi

# Build in place against this machine's torch (no pip, no network).
step build 200 sh -c "make -s -j$JOBS core && MAX_JOBS=$JOBS '$PY' setup.py -q build_ext --inplace" \
  || { note "build failed: see build.log"; exit 1; }
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

step platform 60 "$PY" -c 'import torch, torchtpu; print(torchtpu.platform()); print((torch.ones(4, device="tpu") * 2).cpu())'
note "  $(head -1 "$OUT/platform.log")"

step matmul 90 "$PY" benchmarks/gpu_matmul.py --n "$N" --iters 20 --json "$OUT/matmul.json"
sed 's/^/  /' "$OUT/matmul.log" | tee -a "$SUMMARY"

step demo 90 "$PY" -m torchtpu.demo --steps 20
note "  $(grep -E 'first step|^loss' "$OUT/demo.log" | tail -2 | tr '\n' ' ')"

if "$PY" -c 'import pytest' 2>/dev/null; then
  step op_tests 200 "$PY" -m pytest -q -p no:cacheprovider \
    tests/runtime/test_device.py tests/ops/test_ops_elementwise.py tests/ops/test_ops_reduce.py \
    tests/ops/test_ops_nn.py tests/ops/test_ops_matrix.py tests/models/test_training.py tests/ops/test_autocast.py
  note "  $(tail -1 "$OUT/op_tests.log")"
else
  note "- op_tests: pytest is not installed here"
fi

