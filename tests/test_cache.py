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
    a, b = torch.randn(8, 8), torch.randn(8, 8)
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
        torch.testing.assert_close(got, a @ b, rtol=1e-2, atol=1e-2)
    finally:
        torch.set_float32_matmul_precision(old)
