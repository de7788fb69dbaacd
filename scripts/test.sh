#!/usr/bin/env bash
# Sets everything up, then runs the C++ runtime/builder tests and the pytest suite.
# TORCH_TPU_TEST_ARGS adds pytest arguments; TORCH_TPU_HEAVY=1 runs the heavy tier;
# TORCH_TPU_TEST_WORKERS sets the pytest-xdist workers (default: one per core, at most 4).
set -uo pipefail
cd "$(dirname "$0")/.."
# --serving: vLLM for tests/test_serving_vllm.py (requirements-serving.txt).
bash scripts/setup.sh --serving || exit 1
VENV=${TORCH_TPU_VENV:-.venv}
WORKERS=${TORCH_TPU_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
"$VENV/bin/python" -m pytest tests -q -p no:cacheprovider --durations=15 -n "$WORKERS" --dist loadgroup ${TORCH_TPU_TEST_ARGS:-} 2>&1 | tee /tmp/torch_tpu_pytest.log
rc=${PIPESTATUS[0]}
exit $rc
