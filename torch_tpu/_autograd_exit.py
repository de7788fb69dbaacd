"""A clean interpreter exit after a backward pass on tpu.

Autograd runs a tpu backward on its device thread. torch 2.13 stashes a
Python object (the caller's contextvars context) in the graph task's
thread-local state, so the device thread needs the GIL to drop the task —
which it may do just after backward() has returned. If the interpreter is
finalizing by then, Python 3.11 ends a thread that asks for the GIL with a
forced unwind, which aborts the process ("terminate called without an
active exception"; seen after 1 in 4 short training scripts). Yielding the
GIL once at exit lets the device thread finish first."""
import atexit
import time

from . import _C


def _yield_to_autograd_threads():
    if _C._is_initialized():
        time.sleep(0.005)


def install():
    atexit.register(_yield_to_autograd_threads)
