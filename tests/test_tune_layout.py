"""torch_tpu.tune with a world size: DDP and FSDP2 over in-process ranks,
measured at the same global batch, beside the TPU model's rows."""
import os

import pytest

import torch_tpu.tune as tt
from torch_tpu.tune import space

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "data", "tune_small_lm.py")


def test_layouts_are_measured_over_in_process_ranks():
    result = tt.tune(SCRIPT, budget_s=90, knobs=["layout"], world_size=2, sample_s=0.3, progress=False)
    default = result.default
    measured = {r.candidate["layout"]: r for r in result.rows if "layout" in r.candidate and r.kind != "modelled"}
    assert set(measured) == {"ddp2", "fsdp2"}, [r.label for r in result.rows]
    for name, row in measured.items():
        assert row.kind == "advice" and row.ok_runs, (name, row.status, row.note)
        run = row.ok_runs[0]
        assert run["info"]["world_size"] == 2 and run["info"]["batch_size"] == default.ok_runs[0]["info"]["batch_size"] // 2
        assert row.tokens == default.tokens  # the same global batch
        assert not run["fallback_ops"]
    assert any(a.startswith("DDP x2") and "in-process ranks" in a for a in result.advice), result.advice
    assert any(a.startswith("FSDP x2") for a in result.advice), result.advice
    assert [r.label for r in result.rows if r.kind == "modelled"]  # the TPU slice's figures stay, as modelled
    assert result.pick is default  # a layout is advice, never applied
    text = result.table()
    assert "DDP x2" in text and "(advice)" in text


@pytest.mark.parametrize("bad", ["ddp1", "tp2", "fsdp", 2])
def test_bad_layout_names(bad):
    with pytest.raises(ValueError, match="a layout is 'ddpN' or 'fsdpN'"):
        space.parse_layout(bad)
