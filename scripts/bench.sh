#!/usr/bin/env bash
# The benchmark harness in one command: sets up .venv (scripts/setup.sh) plus the
# JAX peer (benchmarks/requirements.txt), the PyTorch/XLA peer's own venv
# (benchmarks/setup_torch_xla.sh; several GB the first time, skipped with
# TORCH_TPU_BENCH_SKIP_XLA=1 and then reported missing), then runs
# benchmarks/run.py with the arguments given (e.g. --quick, --workloads mlp).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TORCH_TPU_VENV:-.venv}
bash scripts/setup.sh
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r benchmarks/requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
if [ "${TORCH_TPU_BENCH_SKIP_XLA:-0}" != 1 ]; then
  bash benchmarks/setup_torch_xla.sh || echo "bench: PyTorch/XLA setup failed; the harness reports it missing" >&2
fi
exec "$VENV/bin/python" benchmarks/run.py "$@"
