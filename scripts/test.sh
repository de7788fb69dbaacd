#!/usr/bin/env bash
# Sets everything up, then runs the C++ runtime/builder tests and the pytest suite.
# TORCH_TPU_TEST_ARGS adds pytest arguments; TORCH_TPU_HEAVY=1 runs the heavy tier;
# TORCH_TPU_TEST_WORKERS sets the pytest-xdist workers (default: one per core, at most 4).
#
# The other torch lines run first, so that the last line printed is the main suite's summary:
# - torch 2.14 is set up (built, with TorchTitan and SGLang) for the main suite's
#   tests that run in .venv-2.14; TORCH_TPU_TORCH214=0 leaves it out (they skip).
# - TORCH_TPU_CORE_LINES (default 2.15) lists the lines whose core subset runs
#   (scripts/test_torch_line.sh; "none" runs none). 2.14 needs no subset of its own: its build is
#   checked by the set-up above and its Dynamo, autograd and torchrun paths by the
#   TorchTitan and SGLang tests.
set -uo pipefail
cd "$(dirname "$0")/.."
rc_lines=0
# The core lines' torch wheels (5.5 GB each) unpack beside the 2.14 set-up,
# which spends most of its time on one core; their builds run later, one at a time.
torch_only=()
for line in ${TORCH_TPU_CORE_LINES:-2.15}; do
  [ "$line" = none ] || [ "$line" = 2.14 ] && continue  # 2.14's venv is the one being set up below
  bash scripts/setup.sh --torch "$line" --torch-only > "/tmp/torch_tpu_torch_$line.log" 2>&1 &
  torch_only+=($!)
done
if [ "${TORCH_TPU_TORCH214:-1}" != 0 ]; then
  args=(--torch 2.14)
  [ "${TORCH_TPU_TITAN:-1}" != 0 ] && args+=(--titan)
  [ "${TORCH_TPU_SGLANG:-1}" != 0 ] && args+=(--sglang)
  start=$(date +%s)
  bash scripts/setup.sh "${args[@]}" || rc_lines=1
  echo "[torch 2.14] set up in $(( $(date +%s) - start ))s"
  # torchvision's ops (PyPI's torchvision needs a CUDA build of torch, so they run here only).
  .venv-2.14/bin/python -m pytest -q -p no:cacheprovider -n "$(( $(nproc) < 4 ? $(nproc) : 4 ))" \
    tests/test_ops_torchvision.py 2>&1 | tail -5 | sed "s/^/[torch 2.14] /"
  [ "${PIPESTATUS[0]}" = 0 ] || rc_lines=1
fi
for pid in ${torch_only[@]+"${torch_only[@]}"}; do wait "$pid" || true; done  # a failed install shows in the set-up below
for line in ${TORCH_TPU_CORE_LINES:-2.15}; do
  [ "$line" = none ] && continue
  bash scripts/test_torch_line.sh "$line" || rc_lines=1
done
# --serving: vLLM for tests/test_serving_vllm.py (requirements-serving.txt);
# --jax: the kernel bridge for tests/test_kernels_bridge.py (requirements-jax.txt).
bash scripts/setup.sh --serving --jax || exit 1
VENV=${TORCH_TPU_VENV:-.venv}
WORKERS=${TORCH_TPU_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
# Every test's duration goes to /tmp/torch_tpu_junit.xml (the 40 longest print below).
"$VENV/bin/python" -m pytest tests -q -p no:cacheprovider --durations=40 --junitxml=/tmp/torch_tpu_junit.xml \
  -n "$WORKERS" --dist loadgroup ${TORCH_TPU_TEST_ARGS:-} 2>&1 | tee /tmp/torch_tpu_pytest.log
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && [ "$rc_lines" != 0 ] && { echo "another torch line failed its set-up or core subset (above)" >&2; rc=$rc_lines; }
exit $rc
