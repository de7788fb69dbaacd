"""PyTorch's OpInfo database on tpu, compared with the CPU (torch_tpu.coverage).

CI tier: every op_db entry that lists float32, forward and backward, on its
first CI_SAMPLES samples that the CPU accepts. Heavy tier (TORCH_TPU_HEAVY=1):
every sample, in every dtype among bfloat16, float16, int64 and bool too.
An op that does not pass natively is listed in tests/opinfo_expected.py with
its reason and marked strict xfail, so a fix shows up as XPASS; ops that are
unsupported by design skip with the reason in torch_tpu.coverage.UNSUPPORTED.
Refresh the lists with tools/update_opinfo_expected.py.
"""
import os

import pytest
import torch

from torch_tpu import coverage

import opinfo_expected

CI_SAMPLES = 2
HEAVY = os.environ.get("TORCH_TPU_HEAVY") == "1"
OP_DB = coverage.load_op_db()


def _params(dtypes, expected):
    params = []
    for op, dtype, bwd in coverage.units(OP_DB, dtypes):
        kind = "bwd" if bwd else "fwd"
        key = coverage.op_key(op)
        marks = []
        reason = expected.get((dtype, kind), {}).get(key)
        if reason is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        params.append(pytest.param(op, dtype, bwd, marks=marks, id=f"{key}-{dtype}-{kind}"))
    return params


def _check(op, dtype, bwd, max_samples):
    r = coverage.check(op, coverage.DTYPES[dtype], backward=bwd, max_samples=max_samples, time_limit=60)
    if r.status == "unsupported":
        pytest.skip(f"unsupported by design: {r.reason}")
    if r.status == "nosample":
        pytest.skip(f"no sample: {r.reason}")
    assert r.status == "native", f"{r.status}: {r.reason}"


@pytest.mark.parametrize("op,dtype,bwd", _params(["float32"], opinfo_expected.CI))
def test_opinfo(op, dtype, bwd):
    _check(op, dtype, bwd, CI_SAMPLES)


@pytest.mark.skipif(not HEAVY, reason="heavy tier: set TORCH_TPU_HEAVY=1")
@pytest.mark.parametrize("op,dtype,bwd", _params(list(coverage.DTYPES), opinfo_expected.HEAVY))
def test_opinfo_all_samples(op, dtype, bwd):
    _check(op, dtype, bwd, None)
