#!/usr/bin/env bash
# Developer build into a private folder, without pip: several people (or
# agents) can build and test side by side from one source tree.
#   tools/dev_build.sh /tmp/build_me        # builds; prints the PYTHONPATH to use
#   PYTHONPATH=/tmp/build_me/pkg .venv/bin/python -m pytest tests/test_x.py
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:?usage: tools/dev_build.sh BUILD_DIR}
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=/work/venv/bin/python
cmake -S "$ROOT" -B "$BUILD" -DPython3_EXECUTABLE="$PY" -DCMAKE_BUILD_TYPE=Release >/dev/null
if ! cmake --build "$BUILD" -j "${JOBS:-2}" > "$BUILD/build.log" 2>&1; then
  grep -E "error|Error" -A3 "$BUILD/build.log" | head -40 >&2
  echo "build failed (full log: $BUILD/build.log)" >&2
  exit 1
fi
mkdir -p "$BUILD/pkg/torch_tpu"
for f in "$ROOT"/torch_tpu/*.py "$ROOT"/torch_tpu/*.def; do ln -sf "$f" "$BUILD/pkg/torch_tpu/"; done
for d in "$ROOT"/torch_tpu/*/; do ln -sfn "${d%/}" "$BUILD/pkg/torch_tpu/"; done
cp -f "$BUILD"/_C*.so "$BUILD/pkg/torch_tpu/"
echo "$BUILD/pkg"
