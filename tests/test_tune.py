"""torch_tpu.tune: one bounded tuning run of a tiny language model
(tests/data/tune_small_lm.py), its table and settings file, and bad input.

The run has a 70 s budget; every worker is a fresh process, so the run's
length is bounded by the budget, not by the machine."""
import json
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
import torch_tpu.tune as tt
from torch_tpu.tune import space

from run_once import once_per_run

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "data", "tune_small_lm.py")
BUDGET_S = 50.0



@pytest.fixture(scope="module")
def result(tmp_path_factory, testrun_uid):
    """One tuning run for the whole test run (tests/run_once.py): two at once
    would measure each other."""
    return once_per_run(tmp_path_factory, testrun_uid, "tune_result", lambda: tt.tune(
        SCRIPT, budget_s=BUDGET_S, allow_precision=True, sample_s=0.3, max_repeats=2, max_batch_factor=2,
        progress=False))


def _row(result, **candidate):
    key = space.normalized(candidate)
    rows = [r for r in result.rows if r.key == key]
    assert rows, f"no row for {candidate}: {[r.label for r in result.rows]}"
    return rows[0]


def test_run_keeps_its_budget(result):
    assert result.elapsed_s <= BUDGET_S
    assert result.budget_s == BUDGET_S


def test_rows_measured_in_fresh_processes(result):
    default = _row(result)
    assert default.status == "ok" and default is result.default
    assert default.step_s > 0 and default.tokens == 4 * 16  # BATCH_SIZE x 16 tokens
    assert default.peak_bytes > 0 and default.compile_s >= 0
    for mode in ("strict", "compile", "trainstep"):
        row = _row(result, mode=mode)
        assert row.status in ("ok", "skipped"), (row.label, row.note)
        if row.status == "ok":
            # every mode computes the same losses (fused eager's, to rounding)
            assert row.deviation(default) < 1e-4, row.label
            assert row.ok_runs[0]["compiles_timed"] == 0, f"{row.label} compiled during its timed steps"
    assert {r["info"]["form"] for row in result.rows for r in row.ok_runs} == {"model"}


def test_table_has_every_column(result):
    text = result.table()
    for col in ("candidate", "step ms", "tokens/s", "peak MiB", "compile s", "numerics", "source"):
        assert col in text
    assert "* " in text  # the pick is marked
    assert "noise:" in text and "budget" in text
    md = result.table(markdown=True)
    assert md.startswith("| candidate |")


def test_precision_rows_are_flagged(result):
    rows = [r for r in result.rows if "matmul_precision" in r.key]
    assert rows, "no precision candidate was tried"
    for r in rows:
        assert r.changes_numerics()
        # A batch-size row (advice on top of a precision pick) trains other
        # batches: its losses are not comparable, and its deviation is None.
        if r.ok_runs and "batch_size" not in r.candidate:
            assert r.deviation(result.default) is not None
            assert "(flag)" in result.table()


def test_pick_is_not_slower_than_default(result):
    pick, default = result.pick, result.default
    assert pick.kind == "applied"
    assert pick.step_s <= default.step_s * (1 + max(result.noise or 0, 0.0) + 1e-9)
    assert result.settings == pick.key


def test_advice_rows(result):
    advice = [r for r in result.rows if r.kind == "advice"]
    measured = [r for r in advice if r.ok_runs]
    # batch size 8 and the padded copy; under a slow machine's budget either may be skipped
    for r in advice:
        assert r.status in ("ok", "skipped"), (r.label, r.note)
    if any(r.candidate.get("pad") for r in measured):
        assert any("pad vocab 200 -> 256" in a for a in result.advice)
    assert any(r.kind == "advice" for r in result.rows) or result.elapsed_s > BUDGET_S / 2


def test_settings_file_round_trip(result, tmp_path):
    path = tmp_path / "tuned.json"
    result.save(path)
    doc = json.loads(path.read_text())
    assert doc["settings"] == result.settings
    assert len(doc["rows"]) == len(result.rows)
    # applied at the next start through TORCH_TPU_TUNED
    code = ("import torch, torch_tpu, json; t = torch_tpu.tune.tuned(); "
            "print(json.dumps([t.settings, torch_tpu.get_eager_mode(), torch.get_float32_matmul_precision()]))")
    env = dict(os.environ, TORCH_TPU_TUNED=str(path))
    env.pop("TORCH_TPU_EAGER_MODE")  # the library's default, which the tuner's default row measured
    out = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    settings, mode, precision = json.loads(out.stdout.strip().splitlines()[-1])
    assert settings == result.settings
    assert mode == ("strict" if result.settings.get("mode") == "strict" else "fused")
    assert precision == result.settings.get("matmul_precision", "highest")


def test_apply_one_call(tmp_path):
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"torch_tpu_tuned": 1, "settings": {"mode": "strict", "matmul_precision": "high"}}))
    before = (torch_tpu.get_eager_mode(), torch.get_float32_matmul_precision())
    try:
        torch_tpu.set_eager_mode("fused")
        tuned = tt.apply(str(path))
        assert torch_tpu.get_eager_mode() == "strict"
        assert torch.get_float32_matmul_precision() == "high"
        model = torch.nn.Linear(4, 2).to("tpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step = tuned.train_step(model, lambda m, x: m(x).square().mean(), opt)
        loss = step(torch.ones(3, 4, device="tpu"))
        assert loss.shape == () and torch.isfinite(loss.cpu())
    finally:
        torch_tpu.set_eager_mode(before[0])
        torch.set_float32_matmul_precision(before[1])


@pytest.mark.parametrize("doc, match", [
    ({"torch_tpu_tuned": 1, "settings": {"mode": "warp"}}, "mode='warp'"),
    ({"torch_tpu_tuned": 1, "settings": {"block_q": 128}}, "unknown setting 'block_q'"),
    ({"settings": {}}, "not a tuned settings file"),
])
def test_bad_settings_file(tmp_path, doc, match):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=match):
        tt.apply(str(path))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(budget_s=0), ValueError, "budget_s must be a positive"),
    (dict(budget_s=-5), ValueError, "budget_s must be a positive"),
    (dict(knobs=["mode", "warp_drive"]), ValueError, "unknown knob.*'warp_drive'"),
    (dict(knobs="mode"), TypeError, "list of names"),
    (dict(knobs=["matmul_precision"]), ValueError, "allow_precision=True"),
    (dict(world_size=0), ValueError, "world_size"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        tt.tune(SCRIPT, **kwargs)


def test_bad_workloads(tmp_path):
    with pytest.raises(FileNotFoundError, match="no workload script"):
        tt.tune(str(tmp_path / "missing.py"), budget_s=5)
    with pytest.raises(TypeError, match="module-level function"):
        tt.tune(make_model=lambda: torch.nn.Linear(2, 2), make_batch=lambda b: (torch.ones(b, 2),), budget_s=5)
    with pytest.raises(TypeError, match="no workload"):
        tt.tune(budget_s=5)
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(RuntimeError, match="defines neither make_step nor make_model"):
        tt.tune(str(empty), budget_s=60, progress=False)


def test_module_is_callable_and_cli_reports_bad_input():
    assert callable(torch_tpu.tune) and torch_tpu.tune.tune is tt.tune
    out = subprocess.run([sys.executable, "-P", "-m", "torch_tpu.tune", SCRIPT, "--budget", "0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "budget_s must be a positive" in out.stderr


def test_register_knob_checks():
    with pytest.raises(ValueError, match="built-in"):
        tt.register_knob(tt.Knob("mode", ("a",), apply="m:f"))
    with pytest.raises(ValueError, match="apply='module:function'"):
        tt.register_knob(tt.Knob("block_q", (128, 256)))
    tt.register_knob(tt.Knob("block_q", (128, 256), apply="math:floor"))
    try:
        assert "block_q" in space.all_names()
        assert space.hooks({"block_q": 256}) == {"block_q": "math:floor"}
    finally:
        tt.unregister_knob("block_q")
    assert "block_q" not in space.all_names()
