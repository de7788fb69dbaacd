"""4 in-process ranks on the device transport (run with TORCH_TPU_NUM_DEVICES=4
by tests/test_dist_device_transport.py): subgroups whose replica groups are
devices 0,1 and 2,3, an uneven all_to_all_single over 4 ranks, and
send/recv around a ring, a compiled step whose all_reduce and all_to_all
run inside one program of 4 replicas, and compiled tensor parallel on a 2 x 2
mesh (each tensor-parallel pair runs its own program of 2 replicas); each
checked against its math on the CPU. Prints OK on success."""
import copy

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn

import torch_tpu  # noqa: F401
from torch_tpu.compiler import stats
from torch_tpu.distributed import launch_in_process, transport

N = 4
# rank j sends SPLITS[j][k] rows to rank k (zeros included).
SPLITS = [[1, 0, 2, 1], [0, 3, 1, 0], [2, 2, 0, 1], [1, 1, 1, 1]]


def rows(rank):
    return torch.arange(sum(SPLITS[rank]) * 2, dtype=torch.float32).view(-1, 2) + 100 * rank


torch.manual_seed(0)
MLP = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 6))
MESH_X = [torch.randn(3, 6) for _ in range(2)]  # one batch per data-parallel group


def tensor_parallel_on_a_mesh(rank):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(copy.deepcopy(MLP).to(f"tpu:{rank}"), mesh["tp"],
                               {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = MESH_X[mesh.get_local_rank("dp")].to(f"tpu:{rank}").requires_grad_()
    out = torch.compile(model, backend="tpu")(x)
    out.square().sum().backward()
    return out.detach().cpu(), x.grad.cpu()


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
    return t.cpu(), a2a.cpu(), ring.cpu(), transport(mine), compiled, tensor_parallel_on_a_mesh(rank)


def main():
    stats.reset_compile_stats()
    xs = [rows(3)[:4] / (r + 1) for r in range(N)]
    s = sum(x.tanh() for x in xs)
    for rank, (t, a2a, ring, tr, compiled, (tp_out, tp_xgrad)) in enumerate(launch_in_process(body, N)):
        group_sum = sum(r + 1 for r in range(N) if r // 2 == rank // 2)
        torch.testing.assert_close(t, torch.full((3,), float(group_sum)))
        want = torch.cat([rows(j).split(SPLITS[j])[rank] for j in range(N)])
        torch.testing.assert_close(a2a, want)
        torch.testing.assert_close(ring, torch.full((2,), float((rank - 1) % N)))
        assert tr == "device", tr
        torch.testing.assert_close(compiled, torch.cat([(s * x)[rank:rank + 1] for x in xs]))
        x = MESH_X[rank // 2].clone().requires_grad_()  # mesh (dp, tp): rank = 2 * dp + tp
        want = MLP(x)
        want.square().sum().backward()
        torch.testing.assert_close(tp_out, want.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(tp_xgrad, x.grad, rtol=1e-5, atol=1e-5)
    c = stats.snapshot()
    # the world step on every rank, and each rank's tensor-parallel forward and backward
    assert c["replicated_graphs"] == 3 * N and c["segmented_graphs"] == 0, c
    assert c["collectives_in_program"] == 2 * N + 2 * N and c["in_program_fallbacks"] == {}, c
    print("OK")


if __name__ == "__main__":
    main()
