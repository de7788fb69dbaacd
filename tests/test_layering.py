"""The C++ tree's rooms and which way their includes may point.

csrc/ is layered (docs/design.md): settings (the table of TORCH_TPU_*
variables), runtime and hlo at the bottom, lowering
above them, then the backend's rooms: device, pipeline, aten (hand-written
ATen kernels), distributed, and bindings on top. An include may point to its
own room or to a room below it, never up, and no two files may include each
other's headers (a mutual pair), directly or through a .cpp.
"""
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "csrc")

# Room -> the rooms it may include (besides itself).
ALLOWED = {
    "settings": set(),
    "runtime": {"settings"},
    "hlo": set(),
    "lowering": {"hlo", "settings"},
    # torch.profiler's device events: below every room that launches work.
    "backend/profiler": {"settings", "runtime"},
    "backend/device": {"settings", "runtime", "hlo", "lowering"},
    "backend/pipeline": {"settings", "runtime", "hlo", "lowering", "backend/device", "backend/profiler"},
    "backend/aten": {"settings", "runtime", "hlo", "lowering", "backend/device", "backend/pipeline",
                     "backend/profiler"},
    "backend/distributed": {"settings", "runtime", "hlo", "lowering", "backend/device", "backend/pipeline"},
    "backend/bindings": {"settings", "runtime", "hlo", "lowering", "backend/device", "backend/pipeline", "backend/aten",
                         "backend/distributed", "backend/profiler"},
}
# Rooms that must build without PyTorch's headers.
TORCH_FREE = {"settings", "runtime", "hlo", "lowering"}
# Private headers that are one module with a public one: pjrt_internal.h is the
# half of runtime.h that only the runtime's own .cpp files see (PJRT's C structs).
SAME_MODULE = {"runtime/pjrt_internal": "runtime/runtime"}
INCLUDE = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]', re.M)


def _room(path):
    """The room of a path relative to csrc/ (longest matching prefix)."""
    best = None
    for room in ALLOWED:
        if path == room or path.startswith(room + "/"):
            if best is None or len(room) > len(best):
                best = room
    return best


def _sources():
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith((".h", ".cpp")):
                full = os.path.join(dirpath, f)
                yield os.path.relpath(full, ROOT).replace(os.sep, "/"), full


def _includes():
    out = {}
    for rel, full in _sources():
        with open(full, encoding="utf-8") as fh:
            out[rel] = INCLUDE.findall(fh.read())
    return out


def test_every_source_is_in_a_room():
    homeless = [rel for rel, _ in _sources() if _room(rel) is None and not rel.startswith("runtime/testdata")]
    assert not homeless, f"files outside the known rooms (add the room to ALLOWED and docs/design.md): {homeless}"
    # The backend has no loose files: each belongs to one of its rooms.
    loose = [rel for rel, _ in _sources() if rel.count("/") == 1 and rel.startswith("backend/")]
    assert not loose, f"files directly under csrc/backend (put each in its room): {loose}"


def test_includes_point_down():
    upward = []
    for rel, incs in _includes().items():
        room = _room(rel)
        for inc in incs:
            target = _room(inc)
            if target is None or target == room:
                continue
            if target not in ALLOWED[room]:
                upward.append(f"{rel} includes {inc} ({room} -> {target})")
    assert not upward, "includes running upward or sideways:\n" + "\n".join(upward)


def test_lower_layers_include_no_pytorch():
    bad = [f"{rel}: {inc}" for rel, incs in _includes().items() if _room(rel) in TORCH_FREE
           for inc in incs if inc.split("/")[0] in ("ATen", "c10", "torch")]
    assert not bad, "runtime, hlo and lowering must not include PyTorch headers:\n" + "\n".join(bad)


def test_no_mutual_include_pairs():
    # A module is a header and its .cpp; module A depends on B when any of A's
    # files includes B's header.
    deps = {}
    for rel, incs in _includes().items():
        mod = os.path.splitext(rel)[0]
        mod = SAME_MODULE.get(mod, mod)
        for inc in incs:
            target = os.path.splitext(inc)[0]
            target = SAME_MODULE.get(target, target)
            if target != mod and os.path.exists(os.path.join(ROOT, inc)):
                deps.setdefault(mod, set()).add(target)
    pairs = sorted({tuple(sorted((a, b))) for a, bs in deps.items() for b in bs if a in deps.get(b, ())})
    assert not pairs, f"mutual include pairs: {pairs}"


@pytest.mark.parametrize("bad", ["backend/device/x.h includes backend/pipeline/y.h"])
def test_the_check_sees_an_upward_include(bad):
    # The rule itself: device may not include pipeline.
    assert "backend/pipeline" not in ALLOWED["backend/device"]
    assert _room("backend/pipeline/executor.h") == "backend/pipeline"
    assert _room("backend/device/tpu_device.h") == "backend/device"
