"""The record each patch module declares, and the marker its replacements carry.

A patch is any change torch_tpu makes to the behaviour of PyTorch or another
library: a replaced or wrapped function, an import hook, a `py_impl`
registration on one of torch's ops, a process-wide setting of another
library, or a change to an engine's configuration. Each lives in its own
module of torch_tpu/patches/ and declares one `PATCH = Patch(...)`.
"""
import dataclasses
import os
import typing

MARKER = "__torch_tpu_patch__"


@dataclasses.dataclass(frozen=True)
class Patch:
    """What one patch changes, why, and how to install it and tell that it is.

    name: the module's name under torch_tpu/patches/.
    targets: dotted names of what changes ("torch.nn.parallel.DataParallel.__init__");
        `sys.meta_path` for an import hook, `torch.ops.aten.<op>.<overload>
        [<DispatchKey>]` for a py_impl kernel, `os.environ[NAME]` for a
        variable another library reads, `<Class>.<field>` for engine settings.
    reason: what goes wrong without it.
    issue: the upstream issue or pull request about the underlying problem,
        or None where none was found.
    versions: {library: versions it was checked on}.
    when: the moment it is installed ("import torch_tpu", or a lazier one).
    scope: which objects it changes behaviour for; tpu ones only where possible.
    install: installs it; idempotent.
    installed: True while it is in place (for a patch held only during a
        call, while that call runs; for configuration, once it was applied).
    """
    name: str
    targets: typing.Tuple[str, ...]
    reason: str
    issue: typing.Optional[str]
    versions: typing.Dict[str, typing.Tuple[str, ...]]
    when: str
    scope: str
    install: typing.Callable[[], None]
    installed: typing.Callable[[], bool]


class Status(typing.NamedTuple):
    """One row of torch_tpu.patches()."""
    name: str
    target: str
    reason: str
    issue: typing.Optional[str]
    versions: typing.Dict[str, typing.Tuple[str, ...]]
    installed: bool


def mark(fn, name):
    """Tags a replacement installed on a foreign object with its patch's name."""
    setattr(fn, MARKER, name)
    return fn


def marked(obj, name):
    """Whether obj is the replacement that patch `name` installed."""
    return getattr(obj, MARKER, None) == name


class EnvironmentDefault:
    """The install/installed pair of a patch that sets a variable another
    library reads, only where the process's environment leaves it unset.

    `value()` gives the value to set, or None to set nothing (the condition
    did not hold); a value already in the environment always wins."""

    def __init__(self, variable, value):
        self.variable = variable
        self._value = value
        self._done = False

    def install(self):
        value = self._value()
        if value is not None:
            os.environ.setdefault(self.variable, value)
        self._done = True

    def installed(self):
        return self._done and self.variable in os.environ


class AppliedByEngine:
    """The install/installed pair of a patch to an engine's configuration,
    which the engine applies itself: it asks torch_tpu's platform, and the
    platform calls the patch module's apply(), which calls applied().
    Nothing to install; installed once applied."""

    def __init__(self):
        self._applied = False

    def applied(self):
        self._applied = True

    def install(self):
        """Nothing to install: the engine's call to the platform applies the patch."""

    def installed(self):
        return self._applied
