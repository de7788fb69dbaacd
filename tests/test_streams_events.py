"""Streams and events on tpu, checked against CUDA's documented semantics.

A tpu stream orders completion only (buffers never change): an event marks
"everything enqueued on the stream so far has completed", Stream.wait_event
makes later marks of the stream include the event's work, and nothing here
ever waits for the whole device. Tests that need pending work build a long
chain of matmuls; conftest runs with two devices."""
import threading
import time

import pytest
import torch
from fresh_python import run_snippet

import torch_tpu


# TORCH_TPU_LAUNCH_BLOCKING=1 waits for every program as it is issued.
NO_PENDING_WORK = "launch blocking: no work is ever pending"
needs_pending_work = pytest.mark.skipif(torch_tpu._C._launch_blocking(), reason=NO_PENDING_WORK)


def long_work(device="tpu", n=1024, steps=40):
    """A chain of matmuls the CPU plugin needs a good fraction of a second for."""
    x = torch.full((n, n), 1.0 / n, device=device)
    for _ in range(steps):
        x = x @ x
    return x


def long_work_on(stream):
    """long_work() enqueued on `stream` -> (its result, the event recorded after it)."""
    with torch.tpu.stream(stream):
        x = long_work()
    return x, stream.record_event()


@pytest.fixture
def tpu0_busy():
    """Long work pending on a stream of tpu:0 -> (the event recorded after it,
    a new stream of tpu:1); the work's result lives until the test ends."""
    if torch_tpu._C._launch_blocking():
        pytest.skip(NO_PENDING_WORK)
    s0, s1 = torch.tpu.Stream(device=0), torch.tpu.Stream(device=1)
    x, e0 = long_work_on(s0)
    yield e0, s1
    del x


def wait_until(pred, timeout=30.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


# ---- streams: identity, current stream, context managers -------------------------------

def test_default_and_current_stream():
    s = torch.tpu.current_stream()
    assert isinstance(s, torch.tpu.Stream) and isinstance(s, torch.Stream)
    assert s.stream_id == 0 and s.device == torch.device("tpu", 0)
    assert s == torch.tpu.default_stream() == torch.tpu.default_stream(0)
    assert torch.tpu.current_stream(1).device == torch.device("tpu", 1)
    assert torch.accelerator.current_stream() == s


def test_new_streams_are_distinct_objects_with_ids():
    a, b = torch.tpu.Stream(), torch.tpu.Stream()
    assert a.stream_id != b.stream_id and a.stream_id != 0
    assert a != b and a == torch.tpu.Stream(stream_id=a.stream_id, device_index=0, device_type=a.device_type)
    assert len({a, b, torch.tpu.default_stream()}) == 3
    assert torch.tpu.Stream(device=1).device == torch.device("tpu", 1)
    assert torch.tpu.Stream(device="tpu:1").device_index == 1
    assert torch.tpu.Stream(priority=-1).priority == -1 and a.priority == 0
    assert "torch.tpu.Stream" in repr(a)


def test_stream_context_sets_and_restores():
    s = torch.tpu.Stream()
    with torch.tpu.stream(s) as entered:
        assert entered is s
        assert torch.tpu.current_stream() == s
        assert torch.accelerator.current_stream() == s
        inner = torch.tpu.Stream()
        with torch.tpu.stream(inner):
            assert torch.tpu.current_stream() == inner
        assert torch.tpu.current_stream() == s
    assert torch.tpu.current_stream().stream_id == 0
    with torch.tpu.stream(None):
        assert torch.tpu.current_stream().stream_id == 0


def test_stream_on_another_device_switches_device_in_context():
    s1 = torch.tpu.Stream(device=1)
    with torch.tpu.stream(s1):
        assert torch.tpu.current_device() == 1
        assert torch.tpu.current_stream() == s1
        assert torch.ones(2, device="tpu").device.index == 1
    assert torch.tpu.current_device() == 0
    assert torch.tpu.current_stream(0).stream_id == 0
    assert torch.tpu.current_stream(1).stream_id == 0


def test_set_stream_and_threads_have_their_own_current_stream():
    s = torch.tpu.Stream()
    torch.tpu.set_stream(s)
    try:
        assert torch.tpu.current_stream() == s
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.tpu.current_stream().stream_id))
        t.start()
        t.join()
        assert seen == [0]  # current stream is per thread, as in CUDA
    finally:
        torch.tpu.set_stream(torch.tpu.default_stream())
    assert torch.tpu.current_stream().stream_id == 0
    torch.tpu.set_stream(None)  # a no-op, as torch.cuda.set_stream(None)


def test_generic_torch_stream_and_event():
    s = torch.Stream(device="tpu")
    assert s.device_type == torch.tpu.default_stream().device_type and s.stream_id != 0
    with s:
        assert torch.accelerator.current_stream() == s
        assert torch.tpu.current_stream() == s
        y = torch.ones(4, device="tpu") * 2
        e = torch.Event(device="tpu", enable_timing=True)
        e.record()
    assert torch.tpu.current_stream().stream_id == 0
    s.synchronize()
    assert s.query() and e.query()
    e2 = s.record_event(torch.Event(device="tpu", enable_timing=True))
    e2.synchronize()
    assert e.elapsed_time(e2) >= 0
    with pytest.raises(ValueError, match="enable_timing=True"):
        e.elapsed_time(s.record_event())
    torch.tpu.default_stream().wait_stream(s)
    torch.tpu.default_stream().wait_event(e)
    assert y.cpu().tolist() == [2.0] * 4


@needs_pending_work
def test_generic_and_tpu_objects_mix():
    ts, te = torch.tpu.Stream(), torch.tpu.Event(enable_timing=True)
    gs, ge = torch.Stream(device="tpu"), torch.Event(device="tpu", enable_timing=True)
    with torch.tpu.stream(gs):
        x = long_work(steps=10)
    te.record(gs)
    ts.wait_event(te)
    ge.record(ts)  # ts waited on gs's work
    assert ge.query() is False
    gs.wait_stream(ts)
    ge.synchronize()
    assert te.query() and gs.query()
    assert te.elapsed_time(ge) >= 0
    assert isinstance(ts.record_event(), torch.tpu.Event)
    assert torch.get_device_module("tpu").Stream is torch.tpu.Stream
    torch.accelerator.set_stream(ts)
    try:
        assert torch.tpu.current_stream() == ts
    finally:
        torch.accelerator.set_stream(torch.tpu.default_stream())
    del x


def test_bad_streams_raise():
    with pytest.raises((IndexError, ValueError), match="tpu:7 does not exist"):
        torch.tpu.Stream(device=7)
    with pytest.raises(RuntimeError, match="stream 12345 does not exist"):
        torch.tpu.set_stream(torch.tpu.Stream(stream_id=12345, device_index=0,
                                              device_type=torch.tpu.default_stream().device_type))
    with pytest.raises(ValueError, match="expected a tpu device"):
        torch.tpu.current_stream("cpu")
    with pytest.raises(RuntimeError, match="expected a tpu stream"):
        torch.ones(2, device="tpu").record_stream(torch.Stream(device="cpu"))


# ---- events ----------------------------------------------------------------------------

@needs_pending_work
def test_event_after_long_work_is_pending_then_complete():
    x = long_work()
    e = torch.tpu.Event()
    e.record()
    assert e.query() is False  # the matmul chain is still running
    e.synchronize()
    assert e.query() is True
    assert torch.allclose(x[:2, :2].cpu(), torch.full((2, 2), 1.0 / 1024))


def test_unrecorded_event_and_event_without_work():
    e = torch.tpu.Event()
    assert e.query()
    e.synchronize()  # nothing recorded: returns at once
    torch.tpu.synchronize()
    e.record()
    assert e.query()


def test_elapsed_time_is_positive_and_ordered():
    a, b, c = (torch.tpu.Event(enable_timing=True) for _ in range(3))
    a.record()
    x = long_work(steps=10)
    b.record()
    y = long_work(steps=20)
    c.record()
    c.synchronize()
    assert a.query() and b.query()
    ab, bc, ac = a.elapsed_time(b), b.elapsed_time(c), a.elapsed_time(c)
    assert ab > 0 and bc > 0
    assert ac >= ab and ac >= bc
    assert abs(ab + bc - ac) < 1e-3
    del x, y


@needs_pending_work
def test_elapsed_time_errors_like_cuda():
    a, b = torch.tpu.Event(), torch.tpu.Event()
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        a.elapsed_time(b)
    t0, t1 = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    t0.record()
    with pytest.raises(ValueError, match="must be recorded"):
        t0.elapsed_time(t1)
    x = long_work()
    t1.record()
    with pytest.raises(RuntimeError, match="must be completed"):
        t0.elapsed_time(t1)
    t1.synchronize()
    assert t0.elapsed_time(t1) > 0
    del x


def test_events_of_different_devices():
    e = torch.tpu.Event(enable_timing=True)
    e.record(torch.tpu.current_stream(1))
    assert e.device == torch.device("tpu", 1)
    with pytest.raises(RuntimeError, match="does not match recording stream's device"):
        e.record(torch.tpu.current_stream(0))
    f = torch.tpu.Event(enable_timing=True)
    f.record(torch.tpu.current_stream(0))
    f.synchronize()
    e.synchronize()
    with pytest.raises(RuntimeError, match="different devices"):
        f.elapsed_time(e)
    # A stream may wait on an event of another device (as in CUDA).
    torch.tpu.current_stream(0).wait_event(e)


def test_interprocess_event_is_refused():
    with pytest.raises(RuntimeError, match="interprocess"):
        torch.tpu.Event(interprocess=True)
    e = torch.tpu.Event(blocking=True)  # accepted: synchronize always sleeps
    e.record()
    e.synchronize()


@needs_pending_work
def test_rerecording_moves_the_event_and_earlier_waits_keep_their_version():
    s = torch.tpu.Stream()
    x, e = long_work_on(s)
    other = torch.tpu.Stream()
    other.wait_event(e)  # waits for the version recorded now
    e.record(torch.tpu.Stream())  # an idle stream: the new version is complete
    assert e.query()
    assert other.query() is False  # still behind the long work
    other.synchronize()
    assert s.query()
    del x


# ---- ordering across streams, and no whole-device waits ------------------------------

def test_streams_are_independent_without_a_wait(tpu0_busy):
    # XLA's CPU plugin runs one device's programs in order, so independence
    # shows across devices: waiting for tpu:1's stream leaves tpu:0's pending.
    e0, s1 = tpu0_busy
    with torch.tpu.stream(s1):
        y = torch.ones(8, device="tpu") + 1
    e1 = s1.record_event()
    e1.synchronize()  # waits for s1's work only
    assert e0.query() is False  # no device-wide (or process-wide) sync
    assert y.cpu().sum().item() == 16
    idle = torch.tpu.Stream(device=0).record_event()
    assert idle.query()  # an idle stream's event is complete, whatever else runs
    torch.tpu.synchronize()
    assert e0.query()


@needs_pending_work
def test_wait_event_orders_completion_without_blocking():
    s1, s2, s3 = torch.tpu.Stream(), torch.tpu.Stream(), torch.tpu.Stream()
    x, e1 = long_work_on(s1)
    t0 = time.perf_counter()
    s2.wait_event(e1)  # returns at once
    assert time.perf_counter() - t0 < 0.5  # the work takes seconds
    assert e1.query() is False
    assert s3.record_event().query()  # without the wait an idle stream is done
    e2 = s2.record_event()
    assert e2.query() is False  # s2's marks now include s1's work
    e2.synchronize()
    assert e1.query()
    del x


def test_wait_event_across_devices(tpu0_busy):
    e0, s1 = tpu0_busy
    s1.wait_event(e0)
    with torch.tpu.stream(s1):
        z = torch.ones(8, device="tpu") * 3
    assert z.cpu().tolist() == [3.0] * 8  # tpu:1's own work is done ...
    e1 = s1.record_event()
    assert e1.query() is False  # ... but work after the wait completes after e0's
    e1.synchronize()
    assert e0.query()


@needs_pending_work
def test_wait_stream_and_stream_query_synchronize():
    s1, s2 = torch.tpu.Stream(), torch.tpu.Stream()
    with torch.tpu.stream(s1):
        x = long_work()
    s2.wait_stream(s1)
    assert s1.query() is False and s2.query() is False
    s2.synchronize()
    assert s1.query() and s2.query()
    # Data produced on s1 and consumed on s2 after the wait is the finished value.
    with torch.tpu.stream(s2):
        w = x[:2, :2] * 2
    assert torch.allclose(w.cpu(), torch.full((2, 2), 2.0 / 1024))


@needs_pending_work
def test_default_stream_event_sees_work_of_the_default_stream_only():
    s = torch.tpu.Stream()
    with torch.tpu.stream(s):
        x = long_work()
    e = torch.tpu.Event()
    e.record()  # on the default stream, which did nothing since
    e.synchronize()
    assert s.query() is False
    torch.tpu.synchronize(0)  # the device-wide wait still waits for every stream
    assert s.query()
    del x


def test_event_wait_in_a_thread_does_not_hold_the_device():
    s = torch.tpu.Stream()
    x, e = long_work_on(s)
    done = []
    t = threading.Thread(target=lambda: (e.synchronize(), done.append(True)))
    t.start()
    y = (torch.ones(4, device="tpu") * 5).cpu()  # other work goes on meanwhile
    assert y.tolist() == [5.0] * 4
    t.join()
    assert done == [True] and e.query()
    del x


@needs_pending_work
@pytest.mark.parametrize("what", ["event", "stream"])
def test_waiting_releases_the_gil(what):
    s = torch.tpu.Stream()
    x, e = long_work_on(s)
    t = threading.Thread(target=e.synchronize if what == "event" else s.synchronize)
    t.start()
    ticks = 0
    while t.is_alive():  # Python keeps running while the other thread waits
        ticks += 1
        time.sleep(0.001)
    assert ticks > 10
    del x


def test_autograd_on_a_side_stream():
    x = torch.randn(16, 16, device="tpu", requires_grad=True)
    w = torch.randn(16, 16, device="tpu", requires_grad=True)
    xc, wc = (t.detach().cpu().requires_grad_() for t in (x, w))
    torch.tanh(xc @ wc).sum().backward()
    s = torch.tpu.Stream()
    with torch.tpu.stream(s):
        torch.tanh(x @ w).sum().backward()
    torch.tpu.current_stream().wait_stream(s)
    assert torch.allclose(x.grad.cpu(), xc.grad, atol=1e-4)
    assert torch.allclose(w.grad.cpu(), wc.grad, atol=1e-4)
    x.grad = w.grad = None
    with torch.tpu.stream(s):  # forward on the side stream, backward on the default one
        y = torch.tanh(x @ w).sum()
    y.backward()
    assert torch.allclose(x.grad.cpu(), xc.grad, atol=1e-4)


@needs_pending_work
def test_fused_eager_work_belongs_to_its_stream():
    torch_tpu.reset_fused_stats()
    with torch_tpu.eager_mode("fused"):
        s = torch.tpu.Stream()
        with torch.tpu.stream(s):
            x = long_work(steps=30)
        e = s.record_event()
        assert torch_tpu.fused_stats()["pending_ops"] == 0
        assert e.query() is False
        e.synchronize()
        reasons = torch_tpu.fused_stats()["flush_reasons"]
        assert reasons.get("stream", 0) + reasons.get("event", 0) >= 1
    assert torch.allclose(x[:1, :1].cpu(), torch.full((1, 1), 1.0 / 1024))


# ---- record_stream and the C++ users' view -------------------------------------------

def test_record_stream_is_accepted():
    s = torch.tpu.Stream()
    x = torch.arange(6.0, device="tpu")
    with torch.tpu.stream(s):
        y = x * 2
    x.record_stream(s)
    y.record_stream(torch.tpu.current_stream())
    del x
    assert y.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


# ---- CUDA device habits ----------------------------------------------------------------

def test_is_initialized_follows_first_use_and_set_device(tmp_path):
    # DeviceMesh calls torch.tpu.set_device(LOCAL_RANK) unless is_initialized().
    run_snippet(
        """
        import torch, torch_tpu
        assert not torch.tpu.is_initialized()
        torch.tpu.set_device(1)
        assert torch.tpu.is_initialized() and torch.tpu.current_device() == 1
        m = torch.nn.Linear(2, 2).to(1)
        assert m.weight.device == torch.device("tpu:1")
        assert torch.tpu.current_stream().device_index == 1
        """,
        cwd=tmp_path, timeout=120)


def test_device_habits_with_two_devices():
    assert torch.tpu.device_count() == 2
    torch.tpu.set_device(1)
    try:
        assert torch.tpu.current_device() == 1
        assert torch.device("tpu:1").index == 1
        m = torch.nn.Linear(3, 2).to(torch.device(f"tpu:{torch.tpu.current_device()}"))
        assert m.weight.device == torch.device("tpu", 1)
        assert torch.nn.Linear(3, 2).to(1).weight.device == torch.device("tpu", 1)  # an int means tpu
        out = m(torch.ones(1, 3, device="tpu"))
        assert out.device == torch.device("tpu", 1)
        torch.tpu.synchronize(1)
        torch.tpu.synchronize(torch.device("tpu:1"))
        torch.tpu.synchronize("tpu:1")
        assert torch.tpu.is_initialized()
        assert torch.tpu.current_stream().device_index == 1
    finally:
        torch.tpu.set_device(0)


def test_stream_code_under_torch_compile_gives_eager_results():
    s = torch.tpu.Stream()

    def f(x):
        with torch.tpu.stream(s):
            y = x * 2
        torch.tpu.current_stream().wait_stream(s)
        return y + 1

    x = torch.arange(4.0, device="tpu")
    out = torch.compile(f, backend="tpu")(x)  # stream calls graph-break and run eagerly
    assert out.cpu().tolist() == [1.0, 3.0, 5.0, 7.0]
    assert torch.tpu.current_stream().stream_id == 0
