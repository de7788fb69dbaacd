"""Compile once, execute many: a repeated call hits the program cache."""
import torch
import torch_tpu


def test_repeat_hits_cache():
    a = torch.randn(8, 8, device="tpu")
    b = torch.randn(8, 8, device="tpu")
    (a * b).cpu()
    before = torch_tpu.cache_info()
    for _ in range(5):
        (a * b).cpu()
    after = torch_tpu.cache_info()
    assert after["compiles"] == before["compiles"], "a repeated op recompiled"
    assert after["hits"] >= before["hits"] + 5


def test_changing_scalar_does_not_recompile():
    a = torch.randn(16, device="tpu")
    (a * 0.5).cpu()
    before = torch_tpu.cache_info()["compiles"]
    for s in (0.1, 0.2, 3.0, -7.5):
        torch.testing.assert_close((a * s).cpu(), a.cpu() * s)
    assert torch_tpu.cache_info()["compiles"] == before


def test_new_shape_compiles_once():
    a = torch.randn(3, 5, 7, device="tpu")
    before = torch_tpu.cache_info()["compiles"]
    a.add(1).cpu()
    a.add(1).cpu()
    assert torch_tpu.cache_info()["compiles"] == before + 1


def test_cache_info_fields():
    info = torch_tpu.cache_info()
    for k in ("hits", "misses", "compiles", "compile_seconds"):
        assert k in info
    assert info["compile_seconds"] >= 0


def test_float32_matmul_precision_selects_its_own_program():
    """torch.set_float32_matmul_precision is followed: each setting has its own
    program (HIGHEST / HIGH / DEFAULT dot precision), results stay right."""
    import torch_tpu
    # Shapes no other test multiplies, so no earlier test has compiled either program.
    a, b = torch.randn(7, 13), torch.randn(13, 5)
    ad, bd = a.to("tpu"), b.to("tpu")
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        (ad @ bd).cpu()
        before = torch_tpu.cache_info()["misses"]
        (ad @ bd).cpu()
        assert torch_tpu.cache_info()["misses"] == before
        torch.set_float32_matmul_precision("medium")
        got = (ad @ bd).cpu()
        assert torch_tpu.cache_info()["misses"] == before + 1
        # One bf16 pass: the operands rounded to bf16, accumulated in f32 (torch_tpu/precision.py).
        torch.testing.assert_close(got, a.bfloat16().float() @ b.bfloat16().float(), rtol=1e-5, atol=1e-5)
    finally:
        torch.set_float32_matmul_precision(old)


def test_program_cache_is_bounded_least_recently_used_first():
    """Each loaded executable costs JIT mappings, so the cache has a cap
    (TORCH_TPU_PROGRAM_CACHE_ENTRIES); results stay right past it."""
    import subprocess
    import sys
    code = (
        "import torch, torch_tpu\n"
        "keep = torch.ones(3, device='tpu')\n"
        "for n in range(1, 40):\n"
        "    (keep * 2).cpu()\n"
        "    x = torch.arange(float(n), device='tpu')\n"
        "    assert torch.equal((x + 1).cpu(), torch.arange(float(n)) + 1)\n"
        "info = torch_tpu.cache_info()\n"
        "before = info['compiles']\n"
        "(keep * 2).cpu()\n"
        "info = torch_tpu.cache_info()\n"
        "assert info['entries'] <= 8 and info['evictions'] > 0, info\n"
        "assert info['compiles'] == before, 'the hot program was evicted'\n"
    )
    env = dict(__import__("os").environ, TORCH_TPU_PROGRAM_CACHE_ENTRIES="8")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert r.returncode == 0, r.stderr[-2000:]
