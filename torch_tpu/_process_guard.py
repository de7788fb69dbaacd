"""Which processes may use the tpu device.

A DataLoader worker may not: on a TPU host only one process can own the
chips, and a tpu tensor cannot travel through the worker's result queue
(PyTorch shares tensors between processes only through CPU shared memory or
CUDA IPC). The check runs once per process, at its first device use, so a
worker that creates a tpu tensor fails at once with this message instead of
leaving the main process waiting for a batch that never comes."""
import sys

from . import _C

_WORKER_MESSAGE = (
    "torch_tpu: a DataLoader worker process cannot use the tpu device. Return CPU tensors from the "
    "Dataset (and collate_fn) and move each batch to tpu in the main process, e.g. "
    "DataLoader(..., pin_memory=True) and batch.to('tpu', non_blocking=True).")


def _refuse_in_dataloader_worker():
    worker = sys.modules.get("torch.utils.data._utils.worker")
    if worker is not None and worker.get_worker_info() is not None:
        raise RuntimeError(_WORKER_MESSAGE)


def install():
    _C._set_process_check(_refuse_in_dataloader_worker)
