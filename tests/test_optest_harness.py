"""The op-test harness itself (optest.parametrize): which mode runs which
sample, and how a row's reason for not running in a mode is reported."""
import pytest
import torch

from optest import FLOATS, HEAVY, OpCase, parametrize, strict_dtypes


def params(case):
    return parametrize([case]).args[1]


def test_strict_runs_everything_and_other_modes_the_first_dtype_and_shapes():
    case = OpCase("neg", torch.neg, [[(3, 4)], [()]], FLOATS)
    ids = [p.id for p in params(case)]
    strict = [i for i in ids if not i.endswith(("-fused", "-compile"))]
    # Two shapes per strict dtype; the default tier leaves float16 to its bfloat16 sibling.
    assert len(strict) == 2 * len(strict_dtypes(FLOATS)) == (6 if HEAVY else 4)
    assert [i for i in ids if i.endswith(("-fused", "-compile"))] == ["neg-float32-3-4-fused",
                                                                       "neg-float32-3-4-compile"]
    modes = {p.id: p.values[0].mode for p in params(case)}
    assert modes["neg-float32-3-4-fused"] == "fused" and modes["neg-float32-3-4"] == "strict"


def test_a_row_that_cannot_run_in_a_mode_is_skipped_with_its_reason():
    case = OpCase("neg", torch.neg, [[(3,)]], skip_modes={"compile": "depends on strides"})
    marks = {p.id: p.marks for p in params(case)}
    assert not marks["neg-float32-3"] and not marks["neg-float32-3-fused"]
    (mark,) = marks["neg-float32-3-compile"]
    assert mark.name == "skip" and mark.kwargs["reason"] == "compile: depends on strides"


def test_unknown_modes_are_refused():
    with pytest.raises(AssertionError, match="unknown modes"):
        params(OpCase("neg", torch.neg, [[(3,)]], skip_modes={"jit": "?"}))
