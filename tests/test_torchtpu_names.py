"""Google TorchTPU's entry points and launch names, as its callers (Ray, verl,
vLLM, Helion) use them; each call is checked for its effect here."""
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import torch_tpu
from torch_tpu.distributed import environment
from torch_tpu.distributed.launch_env import compute_tpu_launch_env


def run_python(code, **env):
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([sys.executable, "-P", "-c", code], env=e, capture_output=True, text=True, timeout=120)


def test_loader_load_registers_the_device_and_c10d_backend():
    import torch_tpu._loader as loader

    assert loader.load() is None
    loader.load()  # idempotent
    loader._init_device("tpu")
    assert torch._C._get_privateuse1_backend_name() == "tpu"
    assert torch.tpu.device_count() >= 1
    assert "tpu_dist" in dist.Backend.backend_list
    assert torch.ones(2, device="tpu").add(1).cpu().tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="only the device 'tpu'"):
        loader._init_device("cuda")


def test_api_tpu_device():
    from torch_tpu import api

    assert torch.tpu.api is api
    d = api.tpu_device()
    assert d == torch.device("tpu", torch.tpu.current_device())
    assert torch.ones(3).to(d).device == d
    assert api.tpu_device(1) == torch.device("tpu", 1)  # conftest: two devices
    with pytest.raises(ValueError, match="tpu:7 does not exist"):
        api.tpu_device(7)


def test_internal_sync_runs_pending_work(fused):
    from torch_tpu._internal import sync

    x = torch.arange(4.0, device="tpu")
    y = x * 2 + 1
    assert torch_tpu.fused_stats()["clusters"] == 0  # recorded, not run
    sync.synchronize(y, wait=False)
    assert torch_tpu.fused_stats()["clusters"] == 1  # issued by synchronize
    z = y - 1
    sync.synchronize([z, torch.ones(1)], wait=True)
    assert torch_tpu.fused_stats()["clusters"] == 2
    assert z.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    sync.synchronize(torch.ones(2))  # CPU tensors only: nothing to do
    with pytest.raises(TypeError, match="expected a tensor"):
        sync.synchronize(3)


def test_cache_telemetry_names():
    torch.tpu._clear_cache()
    s = torch.tpu._get_cache_stats()
    assert (s.num_cache_reqs, s.num_cache_hits, s.num_entries) == (0, 0, 0)
    a = torch.randn(5, 3, device="tpu")
    (a * 3).cpu()
    (a * 3).cpu()
    s = torch.tpu._get_cache_stats()
    assert s.num_cache_hits >= 1 and s.num_cache_misses >= 1 and s.num_entries >= 1
    assert s.num_cache_reqs == s.num_cache_hits + s.num_cache_misses
    assert s.num_entries == torch_tpu.cache_info()["entries"]
    assert len(s.per_entry_stats) == s.num_entries
    mul = [e for e in s.per_entry_stats if "mul" in e.key]
    assert mul and mul[0].mode == "eager" and mul[0].read_count >= 1  # the second (a * 3) hit it
    assert (torch.tpu._get_cache_hits(), torch.tpu._get_cache_misses()) == (s.num_cache_hits, s.num_cache_misses)
    summary = torch.tpu._hbm_usage_summary()
    assert "tpu:0:" in summary and f"{s.num_entries} executables cached" in summary
    torch.tpu._clear_cache()
    assert torch.tpu._get_cache_stats().num_entries == 0
    assert (a * 3).cpu().shape == (5, 3)  # compiles again
    assert torch.tpu._get_cache_stats().num_cache_misses >= 1


def test_parent_launch_step_sets_addresses_and_topology():
    env = {}
    got = torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=4, env=env)
    assert got == env and set(env) == {"TORCH_TPU_SLICEBUILDER_ADDRESSES", "TORCH_TPU_TOPOLOGY"}
    addresses = env["TORCH_TPU_SLICEBUILDER_ADDRESSES"].split(",")
    assert len(addresses) == 4 and len(set(addresses)) == 4
    assert all(a.startswith("localhost:") for a in addresses)
    assert env["TORCH_TPU_TOPOLOGY"] == "2x2"
    assert environment.set_tpu_launch_env(8, env={})["TORCH_TPU_TOPOLOGY"] == "2x4"
    assert environment.set_tpu_launch_env(2, env={})["TORCH_TPU_TOPOLOGY"] == "1x2"
    # The user's values are kept, and checked against the count.
    mine = {"TORCH_TPU_TOPOLOGY": "4x1"}
    assert environment.set_tpu_launch_env(4, env=mine)["TORCH_TPU_TOPOLOGY"] == "4x1"
    with pytest.raises(ValueError, match="holds 4 chips, not nproc_per_node=2"):
        environment.set_tpu_launch_env(2, env={"TORCH_TPU_TOPOLOGY": "2x2"})
    with pytest.raises(ValueError, match="names 1 processes"):
        environment.set_tpu_launch_env(2, env={"TORCH_TPU_SLICEBUILDER_ADDRESSES": "h:1"})
    with pytest.raises(ValueError, match="not host:port"):
        environment.set_tpu_launch_env(1, env={"TORCH_TPU_SLICEBUILDER_ADDRESSES": "h"})
    with pytest.raises(ValueError, match="positive integer"):
        environment.set_tpu_launch_env(0, env={})


def test_prepare_tpu_environment_and_module_names(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_SLICEBUILDER_ADDRESSES", raising=False)
    monkeypatch.delenv("TORCH_TPU_TOPOLOGY", raising=False)
    from torch.tpu.distributed import environment as via_torch

    assert via_torch is environment
    assert torch.tpu.distributed.prepare_tpu_environment is environment.prepare_tpu_environment
    environment.prepare_tpu_environment(world_size=8)
    assert len(torch_tpu.settings.raw("TORCH_TPU_SLICEBUILDER_ADDRESSES").split(",")) == 8
    assert torch_tpu.settings.raw("TORCH_TPU_TOPOLOGY") == "2x4"


def test_python_m_environment_prints_exports():
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_TPU_SLICEBUILDER_ADDRESSES", "TORCH_TPU_TOPOLOGY")}
    r = subprocess.run([sys.executable, "-P", "-m", "torch_tpu.distributed.environment", "--nproc_per_node=4"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split("=", 1) for line in r.stdout.split())
    assert lines["TORCH_TPU_TOPOLOGY"] == "2x2"
    assert len(lines["TORCH_TPU_SLICEBUILDER_ADDRESSES"].split(",")) == 4
    # The torch.tpu form: an installed torch_tpu is imported by torch's autoload first.
    code = ("import sys, runpy, torch_tpu; sys.argv = ['environment', '--nproc-per-node', '8'];"
            "runpy.run_module('torch.tpu.distributed.environment', run_name='__main__')")
    r = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "TORCH_TPU_TOPOLOGY=2x4" in r.stdout.split()
    bad = subprocess.run([sys.executable, "-P", "-m", "torch_tpu.distributed.environment", "--nproc_per_node=0"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "positive integer" in bad.stderr


def test_rank_maps_torchtpu_variables_onto_libtpu():
    addresses = ["10.0.0.1:9001", "10.0.0.1:9002", "10.0.0.2:9001", "10.0.0.2:9002"]
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
           "TORCH_TPU_SLICEBUILDER_ADDRESSES": ",".join(addresses), "TORCH_TPU_TOPOLOGY": "2x2"}
    got = compute_tpu_launch_env(env, host_layout=(2, 1, 1))
    assert got["TPU_PROCESS_ADDRESSES"] == ",".join(addresses)
    assert got["TPU_PROCESS_PORT"] == "9002"
    assert got["TPU_WORKER_HOSTNAMES"] == "10.0.0.1,10.0.0.2"
    assert got["TPU_PROCESS_BOUNDS"] == "2,2,1"
    assert got["CLOUD_TPU_TASK_ID"] == "3" and got["TPU_VISIBLE_CHIPS"] == "1"
    with pytest.raises(ValueError, match="holds 2 chips, not WORLD_SIZE=4"):
        compute_tpu_launch_env(dict(env, TORCH_TPU_TOPOLOGY="1x2"), host_layout=(2, 1, 1))
    with pytest.raises(ValueError, match="rank 1 is on"):
        compute_tpu_launch_env(dict(env, TORCH_TPU_SLICEBUILDER_ADDRESSES="a:1,b:1,c:1,c:2"), host_layout=(2, 1, 1))


def test_tpu_visible_devices_limits_device_count():
    code = "import torch, torch_tpu; print(torch.tpu.device_count(), torch.ones(2, device='tpu:1').sum().item())"
    r = run_python(code, TORCH_TPU_NUM_DEVICES="4", TPU_VISIBLE_DEVICES="1,3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "2.0"]
    r = run_python("import torch, torch_tpu; print(torch.tpu.device_count())",
                   TORCH_TPU_NUM_DEVICES="4", TPU_VISIBLE_DEVICES="5")
    assert r.stdout.split() == ["0"]  # no usable device: is_available() is False
    r = run_python("import torch, torch_tpu; torch.ones(1, device='tpu')",
                   TORCH_TPU_NUM_DEVICES="4", TPU_VISIBLE_DEVICES="0,0")
    assert r.returncode != 0 and "TPU_VISIBLE_DEVICES=0,0: device 0 is listed twice" in r.stderr


def test_rank_applies_the_parent_step_when_its_group_starts():
    code = (
        "import os, torch, torch.distributed as dist, torch_tpu\n"
        "dist.init_process_group('tpu_dist')\n"
        "t = torch.ones(2, device='tpu'); dist.all_reduce(t)\n"
        "print(os.environ['TPU_PROCESS_ADDRESSES'], os.environ['TPU_PROCESS_PORT'], os.environ['TPU_PROCESS_BOUNDS'],"
        " t.tolist())\n"
    )
    r = run_python(code, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", GROUP_RANK="0",
                   MASTER_ADDR="localhost", MASTER_PORT=str(29500 + os.getpid() % 1000),
                   TORCH_TPU_SLICEBUILDER_ADDRESSES="localhost:9123", TORCH_TPU_TOPOLOGY="1x1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["localhost:9123", "9123", "1,1,1", "[1.0,", "1.0]"]
