"""4 in-process ranks on the device transport (run with TORCH_TPU_NUM_DEVICES=4
by tests/test_dist_device_transport.py): subgroups whose replica groups are
devices 0,1 and 2,3, an uneven all_to_all_single over 4 ranks, and
send/recv around a ring, and a compiled step whose all_reduce and
all_to_all run inside one program of 4 replicas; each checked against its
math on the CPU. Prints OK on success."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import torch_tpu  # noqa: F401
from torch_tpu.compiler import stats
from torch_tpu.distributed import launch_in_process, transport

N = 4
# rank j sends SPLITS[j][k] rows to rank k (zeros included).
SPLITS = [[1, 0, 2, 1], [0, 3, 1, 0], [2, 2, 0, 1], [1, 1, 1, 1]]


def rows(rank):
    return torch.arange(sum(SPLITS[rank]) * 2, dtype=torch.float32).view(-1, 2) + 100 * rank


def body(rank, world):
    dev = f"tpu:{rank}"
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    mine = pairs[rank // 2]
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t, group=mine)
    out_splits = [SPLITS[j][rank] for j in range(world)]
    a2a = torch.empty(sum(out_splits), 2, device=dev)
    dist.all_to_all_single(a2a, rows(rank).to(dev), out_splits, SPLITS[rank])
    ring = torch.empty(2, device=dev)
    send = torch.full((2,), float(rank), device=dev)
    if rank % 2 == 0:
        dist.send(send, (rank + 1) % world)
        dist.recv(ring, (rank - 1) % world)
    else:
        dist.recv(ring, (rank - 1) % world)
        dist.send(send, (rank + 1) % world)

    @torch.compile(backend="tpu")
    def step(x):
        s = funcol.all_reduce(x.tanh(), "sum", dist.group.WORLD)
        return funcol.all_to_all_single(s * x, None, None, dist.group.WORLD)

    compiled = step(rows(3)[:4].to(dev) / (rank + 1)).cpu()
    return t.cpu(), a2a.cpu(), ring.cpu(), transport(mine), compiled


def main():
    stats.reset_compile_stats()
    xs = [rows(3)[:4] / (r + 1) for r in range(N)]
    s = sum(x.tanh() for x in xs)
    for rank, (t, a2a, ring, tr, compiled) in enumerate(launch_in_process(body, N)):
        group_sum = sum(r + 1 for r in range(N) if r // 2 == rank // 2)
        torch.testing.assert_close(t, torch.full((3,), float(group_sum)))
        want = torch.cat([rows(j).split(SPLITS[j])[rank] for j in range(N)])
        torch.testing.assert_close(a2a, want)
        torch.testing.assert_close(ring, torch.full((2,), float((rank - 1) % N)))
        assert tr == "device", tr
        torch.testing.assert_close(compiled, torch.cat([(s * x)[rank:rank + 1] for x in xs]))
    c = stats.snapshot()
    assert c["replicated_graphs"] == N and c["segmented_graphs"] == 0 and c["collectives_in_program"] == 2 * N, c
    print("OK")


if __name__ == "__main__":
    main()
