#!/usr/bin/env bash
# The second supported torch: sets up .venv-2.14 (torch 2.14.1, its own build
# folder) and runs a bounded core subset of the tests on it. The subset covers
# each layer that meets PyTorch's API: device and allocator (test_device,
# test_device_api), views and in-place (test_views), autograd + optimizers
# (test_training), one op table in every mode (test_ops_matmul), Dynamo/AOT
# (test_compile) and the tpu_dist backend under torchrun (test_dist_groups).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# --sglang also installs SGLang into .venv-2.14 for tests/test_serving_sglang.py
# (run by the main suite); TORCH_TPU_SGLANG=0 leaves it out.
if [ "${TORCH_TPU_SGLANG:-1}" != 0 ]; then
  bash scripts/setup.sh --sglang || exit 1
else
  bash scripts/setup.sh --torch 2.14 || exit 1
fi
WORKERS=${TORCH_TPU_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
.venv-2.14/bin/python -m pytest -q -p no:cacheprovider -n "$WORKERS" --dist loadgroup \
  tests/test_device.py tests/test_device_api.py tests/test_views.py tests/test_training.py \
  tests/test_ops_matmul.py tests/test_compile.py tests/test_dist_groups.py 2>&1 | tail -15 | sed 's/^/[torch 2.14] /'
rc=${PIPESTATUS[0]}
echo "[torch 2.14] core subset: exit $rc in $(( $(date +%s) - start ))s (setup included)"
exit $rc
