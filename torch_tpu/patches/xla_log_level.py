"""XLA's plugins log warnings and errors only, unless the user chose.

XLA's PJRT plugins log an INFO line to stderr for every client they create;
TF_CPP_MIN_LOG_LEVEL (read by XLA's logging when the plugin loads) defaults
to 1 (warnings and up) here. A value already in the environment is kept.
Installed before the extension loads a plugin.
"""
from .record import EnvironmentDefault, Patch

NAME = "xla_log_level"
VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
_DEFAULT = EnvironmentDefault(VARIABLE, lambda: "1")
install, installed = _DEFAULT.install, _DEFAULT.installed

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
