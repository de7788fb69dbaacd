"""Builds torch_tpu's C++ core with CMake against the installed torch.

The CMake build folder is build/cmake in the source tree, so that rebuilds are
incremental (and ccache, when present, makes clean rebuilds cheap).
"""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _settings():
    """torch_tpu/settings.py, loaded by path (it needs only the standard library)."""
    spec = importlib.util.spec_from_file_location("torch_tpu_settings", ROOT / "torch_tpu" / "settings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        settings = _settings()
        build_dir = ROOT / settings.get("TORCH_TPU_BUILD_DIR")  # an absolute path stays as it is
        build_dir.mkdir(parents=True, exist_ok=True)
        jobs = str(settings.get("TORCH_TPU_BUILD_JOBS") or os.cpu_count() or 2)
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        subprocess.check_call(
            ["cmake", "-S", str(ROOT), "-B", str(build_dir), f"-DPython3_EXECUTABLE={sys.executable}",
             "-DCMAKE_BUILD_TYPE=Release"], env=env)
        subprocess.check_call(["cmake", "--build", str(build_dir), "-j", jobs])
        built = next(build_dir.glob("_C*.so"))
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Always copy: build/lib is shared by the builds for each torch version
        # (scripts/setup.sh --torch), and distutils' copy_file skips a source
        # older than the destination, which would ship the other version's module.
        shutil.copy2(built, dest)


setup(ext_modules=[CMakeExtension("torch_tpu._C")], cmdclass={"build_ext": CMakeBuild})
