"""Tells the C++ runtime where PJRT plugins installed from PyPI live.

The runtime looks for plugin files (the CPU plugin, libtpu, the CUDA plugin)
under each folder of TORCH_TPU_PLUGIN_SEARCH_PATH; this sets it from sys.path
so that a plugin installed in the active environment is found.
"""
import os
import site
import sys

from . import settings


def configure():
    dirs = []
    for d in list(sys.path) + site.getsitepackages() + [site.getusersitepackages()]:
        if d and os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    dirs = settings.get("TORCH_TPU_PLUGIN_SEARCH_PATH") + dirs
    os.environ["TORCH_TPU_PLUGIN_SEARCH_PATH"] = os.pathsep.join(dirs)
