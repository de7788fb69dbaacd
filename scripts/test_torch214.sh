#!/usr/bin/env bash
# The second supported torch: sets up .venv-2.14 (torch 2.14.1, its own build
# folder) and runs a bounded core subset of the tests on it. The subset covers
# each layer that meets PyTorch's API: device and allocator (test_device,
# test_device_api), views and in-place (test_views), autograd + optimizers
# (test_training), one op table in every mode (test_ops_matmul), torchvision's
# detection ops (test_ops_torchvision), Dynamo/AOT
# (test_compile) and the tpu_dist backend under torchrun (test_dist_groups).
# TORCH_TPU_TITAN=0 sets up torch 2.14 without TorchTitan.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# torch 2.14.1 plus TorchTitan (tests/test_torchtitan.py) and SGLang
# (tests/test_serving_sglang.py), which the main suite runs; TORCH_TPU_TITAN=0
# or TORCH_TPU_SGLANG=0 leaves either out.
args=(--torch 2.14)
[ "${TORCH_TPU_TITAN:-1}" != 0 ] && args+=(--titan)
[ "${TORCH_TPU_SGLANG:-1}" != 0 ] && args+=(--sglang)
bash scripts/setup.sh "${args[@]}" || exit 1
WORKERS=${TORCH_TPU_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
.venv-2.14/bin/python -m pytest -q -p no:cacheprovider -n "$WORKERS" --dist loadgroup \
  tests/test_device.py tests/test_device_api.py tests/test_views.py tests/test_training.py \
  tests/test_ops_matmul.py tests/test_compile.py tests/test_dist_groups.py tests/test_ops_torchvision.py 2>&1 | tail -15 | sed 's/^/[torch 2.14] /'
rc=${PIPESTATUS[0]}
echo "[torch 2.14] core subset: exit $rc in $(( $(date +%s) - start ))s (setup included)"
exit $rc
