#!/usr/bin/env bash
# Sets up the separate virtual environment that benchmarks/run.py uses for the
# PyTorch/XLA peer (engine "torch_xla", run on its CPU device, PJRT_DEVICE=CPU).
#   bash benchmarks/setup_torch_xla.sh            # into benchmarks/.venv_torch_xla
#   TORCH_XLA_VENV=/some/dir bash benchmarks/setup_torch_xla.sh
# torch_xla pins its own torch, which is not the project's: the two never share
# a venv. On x86_64 PyPI's torch wheel is a CUDA build that pulls several GB of
# nvidia-* packages; they are never loaded here, only installed (checked below).
set -euo pipefail
cd "$(dirname "$0")"
VENV=${TORCH_XLA_VENV:-$PWD/.venv_torch_xla}
PY=${PYTHON:-python3}
TORCH_XLA_VERSION=${TORCH_XLA_VERSION:-2.9.0}
TORCH_VERSION=${TORCH_XLA_TORCH_VERSION:-2.9.0}   # the torch that torch_xla 2.9.0 was built against
NEED_GB=12

parent=$(dirname "$VENV"); mkdir -p "$parent"
free_gb=$(df -Pk "$parent" | awk 'NR==2 {print int($4 / 1048576)}')
if [ "$free_gb" -lt "$NEED_GB" ]; then
  echo "setup_torch_xla: only ${free_gb} GB free under $parent, need ${NEED_GB} GB (torch's CUDA wheel and its nvidia-* dependencies)" >&2
  exit 1
fi

start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
# torch first and pinned, so the resolver never picks another version for torch_xla.
$PIP install -q --disable-pip-version-check "torch==$TORCH_VERSION" 2>&1 | grep -v "^WARNING: Location" || true
$PIP install -q --disable-pip-version-check "torch_xla==$TORCH_XLA_VERSION" "torch==$TORCH_VERSION" numpy 2>&1 | grep -v "^WARNING: Location" || true
PJRT_DEVICE=CPU "$VENV/bin/python" -c "
import torch, torch_xla, torch_xla.core.xla_model as xm
x = torch.ones(2, 2, device=xm.xla_device())
assert (x + x).cpu().sum().item() == 8.0
print('torch', torch.__version__, 'torch_xla', torch_xla.__version__, 'device', xm.xla_device())
"
echo "setup_torch_xla: $VENV ready in $(( $(date +%s) - start ))s, $(du -sh "$VENV" | cut -f1) on disk"
