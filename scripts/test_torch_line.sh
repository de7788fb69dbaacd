#!/usr/bin/env bash
# Another supported torch line: sets up its environment (.venv-LINE, torch
# pinned, its own build folder) and runs a bounded core subset of the tests on
# it. The subset covers each layer that meets PyTorch's API: device and
# allocator (test_device, test_device_api), views and in-place (test_views),
# autograd + optimizers (test_training), one op table in every mode
# (test_ops_matmul), Dynamo/AOT (test_compile) and the tpu_dist backend under
# torchrun (test_dist_groups).
#
#   bash scripts/test_torch_line.sh 2.15          # what scripts/test.sh runs
#   bash scripts/test_torch_line.sh 2.14 --titan  # extra setup.sh options follow the line
set -uo pipefail
cd "$(dirname "$0")/.."
LINE=${1:?usage: test_torch_line.sh 2.14|2.15 [setup.sh options]}; shift
start=$(date +%s)
bash scripts/setup.sh --torch "$LINE" "$@" || exit 1
WORKERS=${TORCH_TPU_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
".venv-$LINE/bin/python" -m pytest -q -p no:cacheprovider -n "$WORKERS" --dist loadgroup --durations=5 \
  tests/test_device.py tests/test_device_api.py tests/test_views.py tests/test_training.py \
  tests/test_ops_matmul.py tests/test_compile.py tests/test_dist_groups.py 2>&1 | tail -20 | sed "s/^/[torch $LINE] /"
rc=${PIPESTATUS[0]}
echo "[torch $LINE] core subset: exit $rc in $(( $(date +%s) - start ))s (setup included)"
exit $rc
