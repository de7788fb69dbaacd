import atexit
import glob
import os
import shutil
import sys
import tempfile

# Import the built package, not the source folder: when the source tree has
# no compiled _C (an installed or tools/dev_build.sh build), drop the repo
# root that `python -m pytest` puts first on sys.path.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not glob.glob(os.path.join(_ROOT, "torch_tpu", "_C*.so")):
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _ROOT]

# Op tests must prove ops run natively: a CPU fallback is an error.
os.environ.setdefault("TORCH_TPU_FALLBACK", "error")
os.environ.setdefault("TORCH_TPU_NUM_DEVICES", "2")
# Tests name the eager mode they test (op_modes.py, the `fused` fixture, a
# subprocess's env); the rest run strict, where a program per op keeps the
# compile counts they check exact. tests/test_eager_default.py checks the
# library's default (fused) itself.
os.environ.setdefault("TORCH_TPU_EAGER_MODE", "strict")
# A fresh persistent compile cache per test session (inherited by the
# subprocesses tests start): counts of compiles stay exact, and the user's
# own cache is neither read nor filled.
_CACHE_DIR = tempfile.mkdtemp(prefix="torch_tpu_test_cache_")
os.environ["TORCH_TPU_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, True)

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_tpu  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _no_fallback():
    """Every test starts with fallback counters cleared; fallbacks raise."""
    torch_tpu.reset_fallback_ops()
    torch_tpu.set_fallback_mode(torch_tpu.settings.get("TORCH_TPU_FALLBACK"))
    yield


@pytest.fixture
def fused():
    """The test runs in fused eager mode, with fused_stats() cleared around it."""
    torch_tpu.reset_fused_stats()
    with torch_tpu.eager_mode("fused"):
        yield
    torch_tpu.reset_fused_stats()


@pytest.fixture
def allow_fallback():
    torch_tpu.set_fallback_mode("silent")
    yield
    torch_tpu.set_fallback_mode("error")


# Tests that start several processes of their own or time wall clock, marked
# for xdist's loadgroup to run one after another on one worker (two
# multi-rank TorchTitan runs side by side outgrow 24 GiB). With the pinned
# pytest 9.2 and pytest-xdist 3.8 the mark does not group: these tests run on
# either worker, and each is sized to fit beside another (the MoE test peaks
# at 7.3 GB). A fixture that must run once uses tests/run_once.py instead.
_ONE_AT_A_TIME = ("test_dist_", "test_benchmarks.py", "test_exit_after_backward.py",
                  "test_persistent_cache.py", "test_dataloader_workers.py",
                  "test_streams_events.py", "test_non_blocking.py", "test_serving_",
                  "test_torchtitan")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if os.path.basename(str(item.fspath)).startswith(_ONE_AT_A_TIME):
            item.add_marker(pytest.mark.xdist_group("one_at_a_time"))


# Files whose tests all run on one xdist worker: each has a module fixture of
# about a minute (a tuning run, Helion's worker) that tests/run_once.py
# computes once per run, so a second worker running one of their tests would
# sit waiting for it.
_SAME_WORKER_FILES = ("test_tune.py", "test_kernels_helion.py")


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (scripts/test.sh) with the files above as one work
    unit each. xdist's own loadgroup scheduler already makes every other
    test a unit of its own (the marks do not reach the node ids, above);
    the controller sees node ids only, so the files go by name."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class SameWorkerFiles(LoadGroupScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return path if os.path.basename(path) in _SAME_WORKER_FILES else super()._split_scope(nodeid)

    return SameWorkerFiles(config, log)
