"""torch_tpu.stats(): the one entry point for the counters, and the older
calls that read their sections from it."""
import pytest
import torch

import torch_tpu


def test_every_section_and_the_older_calls_agree():
    x = torch.randn(16, device="tpu")
    (x * 2 + 1).sum().item()
    every = torch_tpu.stats()
    assert set(every) == set(torch_tpu._stats.SECTIONS)
    programs = torch_tpu.stats("programs")
    assert programs["misses"] >= 1 and set(programs["modes"]) >= {"eager", "fused", "graph", "collective"}
    assert sum(m["compiles"] for m in programs["modes"].values()) == programs["compiles"]
    info = torch_tpu.cache_info()
    for key in ("hits", "misses", "compiles", "entries", "evictions", "modes", "donated", "donation_copies"):
        assert info[key] == programs[key], key
    disk = torch_tpu.stats("persistent_cache")
    for key in ("hits", "misses", "rejected", "writes", "evictions", "bytes", "entries"):
        assert info["disk_" + key] == disk[key], key
    legacy = torch.tpu._get_cache_stats()
    assert (legacy.num_cache_hits, legacy.num_cache_misses) == (programs["hits"], programs["misses"])
    assert torch_tpu.fused_stats().keys() == torch_tpu.stats("fused").keys()
    assert torch_tpu.fallback_ops() == torch_tpu.stats("fallbacks")
    assert torch_tpu.compile_stats() == torch_tpu.stats("compile")
    assert torch_tpu.shared_cache_info() == torch_tpu.stats("shared_cache")


def test_counters_move_with_the_work():
    before = torch_tpu.stats("programs")
    y = torch.arange(7, device="tpu", dtype=torch.float32).exp_()  # a shape no other test uses
    y.cpu()
    after = torch_tpu.stats("programs")
    assert after["hits"] + after["misses"] > before["hits"] + before["misses"]


def test_an_unknown_section_names_the_known_ones():
    with pytest.raises(ValueError, match="sections: programs"):
        torch_tpu.stats("memory")
