"""torch.tpu.Stream, Event and the current-stream functions, as torch.cuda's.

A tpu stream orders completion only: PJRT runs programs in the order of their
data dependencies and buffers never change, so work on two streams can never
read a half-written tensor. An event marks "all work enqueued on the stream so
far has completed" (csrc/backend/device/stream_events.h); waiting on an event blocks
the caller only, and a stream's wait_event blocks nobody. Both classes are
torch.Stream / torch.Event underneath, so the device-generic API
(torch.Stream(device="tpu"), torch.Event(device="tpu"), torch.accelerator)
reaches the same streams.
"""
import torch

from . import _C


def _device_index(device):
    from .tpu import _index
    return _index(device)


class Stream(torch.Stream):
    """A tpu stream: programs enqueued while it is current belong to it.

    Args:
        device (torch.device or int, optional): the stream's device (the
            current device when None).
        priority (int, optional): kept and reported by ``priority``; XLA
            programs have no priorities, so it changes nothing.
    """

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:  # wrapping an existing stream
            return super().__new__(cls, **kwargs)
        idx = _device_index(device)
        return super().__new__(cls, device=torch.device("tpu", idx), priority=int(priority))

    @property
    def priority(self):
        return _C._stream_priority(self.device_index, self.stream_id)

    def wait_event(self, event):
        """Work submitted to this stream from now on comes after ``event``'s work.
        Returns at once."""
        event.wait(self)

    def wait_stream(self, stream):
        """Work submitted to this stream from now on comes after the work
        submitted to ``stream`` so far. Returns at once."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Records ``event`` (a new torch.tpu.Event when None) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __repr__(self):
        return f"<torch.tpu.Stream device=tpu:{self.device_index} stream_id={self.stream_id}>"


class Event(torch.Event):
    """A tpu event: marks the completion of the work enqueued on a stream.

    Args:
        enable_timing (bool): whether ``elapsed_time`` may be asked of it.
        blocking (bool): accepted; ``synchronize`` always sleeps until the
            work completes (it never spins).
        interprocess (bool): not supported (a PJRT event cannot be shared
            between processes).
    """

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise RuntimeError("torch.tpu.Event: interprocess events are not supported on tpu "
                               "(a PJRT completion cannot be shared between processes)")
        return super().__new__(cls, device=torch.device("tpu", _C._current_device()),
                               enable_timing=bool(enable_timing), blocking=bool(blocking))

    def record(self, stream=None):
        """Records the event on ``stream`` (the current stream when None)."""
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream=None):
        """Work submitted to ``stream`` (the current stream when None) from now
        on comes after this event's work. Returns at once."""
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event):
        """Milliseconds from the completion of this event's work to that of
        ``end_event``'s (both recorded with enable_timing=True and complete)."""
        return _C._event_elapsed_time(self, end_event)

    def ipc_handle(self):
        raise RuntimeError("torch.tpu.Event: interprocess events are not supported on tpu")

    def __repr__(self):
        return f"<torch.tpu.Event device={self.device}>"


def current_stream(device=None):
    """The calling thread's current stream on ``device`` (the current device when None)."""
    idx = _device_index(device)
    return _stream_object(idx, _C._current_stream(idx))


def default_stream(device=None):
    """The default stream of ``device`` (stream_id 0)."""
    return _stream_object(_device_index(device), 0)


def set_stream(stream):
    """Makes ``stream`` the calling thread's current stream, and its device the
    current device (as torch.cuda.set_stream). None does nothing."""
    if stream is None:
        return
    if stream.device.type != "tpu":
        raise ValueError(f"torch.tpu.set_stream: expected a tpu stream, got one on {stream.device}")
    _C._exchange_stream(stream.device_index, stream.stream_id)  # checks the stream first
    _C._set_device(stream.device_index)


class StreamContext:
    """Context manager that makes ``stream`` current (a no-op for None), then
    restores the previous current device and streams."""

    def __init__(self, stream):
        self.stream = stream
        self.prev_device = None
        self.prev_here = None
        self.prev_there = None

    def __enter__(self):
        s = self.stream
        if s is None:
            return None
        self.prev_device = _C._current_device()
        self.prev_here = _C._current_stream(self.prev_device)
        self.prev_there = _C._current_stream(s.device_index)
        set_stream(s)
        return s

    def __exit__(self, *exc):
        s = self.stream
        if s is None:
            return False
        _C._exchange_stream(s.device_index, self.prev_there)
        _C._exchange_stream(self.prev_device, self.prev_here)
        _C._set_device(self.prev_device)
        return False


def stream(stream):
    """``with torch.tpu.stream(s):`` runs the block's tpu work on ``s``."""
    return StreamContext(stream)


def _stream_object(device_index, stream_id):
    return Stream(stream_id=stream_id, device_index=device_index, device_type=_TPU_TYPE)


# torch.Stream(stream_id=..., device_type=...) takes the DeviceType's number.
_TPU_TYPE = 20  # c10::DeviceType::PrivateUse1
