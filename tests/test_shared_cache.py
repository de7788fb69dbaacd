"""The shared tier of the compile cache (TORCH_TPU_SHARED_CACHE_DIR): read
through on a local miss, written back on a compile, corrupt entries rejected."""
import glob
import json
import os
import subprocess
import sys

CODE = """
import json, torch, torch_tpu
x = torch.arange(6.0, device='tpu').reshape(2, 3)
print(json.dumps({"value": (x.sin() * 3).sum().item(), "compiles": torch_tpu.cache_info()["compiles"],
                  "local_hits": torch_tpu.cache_info()["disk_hits"], "shared": torch_tpu.shared_cache_info()}))
"""


def run(local, shared):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(local), TORCH_TPU_SHARED_CACHE_DIR=str(shared))
    r = subprocess.run([sys.executable, "-P", "-c", CODE], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_shared_tier_reads_through_writes_back_and_rejects_corrupt(tmp_path):
    shared = tmp_path / "shared"
    first = run(tmp_path / "host_a", shared)
    assert first["compiles"] >= 2 and first["shared"]["writes"] == first["compiles"]
    assert first["shared"]["dir"] == str(shared) and first["shared"]["entries"] == first["compiles"]
    # Another host: an empty local cache, every program from the shared tier.
    second = run(tmp_path / "host_b", shared)
    assert second["value"] == first["value"]
    assert second["compiles"] == 0 and second["shared"]["hits"] == first["compiles"]
    assert len(glob.glob(str(tmp_path / "host_b" / "*.tpuexe"))) == first["compiles"]  # copied locally
    third = run(tmp_path / "host_b", shared)  # now local hits, the shared tier not asked
    assert third["compiles"] == 0 and third["local_hits"] == first["compiles"] and third["shared"]["hits"] == 0
    # A corrupt shared entry is rejected and replaced by a compile.
    for f in glob.glob(str(shared / "*.tpuexe")):
        data = bytearray(open(f, "rb").read())
        data[-1] ^= 0xFF
        open(f, "wb").write(bytes(data))
    fourth = run(tmp_path / "host_c", shared)
    assert fourth["value"] == first["value"]
    assert fourth["shared"]["rejected"] == first["compiles"] and fourth["compiles"] == first["compiles"]
    assert fourth["shared"]["writes"] == first["compiles"]
    assert run(tmp_path / "host_d", shared)["shared"]["hits"] == first["compiles"]  # replaced entries load


def test_off_without_the_variable():
    import torch_tpu

    if torch_tpu.settings.raw("TORCH_TPU_SHARED_CACHE_DIR") is None:
        assert torch_tpu.shared_cache_info() is None
