"""torch.profiler on tpu: device events for eager ops, fused clusters and
compiled graphs, read from key_averages() and the Chrome trace."""

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu
from torch_tpu.profiler import device_events, xla_profiler_available

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _profile(fn):
    fn()  # compile outside the window
    torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        out = fn()
        torch.tpu.synchronize()
    return prof, out


def _matmul():
    a = torch.randn(64, 32, device="tpu")
    b = torch.randn(32, 16, device="tpu")
    return a @ b


def test_eager_ops_are_device_events():
    prof, out = _profile(_matmul)
    torch.testing.assert_close(out.cpu(), out.cpu())  # still a valid result
    events = device_events(prof)
    names = [e.name for e in events]
    assert any("aten::mm" in n for n in names), names
    mm = next(e for e in events if "aten::mm" in e.name)
    assert mm.time_range.end >= mm.time_range.start
    # The table sorts by device time and shows the program's time.
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=20)
    assert "tpu aten::mm" in table
    avg = {e.key: e for e in prof.key_averages()}
    assert avg[mm.name].device_time_total > 0
    # The CPU op that launched it carries the device time too.
    assert avg["aten::mm"].device_time_total > 0


def test_chrome_trace_has_device_track_with_bytes_and_flops(tmp_path):
    prof, _ = _profile(_matmul)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and "aten::mm" in e.get("name", "")]
    assert kernels, sorted({e.get("cat") for e in events})
    mm = kernels[0]
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert mm["pid"] != cpu_ops[0]["pid"]  # its own track
    assert mm["dur"] >= 0
    window = [e["ts"] for e in cpu_ops] + [e["ts"] + e["dur"] for e in cpu_ops]
    # Starts inside the window (us); a program may start after the last host op
    # returned when the device is still busy with the one before it.
    assert min(window) - 1000 <= mm["ts"] <= max(window) + 2_000_000
    args = mm["args"]
    assert args["bytes_in"] == (64 * 32 + 32 * 16) * 4
    assert args["bytes_out"] == 64 * 16 * 4
    if "flops" in args:  # only where the plugin answers cost analysis (XLA's CPU plugin does not)
        assert args["flops"] >= 2 * 64 * 32 * 16
    names = {e.get("name") for e in events if e.get("ph") == "M"}
    assert "process_name" in names


def test_host_device_copies_are_their_own_events():
    x = torch.randn(128, 128)
    with profile(activities=ACTIVITIES) as prof:
        y = x.to("tpu")
        back = (y + 1).cpu()
    torch.testing.assert_close(back, x + 1)
    names = [e.name for e in device_events(prof)]
    assert "copy host to tpu" in names and "copy tpu to host" in names, names


def test_fused_cluster_is_one_device_event(fused):
    def step():
        x = torch.ones(16, 16, device="tpu")
        return (x * 2 + 1).sin().cpu()

    prof, out = _profile(step)
    torch.testing.assert_close(out, (torch.ones(16, 16) * 2 + 1).sin())
    clusters = [e for e in device_events(prof) if e.name.startswith("tpu fused cluster")]
    assert clusters, [e.name for e in device_events(prof)]


def test_compiled_graph_is_one_device_event():
    def f(x):
        return torch.relu(x @ x.T) * 2

    cf = torch.compile(f, backend="tpu")
    x = torch.randn(32, 32, device="tpu")
    prof, out = _profile(lambda: cf(x))
    torch.testing.assert_close(out.cpu(), f(x.cpu()), rtol=1e-4, atol=1e-4)
    graphs = [e for e in device_events(prof) if e.name.startswith("tpu graph")]
    assert graphs, [e.name for e in device_events(prof)]
    assert all(e.time_range.end >= e.time_range.start for e in graphs)


def test_no_device_events_without_the_device_activity():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _matmul()
        torch.tpu.synchronize()
    assert device_events(prof) == []
    # and none recorded outside a profile: a later profile starts empty
    _matmul()
    torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        pass
    assert device_events(prof) == []


def test_xla_profiler_extension_is_reported():
    assert isinstance(xla_profiler_available(), bool)
    assert "extensions" in torch_tpu.runtime_info()
