"""torch_tpu.tune's decision rule, with a stand-in for the worker process so
the step times are known: when a candidate counts as faster than the
default (noise.comparison), and the paired rounds that settle a gain within
the noise (search.settle_against)."""
import random

import pytest

from torch_tpu.tune import noise, search


def _run(step_s, jitter=0.0):
    times = [step_s * (1 + jitter * (i % 5 - 2) / 2) for i in range(40)]
    return {"status": "ok", "step_s": step_s, "step_times": times}


def test_comparison_uses_step_jitter_until_two_processes():
    one = [_run(3.0e-3, jitter=0.2)]
    assert noise.comparison(one, [_run(2.8e-3)]) == pytest.approx(noise.within(one[0]))


def test_comparison_narrows_with_more_processes():
    rng = random.Random(0)
    def runs(n):
        return [_run(3.0e-3 * (1 + rng.gauss(0, 0.08))) for _ in range(n)]
    few, many = noise.comparison(runs(2), runs(2)), noise.comparison(runs(16), runs(16))
    assert many < few
    assert 0.02 < many < 0.08  # about 1.645 * 1.25 * 0.08 * sqrt(2 / 16)


def _fake_search(monkeypatch, means, spread, budget_s=1000.0):
    """A search whose worker returns each mode's mean step time times a
    Gaussian factor of the given spread; returns (search, measured modes)."""
    rng = random.Random(1)
    measured = []

    def fake_run(spec, timeout_s, cache_dir):
        mode = spec["candidate"].get("mode", "fused")
        measured.append(mode)
        step = means[mode] * (1 + rng.gauss(0, spread))
        r = _run(step, jitter=0.3)
        r.update(process_s=0.01, settle_s=0.0, peak_bytes=1, tokens=1, losses=[1.0],
                 info={"training": False, "form": "step", "batch_size": None})
        return r

    monkeypatch.setattr(search.runner, "run", fake_run)
    s = search._Search("w.py", budget_s, knobs=("mode",), allow_precision=False, world_size=None,
                       steps_planned=0, sample_s=0.1, tolerance=0.02, max_repeats=4, max_batch_factor=1,
                       show_progress=False)
    return s, measured


def test_a_real_gain_within_one_process_jitter_is_settled_by_paired_rounds(monkeypatch):
    # 12% faster than the default, 4% between processes and 30% step jitter.
    # The repeat rounds measure the best two (compile, strict) only; the
    # default's one process cannot tell, paired rounds can.
    s, measured = _fake_search(monkeypatch, {"fused": 3.25e-3, "strict": 3.0e-3, "compile": 2.9e-3}, 0.04)
    result = s.run()
    assert result.pick.candidate.get("mode") == "compile", result.reason
    assert measured.count("fused") >= 2


def test_equal_candidates_keep_the_default(monkeypatch):
    s, measured = _fake_search(monkeypatch, {"fused": 3.0e-3, "strict": 3.0e-3, "compile": 3.0e-3}, 0.05)
    result = s.run()
    assert result.pick.candidate.get("mode", "fused") == "fused", result.reason
    assert len(measured) <= 3 + 2 * 4 + 2 * search._SETTLE_ROUNDS  # modes, repeat rounds, paired rounds


@pytest.mark.parametrize("plugin, tried", [("tpu", True), ("cpu", False)])
def test_kernel_block_knobs_are_tried_on_a_tpu_plugin_only(monkeypatch, plugin, tried):
    s, measured = _fake_search(monkeypatch, {"fused": 3.0e-3, "strict": 3.1e-3, "compile": 3.2e-3}, 0.01)
    s.knobs = tuple(s.knobs) + ("flash_attention_block", "grouped_mm_tile")
    seen = []
    run = search.runner.run

    def recording_run(spec, timeout_s, cache_dir):
        seen.append((dict(spec["candidate"]), dict(spec["hooks"])))
        r = run(spec, timeout_s, cache_dir)
        r["info"]["plugin"] = plugin
        return r

    monkeypatch.setattr(search.runner, "run", recording_run)
    s.run()
    blocks = [(c, h) for c, h in seen if "flash_attention_block" in c or "grouped_mm_tile" in c]
    if not tried:
        assert not blocks
        return
    values = {(k, c[k]) for c, _ in blocks for k in ("flash_attention_block", "grouped_mm_tile") if k in c}
    assert values == {("flash_attention_block", 256), ("flash_attention_block", 512),
                      ("grouped_mm_tile", 256), ("grouped_mm_tile", 512)}
    for c, h in blocks:  # the worker applies them through the kernels' setters
        assert all(h[k].startswith("torch_tpu.kernels.blocks:") for k in c if k != "mode")


def test_kernel_blocks_divide_the_dimension():
    from torch_tpu.kernels import blocks

    blocks.set_flash_attention_block(512)
    try:
        assert [blocks.block_for("flash_attention_block", n) for n in (64, 384, 512, 768, 1024, 1152)] == \
            [64, 384, 512, 256, 512, 128]
        assert blocks.block_for("grouped_mm_tile", 1024) == 128  # the other kernel keeps its default
    finally:
        blocks.set_flash_attention_block(128)
    with pytest.raises(ValueError, match="flash_attention_block is one of"):
        blocks.set_flash_attention_block(100)
