"""PyTorch's OpInfo database on tpu, compared with the CPU (torch_tpu.coverage).

CI tier: every op_db entry that lists float32, forward and backward, on its
first SAMPLES samples that the CPU accepts. Heavy tier (TORCH_TPU_HEAVY=1):
bfloat16, float16, int64 and bool, the same way. docs/coverage.md is generated
with the same bound. An op that does not pass natively is listed in
tests/opinfo_expected.py with its reason and marked strict xfail, so a fix
shows up as XPASS; ops unsupported by design skip with the reason from
torch_tpu.coverage.UNSUPPORTED. Refresh the list with
tools/update_opinfo_expected.py.
"""

import pytest

from torch_tpu import coverage, settings

import opinfo_expected

SAMPLES = 2
HEAVY = settings.get("TORCH_TPU_HEAVY")
OP_DB = coverage.load_op_db()


def _params(dtypes, expected):
    params = []
    for op, dtype, bwd in coverage.units(OP_DB, dtypes):
        kind = "bwd" if bwd else "fwd"
        key = coverage.op_key(op)
        reason = expected.get((dtype, kind), {}).get(key)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason is not None else []
        params.append(pytest.param(op, dtype, bwd, marks=marks, id=f"{key}-{dtype}-{kind}"))
    return params


def _check(op, dtype, bwd, samples):
    r = coverage.check(op, coverage.DTYPES[dtype], backward=bwd, max_samples=samples, time_limit=60)
    if r.status == "unsupported":
        pytest.skip(f"unsupported by design: {r.reason}")
    if r.status == "nosample":
        pytest.skip(f"no sample: {r.reason}")
    assert r.status == "native", f"{r.status}: {r.reason}"


@pytest.mark.parametrize("op,dtype,bwd", _params(["float32"], opinfo_expected.CI))
def test_opinfo(op, dtype, bwd):
    _check(op, dtype, bwd, SAMPLES)


@pytest.mark.skipif(not HEAVY, reason="heavy tier: set TORCH_TPU_HEAVY=1")
@pytest.mark.parametrize("op,dtype,bwd", _params(["bfloat16", "float16", "int64", "bool"], opinfo_expected.HEAVY))
def test_opinfo_other_dtypes(op, dtype, bwd):
    _check(op, dtype, bwd, SAMPLES)
