"""The settings table (torch_tpu/settings.def): every TORCH_TPU_* variable in
the tree is declared, is read only through the table's getters, a bad value
raises naming the variable, C++ and Python read every value alike, and
docs/settings.md is the table rendered."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torch_tpu import settings

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / settings.get("TORCH_TPU_BUILD_DIR")  # an absolute path stays as it is
NAME = re.compile(r"TORCH_TPU_[A-Z0-9_]*[A-Z0-9]")
# Files scanned for variable names; CMakeLists.txt are skipped: their
# TORCH_TPU_* names (TORCH_TPU_BUILD_TESTS, ...) are CMake cache variables,
# not environment variables.
SCANNED = ["csrc", "torch_tpu", "scripts", "benchmarks", "tests", "tools", "examples", "docs", ".ci",
           "setup.py", "torch_tpu_autoload.py", "README.md"]
SUFFIXES = {".py", ".cpp", ".h", ".sh", ".md", ".def", ""}
# The modules that read the environment for everyone.
READERS = {ROOT / "torch_tpu" / "settings.py", ROOT / "csrc" / "settings" / "settings.cpp"}
DIRECT_READS = [
    re.compile(r"getenv\(\s*\"TORCH_TPU_"),
    re.compile(r"os\.environ\.get\(\s*[\"']TORCH_TPU_"),
    re.compile(r"os\.getenv\(\s*[\"']TORCH_TPU_"),
    re.compile(r"os\.environ\[\s*[\"']TORCH_TPU_\w+[\"']\s*\](?!\s*=[^=])"),
    re.compile(r"[\"']TORCH_TPU_\w+[\"']\s+(not\s+)?in\s+os\.environ"),
]


def source_files(roots):
    for r in roots:
        p = ROOT / r
        files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
        for f in files:
            if (f.name != "CMakeLists.txt" and f.suffix in SUFFIXES and "__pycache__" not in f.parts
                    and f != Path(__file__).resolve()):  # this file names undeclared ones on purpose
                yield f


def names_in(path):
    text = path.read_text(errors="replace")
    return {n for n in NAME.findall(text) if not n.endswith("_H")}  # include guards: ..._H_


def test_every_variable_in_the_tree_is_declared():
    undeclared = {}
    for f in source_files(SCANNED):
        for n in names_in(f) - set(settings.SETTINGS):
            undeclared.setdefault(n, []).append(str(f.relative_to(ROOT)))
    assert not undeclared, f"declare these in torch_tpu/settings.def: {undeclared}"


def test_the_scan_finds_an_undeclared_read(tmp_path):
    f = tmp_path / "reader.py"
    f.write_text('v = os.environ.get("TORCH_TPU_NOT_DECLARED", "1")\n')
    assert names_in(f) - set(settings.SETTINGS) == {"TORCH_TPU_NOT_DECLARED"}
    assert any(p.search(f.read_text()) for p in DIRECT_READS)


def test_reads_go_through_the_table():
    """csrc/, torch_tpu/, tests/ and setup.py read TORCH_TPU_* variables only
    through csrc/settings and torch_tpu/settings.py (writes for child processes
    are allowed; benchmarks/ may save and restore a variable's text)."""
    direct = []
    for f in source_files(["csrc", "torch_tpu", "tests", "setup.py"]):
        if f in READERS or f == Path(__file__).resolve():
            continue
        for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if any(p.search(line) for p in DIRECT_READS):
                direct.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not direct, "read these through torch_tpu.settings / settings::*:\n" + "\n".join(direct)


def test_table_is_well_formed():
    assert len(settings.SETTINGS) >= 37
    for s in settings.SETTINGS.values():
        assert s.doc and s.doc.endswith("."), s.name
        if s.default:
            settings.parse(s.name, s.default)  # the default is a valid value


@pytest.mark.parametrize("line,complaint", [
    ('TT_SETTING(TORCH_TPU_A, float, "", "", runtime, "x.")', "type is one of"),
    ('TT_SETTING(TORCH_TPU_A, bool, "", "", runtime, "x.")\nTT_SETTING(TORCH_TPU_A, bool, "", "", runtime, "x.")',
     "not a new"),
    ('TT_SETTING(OTHER_A, bool, "", "", runtime, "x.")', "not a new TORCH_TPU_"),
    ('TT_SETTING(TORCH_TPU_A, int, "0", "1..", runtime, "x.")', "default '0' is not an integer >= 1"),
    ('TT_SETTING(TORCH_TPU_A, enum, "", "", runtime, "x.")', "lists its allowed values"),
    ('TT_SETTING(TORCH_TPU_A, int, "", "..4", runtime, "x.")', "MIN..MAX or MIN.."),
    ('TT_SETTING(TORCH_TPU_A, bool, 1, "", runtime, "x.")', "string literals"),
    ('print("hello")', "expected TT_SETTING"),
])
def test_table_rejects_bad_declarations(tmp_path, line, complaint):
    table = tmp_path / "settings.def"
    table.write_text("// a comment\n" + line + "\n")
    with pytest.raises(ValueError, match=re.escape(complaint)):
        settings.load_table(str(table))


def test_docs_are_current():
    doc = (ROOT / "docs" / "settings.md").read_text()
    assert doc == settings.markdown(), "docs/settings.md is stale: run python tools/settings_doc.py"
    for s in settings.SETTINGS.values():
        default = f"`{s.default}`" if s.default else "unset"
        assert f"| `{s.name}` | {s.type} | {default} |" in doc


def test_script_defaults_equal_the_table():
    """A literal `${TORCH_TPU_X:-default}` in scripts/ is the declared default."""
    found = 0
    for f in source_files(["scripts"]):
        for name, default in re.findall(r"\$\{(TORCH_TPU_\w+):-([^}$]*)\}", f.read_text()):
            found += 1
            assert default == settings.SETTINGS[name].default, f"{f.name}: {name}:-{default}"
    assert found >= 5


def test_parse_each_type():
    p = settings.parse
    assert p("TORCH_TPU_CACHE", "OFF") is False and p("TORCH_TPU_CACHE", "yes") is True
    assert p("TORCH_TPU_FUSED_MAX_OPS", "+7") == 7
    assert p("TORCH_TPU_CACHE_MAX_BYTES", "512MiB") == 512 << 20 and p("TORCH_TPU_CACHE_MAX_BYTES", "2G ") == 2 << 30
    assert p("TORCH_TPU_FALLBACK", "Error") == "error"
    assert p("TORCH_TPU_SHAPE_BUCKETS", "64, 16") == (16, 64) and p("TORCH_TPU_SHAPE_BUCKETS", "OFF") == "off"
    assert p("TORCH_TPU_PLUGIN_SEARCH_PATH", "/a::/b") == ["/a", "/b"]
    for name, bad in [("TORCH_TPU_CACHE", "maybe"), ("TORCH_TPU_FUSED_MAX_OPS", "0"), ("TORCH_TPU_FUSED_MAX_OPS", "1.5"),
                      ("TORCH_TPU_NUM_DEVICES", "4097"), ("TORCH_TPU_CACHE_MAX_BYTES", "1.5G"),
                      ("TORCH_TPU_CACHE_MAX_BYTES", "99999999999T"), ("TORCH_TPU_FALLBACK", "loud"),
                      ("TORCH_TPU_SHAPE_BUCKETS", "0,4"), ("TORCH_TPU_SHAPE_BUCKETS", "pow3")]:
        with pytest.raises(ValueError, match=f"{name}={re.escape(bad)} is not valid: expected "):
            p(name, bad)


def test_get_reads_the_environment(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_FUSED_MAX_OPS", "")
    assert settings.get("TORCH_TPU_FUSED_MAX_OPS") == 512  # empty is unset
    monkeypatch.setenv("TORCH_TPU_FUSED_MAX_OPS", "9")
    assert settings.get("TORCH_TPU_FUSED_MAX_OPS") == 9
    monkeypatch.delenv("TORCH_TPU_COMPILE_AHEAD", raising=False)
    assert settings.get("TORCH_TPU_COMPILE_AHEAD") is None  # no default: decided at run time
    with pytest.raises(KeyError):
        settings.get("TORCH_TPU_NOT_DECLARED")


def clean_env(**values):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env.update(values)
    return env


@pytest.mark.parametrize("name,bad,accepts", [
    ("TORCH_TPU_EAGER_MODE", "eager", "one of strict, fused"),
    ("TORCH_TPU_PROGRAM_CACHE_ENTRIES", "many", "an integer >= 1"),
    ("TORCH_TPU_DONATION", "2", "one of 1, 0, true"),
    ("TORCH_TPU_MEMORY_LIMIT", "8Q", "a byte count"),
])
def test_bad_value_stops_import(name, bad, accepts):
    code = "import torch_tpu"
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(**{name: bad}), cwd="/",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"ValueError: {name}={bad} is not valid: expected {accepts}" in proc.stderr, proc.stderr[-2000:]


def test_bad_value_read_by_cpp_is_a_python_error():
    """A value set after import reaches C++ unchecked by validate(): the C++
    getter raises, as a Python exception that names it, and the process lives on."""
    code = (
        "import os, torch, torch_tpu\n"
        "torch_tpu.set_eager_mode('fused')\n"
        "os.environ['TORCH_TPU_FUSED_MAX_OPS'] = 'lots'\n"
        "try:\n"
        "    (torch.ones(3, device='tpu') + 1).cpu()\n"
        "except Exception as e:\n"
        "    print('raised', type(e).__name__, e)\n"
        "os.environ['TORCH_TPU_FUSED_MAX_OPS'] = '8'\n"
        "print('then', (torch.ones(3, device='tpu') + 1).cpu().tolist())\n")
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(TORCH_TPU_CACHE="0"), cwd="/",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "raised" in proc.stdout and "TORCH_TPU_FUSED_MAX_OPS=lots is not valid: expected an integer >= 1" in \
        proc.stdout, proc.stdout
    assert "then [2.0, 2.0, 2.0]" in proc.stdout, proc.stdout


# (name, values) read by C++ and by Python; "" is unset.
PARITY = {
    "bool": ["", "1", "0", "TRUE", "off", "Yes", "2", "maybe", " 1"],
    "int": ["", "1", "4096", "4097", "0", "-3", "+5", "07", "1e3", "12x", "99999999999999999999"],
    "bytes": ["", "0", "12345", "64k", "512M", "2GiB", "3tb", "1.5G", "12Q", "-5", "b", "99999999999T", "7 "],
    "enum": ["", "tpu", "CPU", "cuda", "gpu", "keep", "release", "fused", "strict", "warn", "silent", "x"],
    "path": ["", "/some/file.so", "relative dir"],
    "path_list": ["", "/a", "/a::/b:", ":"],
    "string": ["", "-k foo"],
}


def cpp_reads(name, value):
    exe = BUILD / "tt_settings_check"
    assert exe.exists(), f"tt_settings_check was not built in {BUILD} (set TORCH_TPU_BUILD_DIR)"
    env = {k: v for k, v in os.environ.items() if k != name}
    if value:
        env[name] = value
    out = subprocess.run([str(exe), name], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.rstrip("\n").split("\t", 1)[1]


def python_reads(name, value, monkeypatch):
    if value:
        monkeypatch.setenv(name, value)
    else:
        monkeypatch.delenv(name, raising=False)
    try:
        v = settings.get(name)
    except ValueError as e:
        return f"error\t{e}"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "|".join(v)
    return "<none>" if v is None or v == "" else str(v)


def test_cpp_and_python_read_alike(monkeypatch):
    """Every setting C++ reads, with good, bad and unset values (so the
    defaults too): tt_settings_check and torch_tpu.settings agree, errors
    word for word."""
    compared = 0
    for s in settings.SETTINGS.values():
        if s.type == "int_list":
            continue  # read by Python only
        for value in PARITY[s.type]:
            with monkeypatch.context() as m:
                assert cpp_reads(s.name, value) == python_reads(s.name, value, m), (s.name, value)
            compared += 1
    assert compared > 200
