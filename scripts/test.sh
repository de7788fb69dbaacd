#!/usr/bin/env bash
# Sets everything up, then runs the C++ runtime/builder tests and the pytest suite.
# TORCH_TPU_TEST_ARGS adds pytest arguments; TORCH_TPU_HEAVY=1 runs the heavy tier;
# TORCH_TPU_TEST_WORKERS sets the pytest-xdist workers (default: one per core, at most 4).
# TORCH_TPU_TORCH214=0 skips the torch 2.14 core subset (scripts/test_torch214.sh),
# which runs first so that the last line printed is the main suite's summary.
set -uo pipefail
cd "$(dirname "$0")/.."
rc214=0
if [ "${TORCH_TPU_TORCH214:-1}" != 0 ]; then
  bash scripts/test_torch214.sh; rc214=$?
fi
# --serving: vLLM for tests/test_serving_vllm.py (requirements-serving.txt);
# --jax: the kernel bridge for tests/test_kernels_bridge.py (requirements-jax.txt).
bash scripts/setup.sh --serving --jax || exit 1
VENV=${TORCH_TPU_VENV:-.venv}
WORKERS=${TORCH_TPU_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
"$VENV/bin/python" -m pytest tests -q -p no:cacheprovider --durations=15 -n "$WORKERS" --dist loadgroup ${TORCH_TPU_TEST_ARGS:-} 2>&1 | tee /tmp/torch_tpu_pytest.log
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && [ "$rc214" != 0 ] && { echo "the torch 2.14 core subset failed (above)" >&2; rc=$rc214; }
exit $rc
