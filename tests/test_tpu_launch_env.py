"""TPU-pod launch path of tpu_dist: libtpu's topology variables computed from
torchrun's, and the c10d Store as the PJRT client's key-value store.

No TPU here: the variables are asserted as computed, the kv callbacks are
called through the C ABI (as a plugin would) by _C._pjrt_kv_probe, and the
CPU plugin's client is created with the callbacks passed."""
import threading

import pytest
import torch.distributed as dist
from fresh_python import run_snippet

from torch_tpu.distributed import launch_env
from torch_tpu.distributed.launch_env import compute_tpu_launch_env, exchange_host_addresses


def torchrun_env(rank, local_world, world, **extra):
    env = {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % local_world),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(local_world),
        "GROUP_RANK": str(rank // local_world),
        "MASTER_ADDR": "10.0.0.1",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.mark.parametrize("env, hosts, want", [
    (torchrun_env(2, 4, 4), None, {
        "TPU_VISIBLE_CHIPS": "2",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "2,2,1",
        "TPU_PROCESS_PORT": "8478",
        "TPU_PROCESS_ADDRESSES": "localhost:8476,localhost:8477,localhost:8478,localhost:8479",
        "CLOUD_TPU_TASK_ID": "2",
        "TPU_WORKER_ID": "0",
        "TPU_WORKER_HOSTNAMES": "localhost",
    }),
    (torchrun_env(5, 4, 8), ["10.0.0.1", "10.0.0.2"], {
        "TPU_VISIBLE_CHIPS": "1",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "2,4,1",
        "TPU_PROCESS_PORT": "8477",
        "TPU_PROCESS_ADDRESSES": ",".join(
            [f"10.0.0.1:{p}" for p in range(8476, 8480)] + [f"10.0.0.2:{p}" for p in range(8476, 8480)]
        ),
        "CLOUD_TPU_TASK_ID": "5",
        "TPU_WORKER_ID": "1",
        "TPU_WORKER_HOSTNAMES": "10.0.0.1,10.0.0.2",
    }),
    (torchrun_env(31, 8, 32), ["h0", "h1", "h2", "h3"], {
        "TPU_VISIBLE_CHIPS": "7",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "2,16,1",
        "TPU_PROCESS_PORT": "8483",
        "TPU_PROCESS_ADDRESSES": ",".join(f"{h}:{p}" for h in ("h0", "h1", "h2", "h3") for p in range(8476, 8484)),
        "CLOUD_TPU_TASK_ID": "31",
        "TPU_WORKER_ID": "3",
        "TPU_WORKER_HOSTNAMES": "h0,h1,h2,h3",
    }),
], ids=["one_host_four_chips", "two_hosts_four_chips", "four_hosts_eight_chips"])
def test_libtpu_variables(env, hosts, want):
    assert compute_tpu_launch_env(env, host_addresses=hosts) == want


def test_layout_port_and_host_tiling_are_parameters():
    got = compute_tpu_launch_env(
        torchrun_env(0, 4, 16), host_addresses=["a", "b", "c", "d"], host_layout="2,2,1", hosts_bounds=(2, 2, 1),
        base_port=9000,
    )
    assert got["TPU_PROCESS_BOUNDS"] == "4,4,1"
    assert got["TPU_PROCESS_PORT"] == "9000"
    assert got["TPU_PROCESS_ADDRESSES"].split(",")[4] == "b:9000"
    # GROUP_RANK may be absent (derived from RANK).
    env = torchrun_env(6, 4, 8)
    del env["GROUP_RANK"]
    assert compute_tpu_launch_env(env, host_addresses=["a", "b"])["TPU_WORKER_ID"] == "1"


@pytest.mark.parametrize(
    "env, kwargs, names",
    [
        (torchrun_env(0, 4, 6), {}, "WORLD_SIZE=6 is not a multiple of LOCAL_WORLD_SIZE=4"),
        ({**torchrun_env(0, 4, 4), "LOCAL_RANK": "4"}, {}, "LOCAL_RANK=4"),
        (torchrun_env(3, 4, 4), {"chips_per_host": 2}, "LOCAL_RANK=3 is not below the host's 2 chips"),
        (torchrun_env(1, 2, 2), {"chips_per_host": 4}, "LOCAL_WORLD_SIZE=2 is not the host's 4 chips"),
        ({**torchrun_env(0, 4, 4), "RANK": "4"}, {}, "RANK=4 is not below WORLD_SIZE=4"),
        ({**torchrun_env(1, 4, 8), "GROUP_RANK": "1"}, {}, "RANK=1 is not GROUP_RANK*LOCAL_WORLD_SIZE+LOCAL_RANK"),
        ({**torchrun_env(0, 4, 8), "GROUP_RANK": "2"}, {}, "GROUP_RANK=2"),
        ({k: v for k, v in torchrun_env(0, 4, 4).items() if k != "RANK"}, {}, "RANK is not set"),
        ({**torchrun_env(0, 4, 4), "WORLD_SIZE": "four"}, {}, "WORLD_SIZE='four' is not an integer"),
        (torchrun_env(0, 4, 8), {}, "need host_addresses"),
        (torchrun_env(0, 4, 8), {"host_addresses": ["a"]}, "host_addresses has 1 entries for 2 hosts"),
        (torchrun_env(0, 6, 6), {}, "no default chip layout for 6 chips"),
        (torchrun_env(0, 4, 4), {"host_layout": (2, 2, 2), "chips_per_host": 4}, "host_layout=2,2,2"),
        (torchrun_env(0, 4, 4), {"host_layout": (2, 2)}, "host_layout"),
        (torchrun_env(0, 4, 8), {"host_addresses": ["a", "b"], "hosts_bounds": (1, 1, 1)}, "hosts_bounds=1,1,1"),
        (torchrun_env(0, 4, 4), {"base_port": 65534}, "base_port=65534"),
    ],
)
def test_bad_input_names_the_variable(env, kwargs, names):
    with pytest.raises(ValueError, match=names.replace("*", r"\*").replace("+", r"\+")):
        compute_tpu_launch_env(env, **kwargs)


def test_host_addresses_exchanged_through_store():
    store = dist.HashStore()
    results = {}

    def node(g, local_rank):
        results[(g, local_rank)] = exchange_host_addresses(store, g, 3, local_rank, f"10.0.0.{g + 1}")

    threads = [threading.Thread(target=node, args=(g, lr)) for g in (2, 1, 0) for lr in (1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 6
    assert all(v == ["10.0.0.1", "10.0.0.2", "10.0.0.3"] for v in results.values())


def test_set_env_keeps_user_values_and_store_serves_client():
    run_snippet(
        """
        import torch, torch.distributed as dist, torch_tpu
        from torch_tpu import _C
        import torch_tpu.distributed as tdist
        assert torch.tpu.distributed.set_tpu_launch_env is tdist.set_tpu_launch_env
        env = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4",
               "GROUP_RANK": "0", "TPU_PROCESS_PORT": "9000", "TPU_VISIBLE_CHIPS": "3"}
        import datetime
        store = dist.HashStore()
        store.set_timeout(datetime.timedelta(seconds=20))
        assert not _C._pjrt_kv_store_registered()
        eff = tdist.set_tpu_launch_env(store=store, env=env)
        assert env["TPU_PROCESS_PORT"] == "9000" and eff["TPU_PROCESS_PORT"] == "9000", eff
        assert env["TPU_VISIBLE_CHIPS"] == "3" and eff["TPU_VISIBLE_CHIPS"] == "3", eff
        assert env["TPU_PROCESS_BOUNDS"] == "2,2,1" and env["CLOUD_TPU_TASK_ID"] == "1", env
        assert env["TPU_PROCESS_ADDRESSES"].split(",")[1] == "localhost:8477", env
        assert _C._pjrt_kv_store_registered()

        # The callbacks PJRT_Client_Create gets, called through the C ABI.
        assert _C._pjrt_kv_probe("put", "topo", "a\\0b") == (0, "")
        assert store.check(["tpu_pjrt_kv/topo"]) and store.get("tpu_pjrt_kv/topo") == b"a\\0b"
        assert _C._pjrt_kv_probe("get", "topo", timeout_ms=1000) == (0, "a\\0b")
        assert _C._pjrt_kv_probe("try_get", "topo") == (0, "a\\0b")
        code, msg = _C._pjrt_kv_probe("try_get", "absent")
        assert code == 5 and "key 'absent' is not set" in msg, (code, msg)
        code, msg = _C._pjrt_kv_probe("get", "absent", timeout_ms=200)
        assert code == 4 and "key 'absent' not set within 200 ms" in msg, (code, msg)
        code, msg = _C._pjrt_kv_probe("get", "absent", timeout_ms=0)
        assert code == 4, (code, msg)
        store.set("tpu_pjrt_kv/late", "v")
        assert _C._pjrt_kv_probe("get", "late", timeout_ms=0) == (0, "v")

        # The CPU plugin's client, created with the callbacks, still works.
        assert not _C._pjrt_client_has_kv_store()
        keys = store.num_keys()
        x = torch.arange(4.0, device="tpu") * 2
        assert x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
        assert _C._pjrt_client_has_kv_store()
        assert store.num_keys() == keys  # the CPU plugin writes nothing to it

        # Too late now: the client exists.
        with pytest.raises(RuntimeError, match="already"):
            tdist.set_tpu_launch_env(store=store, env=dict(env))
        with pytest.raises(RuntimeError, match="already"):
            tdist.register_client_store(store)
        """
    )


def test_without_store_client_is_created_as_before():
    run_snippet(
        """
        import torch, torch_tpu
        from torch_tpu import _C
        assert (torch.ones(3, device="tpu") + 1).cpu().tolist() == [2.0, 2.0, 2.0]
        assert not _C._pjrt_kv_store_registered() and not _C._pjrt_client_has_kv_store()
        with pytest.raises(ValueError, match="no PJRT key-value store is registered"):
            _C._pjrt_kv_probe("get", "k", timeout_ms=1)
        """
    )


def test_two_hosts_set_env_through_one_store():
    run_snippet(
        """
        import threading, torch.distributed as dist, torch_tpu
        import torch_tpu.distributed as tdist
        store = dist.HashStore()
        envs = {}
        def proc(rank):
            env = {"RANK": str(rank), "LOCAL_RANK": str(rank % 4), "WORLD_SIZE": "8",
                   "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": str(rank // 4)}
            tdist.set_tpu_launch_env(store=store, env=env, host_address=f"host{rank // 4}")
            envs[rank] = env
        ts = [threading.Thread(target=proc, args=(r,)) for r in range(8)]
        [t.start() for t in ts]; [t.join(60) for t in ts]
        addrs = ",".join(f"host{h}:{8476 + l}" for h in range(2) for l in range(4))
        for r, env in envs.items():
            assert env["TPU_PROCESS_ADDRESSES"] == addrs, env
            assert env["TPU_WORKER_ID"] == str(r // 4) and env["CLOUD_TPU_TASK_ID"] == str(r), env
            assert env["TPU_PROCESS_BOUNDS"] == "2,4,1", env
        assert len(envs) == 8
        # Several hosts and no store: refused.
        with pytest.raises(ValueError, match="need a c10d store"):
            tdist.set_tpu_launch_env(env={"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"})
        """
    )


def test_module_lists_libtpu_variables():
    got = compute_tpu_launch_env(torchrun_env(0, 1, 1))
    assert set(got) == set(launch_env.LIBTPU_VARIABLES)
    assert got["TPU_PROCESS_BOUNDS"] == "1,1,1"
