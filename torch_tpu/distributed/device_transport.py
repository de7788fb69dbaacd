"""The device transport of ``tpu_dist``: each collective is one XLA program.

Used for ranks that share one PJRT client, here N ranks as threads of one
process (``launch_in_process``), rank ``r`` on its own ``tpu:i``. For each
collective the group's ranks meet in a rendezvous (``rendezvous.py``); the
last to arrive checks that their arguments agree and launches one program of
N replicas over the ranks' devices (``_C._spmd_collective``: replica ``j`` is
group rank ``j``'s device, the replica group is the whole group), each rank
contributing its own tensor; each rank then writes its replica's result into
its output tensors. Collectives:

- all_reduce: stablehlo.all_reduce (SUM, PRODUCT, MIN, MAX, AVG; PREMUL_SUM
  and the bitwise ops raise); reduce runs it and only the root keeps the result.
- all_gather (list, into_tensor, coalesced), gather: stablehlo.all_gather.
- reduce_scatter (list, tensor, coalesced): stablehlo.reduce_scatter.
- all_to_all (list and single, uneven splits): stablehlo.all_to_all over
  blocks padded to the largest split of any pair, then each rank slices.
- broadcast, scatter: all_gather of the root's data (every other rank
  contributes zeros), each rank keeps the root's block.
- send/recv: stablehlo.collective_permute between the two ranks' devices.
- barrier: a rendezvous of the group.
"""
import datetime
from typing import List

import torch
import torch.distributed as dist
import torch._C._distributed_c10d as _c10d
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

from .rendezvous import Launch

_OPS = {
    dist.ReduceOp.SUM: "sum",
    dist.ReduceOp.PRODUCT: "product",
    dist.ReduceOp.MIN: "min",
    dist.ReduceOp.MAX: "max",
    dist.ReduceOp.AVG: "avg",
}

TRANSPORT = "device"


def _done(result):
    fut = Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _spmd(tensors, kind, op="sum", dim=0, concat_dim=0, pairs=()):
    from .. import _C

    return list(_C._spmd_collective(list(tensors), kind, op, dim, concat_dim, list(pairs)))


def _desc(t):
    return (str(t.dtype), tuple(t.shape))


def _reduce_op(opts, what):
    op = opts.reduceOp
    for k, name in _OPS.items():
        if op == k:
            return name
    raise ValueError(f"tpu_dist {what}: reduce op {op} is not supported on the device transport "
                     "(SUM, PRODUCT, MIN, MAX, AVG)")


class DeviceTransportGroup(dist.ProcessGroup):
    """One rank's view of a ``tpu_dist`` group on the device transport."""

    def __init__(self, launch: Launch, rank: int, size: int, global_ranks: List[int], name: str,
                 timeout: datetime.timedelta):
        super().__init__(rank, size)
        self._launch = launch
        self._ranks = list(global_ranks) if global_ranks else list(range(size))
        self._rdv = launch.group(name, size)
        self._name = name
        self._seq = 0
        self._timeout = timeout.total_seconds()
        self._p2p_seq = {}

    # -- c10d's queries -------------------------------------------------
    def getBackendName(self):
        return "tpu_dist"

    @property
    def transport(self):
        return TRANSPORT

    def _set_timeout(self, timeout):
        self._timeout = timeout.total_seconds()

    @property
    def group_name(self):
        return self._name

    @property
    def pg_name(self):
        return self._name

    def _get_backend(self, device):
        """c10d and FSDP2 ask a group for its backend of a device: this group
        is its own (it has no C++ backend under it)."""
        return self

    def supports_tensor_alloc(self, device):
        return False

    @property
    def supports_coalescing(self):
        return False

    def _start_coalescing(self, device):
        pass

    def _end_coalescing(self, device):
        return _done([])

    # -- the one path every collective takes ----------------------------
    def _what(self, op):
        return f"tpu_dist {op} (rank {self.rank()} of {self.size()}, group '{self._name}', device transport)"

    def _meet(self, op, sig, payload, run):
        self._seq += 1
        return self._rdv.join(self._seq, self.rank(), self._ranks, self._what(op), (op, sig), payload, run,
                              self._timeout)

    def _device(self, t, op):
        if not isinstance(t, torch.Tensor) or t.device.type != "tpu":
            raise ValueError(f"{self._what(op)}: expected tpu tensors, got "
                             f"{t.device if isinstance(t, torch.Tensor) else type(t).__name__}")
        return t

    # -- all_reduce -------------------------------------------------------
    def _all_reduce_one(self, t, opts, what="all_reduce"):
        self._device(t, what)
        op = _reduce_op(opts, what)
        if op == "avg" and not (t.is_floating_point() or t.is_complex()):
            raise ValueError(f"{self._what(what)}: AVG needs a floating dtype, got {t.dtype}")

        def run(payloads):
            return _spmd([p.contiguous() for p in payloads], "all_reduce", op)

        return self._meet(what, (_desc(t), op), t, run)

    def allreduce(self, tensors, opts=_c10d.AllreduceOptions()):
        for t in tensors:
            t.copy_(self._all_reduce_one(t, opts).view(t.shape))
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=_c10d.AllreduceCoalescedOptions()):
        o = _c10d.AllreduceOptions()
        o.reduceOp = opts.reduceOp
        return self.allreduce(tensors, o)

    def reduce(self, tensors, opts=_c10d.ReduceOptions()):
        o = _c10d.AllreduceOptions()
        o.reduceOp = opts.reduceOp
        for t in tensors:
            r = self._all_reduce_one(t, o, "reduce")
            if self.rank() == opts.rootRank:
                t.copy_(r.view(t.shape))
        return _done(tensors)

    # -- all_gather -------------------------------------------------------
    def _gather_flat(self, t, what):
        """Every rank's `t`, flattened and concatenated in rank order, on this rank's device."""
        self._device(t, what)

        def run(payloads):
            return _spmd([p.reshape(-1) for p in payloads], "all_gather", dim=0)

        return self._meet(what, _desc(t), t, run)

    def allgather(self, output_lists, inputs, opts=_c10d.AllgatherOptions()):
        for outs, t in zip(output_lists, inputs):
            if len(outs) != self.size():
                raise ValueError(f"{self._what('all_gather')}: {len(outs)} outputs for {self.size()} ranks")
            flat = self._gather_flat(t, "all_gather")
            for o, block in zip(outs, flat.chunk(self.size())):
                o.copy_(block.view(o.shape))
        return _done(output_lists)

    def _allgather_base(self, output, input, opts=_c10d.AllgatherOptions()):
        if output.numel() != input.numel() * self.size():
            raise ValueError(f"{self._what('all_gather_into_tensor')}: output has {output.numel()} elements, "
                             f"expected {self.size()} x {input.numel()}")
        output.copy_(self._gather_flat(input, "all_gather_into_tensor").view(output.shape))
        return _done([output])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=_c10d.AllgatherOptions()):
        for o, i in zip(outputs, inputs):
            self._allgather_base(o, i, opts)
        return _done(outputs)

    def all_gather_single(self, output, input, opts=_c10d.AllgatherOptions()):
        return self._allgather_base(output, input, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=_c10d.AllgatherOptions()):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def allgather_coalesced(self, output_lists, inputs, opts=_c10d.AllgatherOptions()):
        return self.allgather(output_lists, inputs, opts)

    def gather(self, output_lists, inputs, opts=_c10d.GatherOptions()):
        flat = self._gather_flat(inputs[0], "gather")
        if self.rank() == opts.rootRank:
            for o, block in zip(output_lists[0], flat.chunk(self.size())):
                o.copy_(block.view(o.shape))
        return _done(output_lists)

    # -- reduce_scatter -----------------------------------------------------
    def _reduce_scatter_flat(self, flat, opts, what):
        op = _reduce_op(opts, what)
        if flat.numel() % self.size():
            raise ValueError(f"{self._what(what)}: {flat.numel()} elements do not split over {self.size()} ranks")

        def run(payloads):
            return _spmd(payloads, "reduce_scatter", op, dim=0)

        return self._meet(what, (_desc(flat), op), flat, run)

    def reduce_scatter(self, outputs, input_lists, opts=_c10d.ReduceScatterOptions()):
        for o, ins in zip(outputs, input_lists):
            if len(ins) != self.size():
                raise ValueError(f"{self._what('reduce_scatter')}: {len(ins)} inputs for {self.size()} ranks")
            for t in ins:
                self._device(t, "reduce_scatter")
                if t.shape != o.shape or t.dtype != o.dtype:
                    raise ValueError(f"{self._what('reduce_scatter')}: input {t.dtype} {tuple(t.shape)} "
                                     f"does not match the output {o.dtype} {tuple(o.shape)}")
            flat = torch.cat([t.reshape(-1) for t in ins])
            o.copy_(self._reduce_scatter_flat(flat, opts, "reduce_scatter").view(o.shape))
        return _done(outputs)

    def _reduce_scatter_base(self, output, input, opts=_c10d.ReduceScatterOptions()):
        self._device(input, "reduce_scatter_tensor")
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"{self._what('reduce_scatter_tensor')}: input has {input.numel()} elements, "
                             f"expected {self.size()} x {output.numel()}")
        output.copy_(self._reduce_scatter_flat(input.reshape(-1), opts, "reduce_scatter_tensor").view(output.shape))
        return _done([output])

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=_c10d.ReduceScatterOptions()):
        for o, i in zip(outputs, inputs):
            self._reduce_scatter_base(o, i, opts)
        return _done(outputs)

    def reduce_scatter_single(self, output, input, opts=_c10d.ReduceScatterOptions()):
        return self._reduce_scatter_base(output, input, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=_c10d.ReduceScatterOptions()):
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    # -- all_to_all ---------------------------------------------------------
    def _all_to_all_rows(self, input, in_splits, out_rows, what):
        """Rank j sends rows in_splits[k] (of `input`, dim 0) to rank k; returns
        what this rank receives, concatenated in rank order."""
        n = self.size()
        rest = tuple(input.shape[1:])
        sig = (str(input.dtype), rest)

        def run(payloads):
            splits = [p[1] for p in payloads]
            for k, p in enumerate(payloads):  # what k expects from each j must be what j sends
                expected = [splits[j][k] for j in range(n)]
                if p[2] is not None and list(p[2]) != expected:
                    raise ValueError(f"tpu_dist {what}: rank {self._ranks[k]} expects {list(p[2])} rows from the "
                                     f"ranks, but they send it {expected}")
            width = max(max(s) for s in splits)
            padded = []
            for p, s in zip(payloads, splits):
                x = p[0]
                if all(v == width for v in s):
                    padded.append(x.contiguous())
                    continue
                buf = torch.zeros((n * width,) + rest, dtype=x.dtype, device=x.device)
                start = 0
                for k, v in enumerate(s):
                    if v:
                        buf[k * width:k * width + v] = x[start:start + v]
                    start += v
                padded.append(buf)
            if width == 0:
                return [p[0].new_empty((0,) + rest) for p in payloads]
            received = _spmd(padded, "all_to_all", dim=0, concat_dim=0)
            out = []
            for k, r in enumerate(received):
                rows = [splits[j][k] for j in range(n)]
                if all(v == width for v in rows):
                    out.append(r)
                else:
                    out.append(torch.cat([r[j * width:j * width + v] for j, v in enumerate(rows)]))
            return out

        return self._meet(what, sig, (input, list(in_splits), out_rows), run)

    def alltoall_base(self, output, input, output_splits, input_splits, opts=_c10d.AllToAllOptions()):
        n = self.size()
        what = "all_to_all_single"
        self._device(input, what)
        if input.dim() == 0:
            raise ValueError(f"{self._what(what)}: needs tensors of at least one dimension")
        if not input_splits:
            if input.shape[0] % n:
                raise ValueError(f"{self._what(what)}: dim 0 of size {input.shape[0]} does not split over {n} ranks")
            input_splits = [input.shape[0] // n] * n
        if not output_splits:
            if output.shape[0] % n:
                raise ValueError(f"{self._what(what)}: output dim 0 of size {output.shape[0]} does not split "
                                 f"over {n} ranks")
            output_splits = [output.shape[0] // n] * n
        if len(input_splits) != n or len(output_splits) != n or sum(input_splits) != input.shape[0] \
                or sum(output_splits) != output.shape[0]:
            raise ValueError(f"{self._what(what)}: splits {list(input_splits)} / {list(output_splits)} do not "
                             f"match {n} ranks and dim 0 sizes {input.shape[0]} / {output.shape[0]}")
        got = self._all_to_all_rows(input, input_splits, list(output_splits), what)
        output.copy_(got.view(output.shape))
        return _done([output])

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=_c10d.AllToAllOptions()):
        return self.alltoall_base(output, input, output_splits, input_splits, opts)

    def alltoall(self, outputs, inputs, opts=_c10d.AllToAllOptions()):
        n = self.size()
        if len(inputs) != n or len(outputs) != n:
            raise ValueError(f"{self._what('all_to_all')}: expected {n} inputs and outputs")
        dtype = inputs[0].dtype
        if any(t.dtype != dtype for t in list(inputs) + list(outputs)):
            raise ValueError(f"{self._what('all_to_all')}: all tensors must have one dtype")
        flat = torch.cat([self._device(t, "all_to_all").reshape(-1) for t in inputs])
        got = self._all_to_all_rows(flat, [t.numel() for t in inputs], [t.numel() for t in outputs], "all_to_all")
        for o, block in zip(outputs, got.split([t.numel() for t in outputs])):
            o.copy_(block.view(o.shape))
        return _done(outputs)

    # -- broadcast / scatter ------------------------------------------------
    def _from_root(self, t, root, what):
        """The root's `t` on every rank (an all_gather of the root's block; the
        others send zeros of its shape)."""
        self._device(t, what)
        mine = t if self.rank() == root else torch.zeros_like(t)
        return self._gather_flat(mine, what).chunk(self.size())[root].view(t.shape)

    def broadcast(self, tensors, opts=_c10d.BroadcastOptions()):
        for t in tensors:
            t.copy_(self._from_root(t, opts.rootRank, "broadcast"))
        return _done(tensors)

    def scatter(self, outputs, input_lists, opts=_c10d.ScatterOptions()):
        o = outputs[0]
        if self.rank() == opts.rootRank:
            stacked = torch.cat([t.reshape(-1) for t in input_lists[0]])
        else:
            stacked = torch.zeros(o.numel() * self.size(), dtype=o.dtype, device=o.device)
        full = self._from_root(stacked, opts.rootRank, "scatter")
        o.copy_(full.chunk(self.size())[self.rank()].view(o.shape))
        return _done(outputs)

    # -- send / recv / barrier ----------------------------------------------
    def _p2p(self, t, src, dst, tag, op):
        self._device(t, op)
        key = (self._name, self._ranks[src], self._ranks[dst], tag)
        seq = self._p2p_seq.get(key, 0) + 1
        self._p2p_seq[key] = seq
        rdv = self._launch.pair(key[1:] + (self._name,))

        def run(payloads):
            return _spmd([p.contiguous() for p in payloads], "permute", pairs=[(0, 1)])

        index = 0 if op == "send" else 1
        return rdv.join(seq, index, [self._ranks[src], self._ranks[dst]], self._what(op), ("p2p", _desc(t)), t,
                        run, self._timeout)

    def send(self, tensors, dst, tag=0):
        for t in tensors:
            self._p2p(t, self.rank(), dst, tag, "send")
        return _done(tensors)

    def recv(self, tensors, src, tag=0):
        for t in tensors:
            t.copy_(self._p2p(t, src, self.rank(), tag, "recv").view(t.shape))
        return _done(tensors)

    def barrier(self, opts=_c10d.BarrierOptions()):
        self._meet("barrier", None, None, lambda payloads: [None] * len(payloads))
        return _done([])

    def __repr__(self):
        return f"tpu_dist(rank {self.rank()} of {self.size()}, group '{self._name}', device transport)"
