"""Failures under torchrun are loud, never a hang
(tests/dist_workers/failures.py)."""

import re

import pytest

from dist_launch import torchrun


def raised_lines(out):
    return [line for line in out.splitlines() if "RAISED:" in line or "NO ERROR" in line]


def test_mismatched_shapes_and_dtypes_raise_on_every_rank():
    rc, out = torchrun("failures.py", "mismatch", timeout=120)
    lines = raised_lines(out)
    assert rc == 0 and len(lines) == 10 and not any("NO ERROR" in l for l in lines), out[-4000:]
    assert sum("rank 0: all_reduce Float[4]" in l and "rank 1: all_reduce Float[5]" in l for l in lines) == 2, lines
    assert sum("rank 0: all_gather_into_tensor Int[2]" in l and "rank 1: all_gather_into_tensor Float[2]" in l
               for l in lines) == 2, lines
    assert sum("rank 0: broadcast root 0, Float[3]" in l and "rank 1: broadcast root 1, Float[3]" in l
               for l in lines) == 2, lines
    assert sum("rank 0: all_reduce Float[3]" in l and "rank 1: broadcast root 0, Float[3]" in l
               for l in lines) == 2, lines
    assert sum("rank 0: all_reduce Float[3], op SUM" in l and "rank 1: all_reduce Float[3], op MAX" in l
               for l in lines) == 2, lines
    assert out.count("USABLE") == 2, out[-4000:]


def test_cpu_tensor_in_tpu_only_group_raises():
    rc, out = torchrun("failures.py", "cpu", timeout=120)
    lines = raised_lines(out)
    assert rc == 0 and len(lines) == 2, out[-4000:]
    for line in lines:
        assert "RAISED" in line and "cpu" in line.lower(), line


def _after_seconds(out):
    m = re.search(r"AFTER ([0-9.]+)s", out)
    assert m, out[-4000:]
    return float(m.group(1))


@pytest.mark.parametrize("nproc", [2, 4])
def test_exited_rank_makes_others_raise_naming_the_collective(nproc):
    rc, out = torchrun("failures.py", "exit", nproc=nproc, timeout=120)
    lines = raised_lines(out)
    assert len(lines) == nproc - 1, out[-4000:]
    for line in lines:
        assert "RAISED" in line and "tpu_dist all_reduce" in line, lines
        assert "did not take part" in line and "ranks that did not reach it: [1]" in line, lines
    for after in re.findall(r"AFTER ([0-9.]+)s", out):
        assert float(after) < 6 + 5, out[-4000:]


def test_absent_rank_makes_others_raise_within_the_timeout():
    rc, out = torchrun("failures.py", "absent", timeout=120)
    lines = raised_lines(out)
    assert len(lines) == 1 and "RAISED" in lines[0] and "tpu_dist all_reduce" in lines[0], out[-4000:]
    assert "did not take part" in lines[0] and "6000 ms" in lines[0], lines
    assert "ranks that did not reach it: [1]" in lines[0], lines
    assert 5 <= _after_seconds(out) < 6 + 5, out[-4000:]
