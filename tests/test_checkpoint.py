"""Checkpoints of tpu tensors: torch.save / torch.load with map_location, the
byte views of storages they rely on, and safetensors files, with zero CPU
fallbacks."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_tpu
from safetensors.torch import load_file, load_model, save_file, save_model

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool]


def _sample(dtype, n=7):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(n, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g) * 100).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, (n,), generator=g).to(dtype)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))


def _train(model, opt, steps, device, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, y = torch.randn(8, 6, generator=g).to(device), torch.randn(8, 3, generator=g).to(device)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()


def _flat(obj, prefix=""):
    """(path, tensor) for every tensor in nested dicts/lists."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flat(v, f"{prefix}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _flat(v, f"{prefix}/{i}")


def _assert_same(loaded, ref, device_type=None):
    """Same tensors, values and dtypes; on `device_type`, or where `ref` has them when None."""
    a, b = dict(_flat(loaded)), dict(_flat(ref))
    assert a.keys() == b.keys() and a
    for k in a:
        assert a[k].device.type == (device_type or b[k].device.type), f"{k} on {a[k].device}"
        assert a[k].dtype == b[k].dtype, k
        assert torch.equal(a[k].cpu(), b[k].cpu()), k


# ---- the byte views torch.save and torch.load go through ---------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_storage_bytes_match_cpu(dtype):
    x = _sample(dtype)
    t = x.to("tpu")
    assert list(t.untyped_storage().cpu()) == list(x.untyped_storage())
    assert torch.equal(t.view(torch.uint8).cpu(), x.view(torch.uint8))
    assert torch_tpu.fallback_ops() == {}


def test_storage_upload_as_bytes_then_read_typed():
    x = torch.tensor([1.5, -2.0, 3.25])
    s = torch.UntypedStorage(x.untyped_storage().nbytes(), device="tpu")
    s.copy_(x.untyped_storage())                     # what torch.load(map_location="tpu") does
    t = torch.empty(0, device="tpu").set_(s, 0, (3,), (1,))
    assert torch.equal(t.cpu(), x)


def test_write_through_a_view_of_another_width():
    x = torch.tensor([1.0, 2.0, -3.5])
    t = x.to("tpu")
    t.view(torch.uint8)[3] = 0                       # the high byte of element 0
    t.view(torch.int16)[3] = 16448                   # the high half of element 1
    x.view(torch.uint8)[3] = 0
    x.view(torch.int16)[3] = 16448
    assert torch.equal(t.cpu(), x)
    h = torch.arange(8, dtype=torch.float16)
    assert torch.equal(h.to("tpu").view(torch.float32).cpu(), h.view(torch.float32))


# ---- torch.save / torch.load ----------------------------------------------------------

@pytest.fixture
def trained():
    model = _model().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    _train(model, opt, 3, "tpu")
    return model, opt


def test_save_load_map_location_tpu_and_cpu(trained, tmp_path):
    model, opt = trained
    ckpt = {"model": model.state_dict(), "optim": opt.state_dict(), "step": 3}
    path = tmp_path / "ckpt.pt"
    torch.save(ckpt, path)
    _assert_same(torch.load(path, map_location="tpu"), ckpt, "tpu")
    _assert_same(torch.load(path, map_location="cpu"), ckpt, "cpu")
    _assert_same(torch.load(path), ckpt)  # the saved devices (AdamW keeps `step` on the CPU)
    _assert_same(torch.load(path, map_location=torch.device("tpu", 1)), ckpt, "tpu")
    assert torch.load(path, map_location="tpu:1")["model"]["0.weight"].device == torch.device("tpu", 1)
    assert torch.load(path, map_location={"tpu:0": "tpu:1"})["model"]["0.weight"].device == torch.device("tpu", 1)
    loaded = torch.load(path, map_location="tpu", weights_only=True)
    assert loaded["step"] == 3 and loaded["model"]["1.num_batches_tracked"].dtype == torch.int64
    assert torch_tpu.fallback_ops() == {}


def test_cpu_saved_checkpoint_loads_to_tpu(tmp_path):
    model = _model()
    torch.save(model.state_dict(), tmp_path / "cpu.pt")
    _assert_same(torch.load(tmp_path / "cpu.pt", map_location="tpu"), model.state_dict(), "tpu")


def test_resume_matches_uninterrupted_training(tmp_path):
    """Save after 3 steps, load into fresh objects, train 3 more: the same
    parameters as 6 steps without a break."""
    ref = _model().to("tpu")
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    _train(ref, ref_opt, 3, "tpu")
    torch.save({"model": ref.state_dict(), "optim": ref_opt.state_dict()}, tmp_path / "mid.pt")
    _train(ref, ref_opt, 3, "tpu", seed=2)

    ck = torch.load(tmp_path / "mid.pt", map_location="tpu")
    model = _model().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optim"])
    assert all(v.device.type == "tpu" for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    _train(model, opt, 3, "tpu", seed=2)
    for a, b in zip(model.state_dict().values(), ref.state_dict().values()):
        assert torch.equal(a.cpu(), b.cpu())
    assert torch_tpu.fallback_ops() == {}


def test_shared_storage_and_views_survive(tmp_path):
    base = torch.arange(12.0, device="tpu").reshape(3, 4)
    obj = {"base": base, "row": base[1], "colT": base.t()[2:]}
    torch.save(obj, tmp_path / "views.pt")
    for loc in ("tpu", "cpu"):
        got = torch.load(tmp_path / "views.pt", map_location=loc)
        _assert_same(got, obj, loc)
        assert got["colT"].stride() == obj["colT"].stride()
        got["base"][1, 0] = -1.0  # one storage: the views see the write
        assert got["row"][0].item() == -1.0
        assert got["colT"][0, 1].item() == base[1, 2].item()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_save_load_each_dtype(dtype, tmp_path):
    x = _sample(dtype).to("tpu")
    torch.save(x, tmp_path / "x.pt")
    for loc in ("tpu", "cpu"):
        y = torch.load(tmp_path / "x.pt", map_location=loc)
        assert y.device.type == loc and y.dtype == dtype and torch.equal(y.cpu(), x.cpu())


# ---- safetensors ---------------------------------------------------------------------

def test_safetensors_save_and_load_to_tpu(trained, tmp_path):
    model, _ = trained
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    extra = {f"x_{str(d).split('.')[1]}": _sample(d).to("tpu") for d in DTYPES}
    path = str(tmp_path / "m.safetensors")
    save_file({**sd, **extra}, path)
    for device in ("tpu", "tpu:1", torch.device("tpu", 0)):
        got = load_file(path, device=device)
        _assert_same(got, {**sd, **extra}, "tpu")
        assert got["0.weight"].device == torch.device(device if device != "tpu" else "tpu:0")
    _assert_same(load_file(path), {**sd, **extra}, "cpu")  # other devices go to safetensors itself
    assert torch_tpu.fallback_ops() == {}


def test_safetensors_load_model_to_tpu(trained, tmp_path):
    model, _ = trained
    path = str(tmp_path / "model.safetensors")
    save_model(model, path)
    fresh = copy.deepcopy(_model()).to("tpu")
    missing, unexpected = load_model(fresh, path, device="tpu")
    assert not missing and not unexpected
    for a, b in zip(fresh.state_dict().values(), model.state_dict().values()):
        assert a.device.type == "tpu" and torch.equal(a.cpu(), b.cpu())


def test_safetensors_refuses_a_non_contiguous_tpu_tensor(tmp_path):
    with pytest.raises(ValueError, match="non contiguous"):
        save_file({"t": torch.randn(3, 4, device="tpu").t()}, str(tmp_path / "bad.safetensors"))
