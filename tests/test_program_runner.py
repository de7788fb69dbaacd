"""The one program runner: every mode's programs share one bounded
least-recently-used cache, counted per mode, and a rule that breaks its
contract is reported the same way from every mode."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu
from torch_tpu import _C

MODES = ("eager", "fused", "graph", "collective")


def _modes():
    return torch_tpu.cache_info()["modes"]


def test_cache_info_totals_are_the_sum_of_the_modes():
    torch.randn(3, device="tpu").add(1).cpu()
    info = torch_tpu.cache_info()
    assert set(info["modes"]) == set(MODES)
    for k in ("hits", "misses", "compiles", "entries", "evictions"):
        assert info[k] == sum(info["modes"][m][k] for m in MODES), k
    assert info["compile_seconds"] == pytest.approx(sum(info["modes"][m]["compile_seconds"] for m in MODES))


def test_each_mode_counts_its_own_programs():
    x = torch.randn(5, 7, device="tpu")
    before = _modes()
    (x * 3 - 1).cpu()  # strict eager: two programs
    mid = _modes()
    assert mid["eager"]["compiles"] - before["eager"]["compiles"] == 2
    assert mid["fused"]["compiles"] == before["fused"]["compiles"]
    assert mid["graph"]["compiles"] == before["graph"]["compiles"]

    with torch_tpu.eager_mode("fused"):
        (x.sin() * 5).cpu()  # one cluster
    fused = _modes()
    assert fused["fused"]["compiles"] - mid["fused"]["compiles"] == 1
    assert fused["graph"]["compiles"] == mid["graph"]["compiles"]

    f = torch.compile(lambda t: (t.cos() + 2).sum(0), backend="tpu")
    torch.testing.assert_close(f(x).cpu(), (x.cpu().cos() + 2).sum(0))
    graph = _modes()
    assert graph["graph"]["compiles"] - fused["graph"]["compiles"] == 1
    # A second identical call of each mode compiles nothing and hits.
    (x * 3 - 1).cpu()
    with torch_tpu.eager_mode("fused"):
        (x.sin() * 5).cpu()
    f(x).cpu()
    again = _modes()
    for m in ("eager", "fused", "graph"):  # "collective": tests/test_xla_collectives.py
        assert again[m]["compiles"] == graph[m]["compiles"], m
        assert again[m]["hits"] > graph[m]["hits"], m


def test_identical_graphs_share_one_executable():
    inputs = [(torch.float32, [4, 6])]
    nodes = [("aten::neg", [("T", 0)], [(torch.float32, [4, 6])], [1])]
    first = _C._GraphExecutable("neg_a", inputs, nodes, [1])
    before = _modes()["graph"]
    second = _C._GraphExecutable("neg_b", inputs, nodes, [1])
    after = _modes()["graph"]
    assert after["compiles"] == before["compiles"] and after["hits"] == before["hits"] + 1
    x = torch.randn(4, 6)
    for exe in (first, second):
        torch.testing.assert_close(exe([x.to("tpu")])[0].cpu(), -x)


def test_a_broken_rule_contract_raises_naming_the_op_and_shapes():
    # The graph claims neg has two results: the rule gives one, which is an
    # error in the graph description (never a silent eager run).
    with pytest.raises(RuntimeError, match=r"aten::neg for \(f32\[2, 3\]\) returned 1 results; PyTorch expects 2") as e:
        _C._GraphExecutable("bad", [(torch.float32, [2, 3])],
                            [("aten::neg", [("T", 0)], [(torch.float32, [2, 3])] * 2, [1, 2])], [1])
    assert not isinstance(e.value, _C.LoweringError)


_BOUNDED = textwrap.dedent("""
    import torch, torch_tpu
    x = {n: torch.randn(n).to("tpu") for n in range(1, 13)}
    for n in range(1, 13):          # 12 programs through a cache of 8
        (x[n] + 1).cpu()
    info = torch_tpu.cache_info()
    assert info["entries"] == 8, info
    assert info["modes"]["eager"]["evictions"] == 4, info
    c = info["compiles"]
    (x[12] + 1).cpu()               # most recently used: still cached
    assert torch_tpu.cache_info()["compiles"] == c
    (x[1] + 1).cpu()                # least recently used: was evicted
    assert torch_tpu.cache_info()["compiles"] == c + 1

    # A torch.compile graph whose program was evicted compiles again and
    # still computes the right values.
    f = torch.compile(lambda t: t.exp() * 2, backend="tpu")
    a = torch.randn(3, 3)
    a_tpu = a.to("tpu")
    torch.testing.assert_close(f(a_tpu).cpu(), a.exp() * 2)
    for n in range(1, 13):
        (x[n] * 3).cpu()
    g = torch_tpu.cache_info()["modes"]["graph"]
    assert g["evictions"] == 1 and g["entries"] == 0, g
    torch.testing.assert_close(f(a_tpu).cpu(), a.exp() * 2)
    assert torch_tpu.cache_info()["modes"]["graph"]["compiles"] == g["compiles"] + 1
    print("ok")
""")


def test_the_cache_is_bounded_least_recently_used_first(tmp_path):
    env = dict(os.environ, TORCH_TPU_PROGRAM_CACHE_ENTRIES="8", TORCH_TPU_CACHE="0")
    r = subprocess.run([sys.executable, "-c", _BOUNDED], env=env, capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
