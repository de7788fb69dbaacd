"""tpu device events in torch.profiler.

Nothing to call: with ``ProfilerActivity.PrivateUse1`` among the activities,
``torch.profiler.profile`` records every tpu program (eager op, fused cluster,
compiled graph) and every host<->device copy as a device event, through the
Kineto child profiler this package registers (csrc/backend/profiler). This
module only reads what a finished profile holds. See docs/profiler.md.
"""

import torch

from . import _C

# PJRT_Extension_Type_Profiler: the plugin carries XLA's own profiler.
_PJRT_PROFILER_EXTENSION = 1


def device_events(prof):
    """The tpu device events of a finished ``torch.profiler.profile``: its
    FunctionEvents whose device type is PrivateUse1, in start order."""
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    return sorted(events, key=lambda e: e.time_range.start)


def xla_profiler_available():
    """Whether the loaded PJRT plugin offers XLA's own profiler (the PJRT
    profiler extension: libtpu and XLA's CUDA plugin do). XLA's CPU plugin
    does not; docs/profiler.md says what that means here."""
    return _PJRT_PROFILER_EXTENSION in _C._runtime_info()["extensions"]
