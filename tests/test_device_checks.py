"""Device-side checks: an op handed bad data (an index out of range, a bad
target class, bad multinomial weights, an integer division by zero) raises the exception PyTorch's CPU kernel raises, naming the
op and the bad value, the next time the host waits; in strict eager, fused
eager and compiled mode. The process stays usable after it."""
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torch_tpu


def _x(dev):
    return torch.arange(12, dtype=torch.float32).reshape(3, 4).to(dev)


def _i(values, dev):
    return torch.tensor(values).to(dev)


# name -> fn(device, bad): the op with an index that is in range (bad=False)
# or out of range (bad=True).
CASES = {
    "index_select": lambda d, bad: _x(d).index_select(0, _i([2, 5 if bad else 0], d)),
    "index_select_negative": lambda d, bad: _x(d).index_select(1, _i([-1 if bad else 3], d)),
    "embedding": lambda d, bad: F.embedding(_i([[0, 7 if bad else 2]], d), _x(d)),
    "gather": lambda d, bad: _x(d).gather(0, _i([[0, 1, 3 if bad else 2, 0]], d)),
    "gather_negative": lambda d, bad: _x(d).gather(1, _i([[-1 if bad else 1]] * 3, d)),
    "scatter": lambda d, bad: _x(d).scatter(0, _i([[0, 4 if bad else 1, 0, 0]], d), 1.0),
    "scatter_add": lambda d, bad: _x(d).scatter_add(1, _i([[9 if bad else 3]], d), _x(d)[:1, :1]),
    "scatter_reduce": lambda d, bad: _x(d).scatter_reduce(0, _i([[3 if bad else 2, 0, 0, 0]], d), _x(d)[:1],
                                                          "amax"),
    "index_add": lambda d, bad: _x(d).index_add(0, _i([3 if bad else 1], d), _x(d)[:1]),
    "index_copy": lambda d, bad: _x(d).index_copy(0, _i([-1 if bad else 2], d), _x(d)[:1]),
    "index_fill": lambda d, bad: _x(d).index_fill(1, _i([-5 if bad else -4], d), 0.5),
    "take": lambda d, bad: _x(d).take(_i([-13 if bad else -12, 3], d)),
    "put": lambda d, bad: _x(d).put(_i([12 if bad else 11], d), _x(d)[0, :1]),
    "advanced_index": lambda d, bad: _x(d)[_i([0, 3 if bad else -3], d)],
    "advanced_index_dim1": lambda d, bad: _x(d)[:, _i([[1], [-5 if bad else -4]], d)],
    "index_put": lambda d, bad: _x(d).index_put((_i([1, 3 if bad else 2], d),), _i([1.0], d)),
    "cross_entropy": lambda d, bad: F.cross_entropy(_x(d), _i([0, 3, 4 if bad else -100], d)),
    "nll_loss_negative": lambda d, bad: F.nll_loss(_x(d), _i([0, -1 if bad else 1, 2], d)),
    # embedding_bag: the CPU's fast path names the position, the others only the value.
    # (A bad index in the CPU fast path's last bag reports "Expected i < index_size"
    # instead, from its error reporter reading past the offsets; tpu names it.)
    "embedding_bag": lambda d, bad: F.embedding_bag(_i([0, 5 if bad else 1, 1, 0], d), _x(d), _i([0, 2], d)),
    "embedding_bag_max": lambda d, bad: F.embedding_bag(_i([[1, 3 if bad else 2]], d), _x(d), mode="max"),
    "embedding_bag_padding": lambda d, bad: F.embedding_bag(_i([1, -2 if bad else 2], d), _x(d), _i([0], d),
                                                            padding_idx=1),
    "embedding_bag_offsets": lambda d, bad: F.embedding_bag(_i([1, 2], d), _x(d), _i([1 if bad else 0, 1], d)),
    "embedding_bag_last_offset": lambda d, bad: F.embedding_bag(_i([1, 2], d), _x(d), _i([0, 3 if bad else 2], d),
                                                                include_last_offset=True),
    # multinomial (deterministic weights): the checks without and with replacement.
    "multinomial_negative": lambda d, bad: torch.multinomial(_i([0.0, 1.0, -1.0 if bad else 0.0], d), 1),
    "multinomial_nan": lambda d, bad: torch.multinomial(_i([0.0, 1.0, float("nan") if bad else 0.0], d), 1),
    "multinomial_zero_row": lambda d, bad: torch.multinomial(_i([[0.0, 2.0], [0.0, 0.0 if bad else 1.0]], d), 1),
    "multinomial_replacement_negative": lambda d, bad: torch.multinomial(
        _i([[0.0, 1.0], [-1.0 if bad else 0.0, 1.0]], d), 3, replacement=True),
    "multinomial_replacement_inf": lambda d, bad: torch.multinomial(
        _i([[0.0, 1.0], [0.0, float("inf") if bad else 1.0]], d), 3, replacement=True),
    "multinomial_replacement_zero_row": lambda d, bad: torch.multinomial(
        _i([[0.0, 0.0 if bad else 1.0], [-1.0 if bad else 0.0, 1.0]], d), 2, replacement=True),
    # integer division by zero
    "floor_divide_int": lambda d, bad: _i([7, -7, 3], d) // _i([2, 0 if bad else 3, 1], d),
    "div_trunc_int": lambda d, bad: torch.div(_i([7, -7], d), _i([0 if bad else 2, 3], d), rounding_mode="trunc"),
    "div_floor_scalar": lambda d, bad: torch.div(_i([7, -7], d), 0 if bad else 2, rounding_mode="floor"),
    "remainder_int": lambda d, bad: torch.remainder(_i([[7, -7]], d), _i([[3], [0 if bad else 2]], d)),
    "fmod_int": lambda d, bad: torch.fmod(_i([7, -7], d).int(), _i([0 if bad else 4, 3], d).int()),
}

MODES = ("strict", "fused", "compiled")


def _expected_error(name):
    with pytest.raises(Exception) as e:
        CASES[name]("cpu", True)
    return type(e.value), str(e.value).split("\n")[0]


def _run(name, mode, bad):
    fn = CASES[name]
    if mode == "compiled":
        torch._dynamo.reset()
        out = torch.compile(lambda: fn("tpu", bad), backend="tpu")()
    else:
        with torch_tpu.eager_mode(mode):
            out = fn("tpu", bad)
    return out.cpu()  # the host waits here


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_index_raises_the_cpu_error(name, mode):
    torch.testing.assert_close(_run(name, mode, bad=False), CASES[name]("cpu", False))
    err, message = _expected_error(name)
    with pytest.raises(err) as e:
        _run(name, mode, bad=True)
        torch.tpu.synchronize()
    text = str(e.value)
    assert message in text, (message, text)
    assert re.search(r"aten::\w+", text), text  # names the op
    # Usable afterwards, and the next program raises nothing stale.
    torch.testing.assert_close(_run(name, mode, bad=False), CASES[name]("cpu", False))
    torch.tpu.synchronize()


def test_synchronize_raises_a_pending_check():
    y = _x("tpu").index_select(0, _i([7], "tpu"))
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.tpu.synchronize()
    del y
    torch.tpu.synchronize()


_SCRIPT = textwrap.dedent("""
    import torch, torch_tpu
    x = torch.zeros(3).to("tpu")
    try:
        y = x.index_select(0, torch.tensor([5]).to("tpu"))
        print("returned")
        y.cpu()
        print("read")
    except IndexError as e:
        print("raised", e)
""")


@pytest.mark.parametrize("env,expect", [
    ({"TORCH_TPU_LAUNCH_BLOCKING": "1"}, "raised"),   # at the op itself
    ({"TORCH_TPU_DEVICE_CHECKS": "0"}, "returned\nread"),  # checks off: no error
    ({}, "returned\nraised"),                         # at the host read
])
def test_launch_blocking_and_the_off_switch(tmp_path, env, expect):
    r = subprocess.run([sys.executable, "-c", _SCRIPT], env=dict(os.environ, **env), capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [ln.split(" ")[0] for ln in r.stdout.strip().splitlines()]
    assert lines == expect.split("\n"), r.stdout


def test_integer_division_in_a_bucketed_graph_ignores_the_padding():
    """Shape buckets pad a symbolic size with zeros; an integer divisor's
    padding must not trip the division-by-zero check."""
    torch._dynamo.reset()
    fn = lambda a, b: (torch.div(a, b, rounding_mode="floor"), torch.remainder(a, b))  # noqa: E731
    f = torch.compile(fn, backend="tpu", dynamic=True)
    before = torch_tpu.compile_stats()["bucketed_compiles"]
    for n in (3, 5, 6):
        a, b = torch.arange(1, n + 1), torch.full((n,), 2)
        torch.testing.assert_close([t.cpu() for t in f(a.to("tpu"), b.to("tpu"))], list(fn(a, b)))
    torch.tpu.synchronize()
    assert torch_tpu.compile_stats()["bucketed_compiles"] > before
