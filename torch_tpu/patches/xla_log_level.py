"""XLA's plugins log warnings and errors only, unless the user chose.

XLA's PJRT plugins log an INFO line to stderr for every client they create;
TF_CPP_MIN_LOG_LEVEL (read by XLA's logging when the plugin loads) defaults
to 1 (warnings and up) here. A value already in the environment is kept.
Installed before the extension loads a plugin.
"""
import os

from .record import Patch

NAME = "xla_log_level"
VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
_installed = False


def install():
    global _installed
    os.environ.setdefault(VARIABLE, "1")
    _installed = True


def installed():
    return _installed and VARIABLE in os.environ


PATCH = Patch(
    name=NAME,
    targets=(f"os.environ[{VARIABLE}]",),
    reason="XLA's PJRT plugins log an INFO line per client to stderr; keep warnings and errors.",
    issue=None,
    versions={"lammps-jax-pjrt-cpu": ("0.11.2",)},
    when="import torch_tpu, before the extension loads",
    scope="the process's environment, only when the variable is unset",
    install=install,
    installed=installed,
)
