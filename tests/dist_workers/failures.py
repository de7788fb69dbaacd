"""Failures are loud: argv[1] picks the case.

  mismatch  - ranks pass different shapes / dtypes / reduce ops: every
              rank raises
  cpu       - a CPU tensor in a tpu-only group: a clear error
  exit      - rank 1 exits before an all_reduce: rank 0 raises, naming it
  absent    - rank 1 never calls the all_reduce: rank 0 raises within the
              group's timeout, naming it
Each rank prints "RAISED: <message>" for the error it saw (one line)."""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

from _common import rank_world

case = sys.argv[1]
rank, world = rank_world()
TIMEOUT = 6
dist.init_process_group("tpu_dist", timeout=datetime.timedelta(seconds=TIMEOUT))
# Every rank finishes connecting before any rank exits: a rank that leaves
# while a peer is still inside gloo's connectFullMesh fails that peer's init.
dist.barrier()


def say(line):
    """One write per line: lines of both ranks share a pipe and must not interleave."""
    os.write(1, (line + "\n").encode())


def raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        say(f"RAISED: {type(e).__name__}: {str(e)}".replace("\n", " | "))
        return
    say("NO ERROR")


if case == "mismatch":
    raised(lambda: dist.all_reduce(torch.ones(4 + rank, device="tpu")))
    dtype = torch.float32 if rank else torch.int32
    raised(lambda: dist.all_gather_single(torch.empty(2 * world, device="tpu", dtype=dtype),
                                          torch.ones(2, device="tpu", dtype=dtype)))
    raised(lambda: dist.broadcast(torch.ones(3, device="tpu"), src=rank))
    if rank == 0:
        raised(lambda: dist.all_reduce(torch.ones(3, device="tpu")))
    else:
        raised(lambda: dist.broadcast(torch.ones(3, device="tpu"), src=0))
    op = dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX
    raised(lambda: dist.all_reduce(torch.ones(3, device="tpu"), op=op))
    # the group stays usable after a refused collective
    t = torch.ones(3, device="tpu")
    dist.all_reduce(t)
    assert t.cpu().tolist() == [world] * 3
    say("USABLE")
elif case == "cpu":
    raised(lambda: dist.all_reduce(torch.ones(4)))
elif case == "exit":
    if rank == 1:
        os._exit(0)
    time.sleep(1)
    start = time.time()
    raised(lambda: dist.all_reduce(torch.ones(4, device="tpu")))
    say(f"AFTER {time.time() - start:.1f}s")
elif case == "absent":
    if rank == 1:
        time.sleep(TIMEOUT + 6)
        os._exit(0)
    start = time.time()
    raised(lambda: dist.all_reduce(torch.ones(4, device="tpu")))
    say(f"AFTER {time.time() - start:.1f}s")
sys.stdout.flush()
os._exit(0)
