"""torch_tpu's settings: every TORCH_TPU_* environment variable, typed.

The one table is settings.def next to this file (C++ includes the same file;
csrc/settings/settings.h reads it there). Read a setting with

    from torch_tpu import settings
    settings.get("TORCH_TPU_FALLBACK")   # "warn"

get() parses the variable on every call (the environment may change between
calls; a caller that reads once keeps the value). A bad value raises
ValueError naming the variable and what it accepts; an undeclared name raises
KeyError. `import torch_tpu` checks every runtime setting first (validate()).

This module imports only the standard library: setup.py loads it by path
before anything is built, and the package loads it before its extension.
"""
import ast
import os
import re
from dataclasses import dataclass

TYPES = ("bool", "int", "bytes", "enum", "int_list", "path", "path_list", "string")
SECTIONS = ("runtime", "build")
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "settings.def")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_INT = re.compile(r"[+-]?[0-9]+\Z")
_DIGITS = re.compile(r"[0-9]+\Z")
_INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Setting:
    name: str
    type: str
    default: str  # "" means unset: `doc` says what is decided then
    allowed: str  # enum/int_list: "a|b"; int: "MIN..MAX" or "MIN.."; else ""
    section: str  # "runtime" or "build"
    doc: str

    def accepts(self):
        """What a value may be, in words (the same text as the C++ errors)."""
        if self.type == "bool":
            return "one of 1, 0, true, false, yes, no, on, off"
        if self.type == "int":
            lo, hi = _bounds(self.allowed)
            if hi is not None:
                return f"an integer from {lo} to {hi}"
            return f"an integer >= {lo}" if lo is not None else "an integer"
        if self.type == "bytes":
            return "a byte count such as 1073741824, 512M or 2G"
        if self.type == "enum":
            return "one of " + ", ".join(self.allowed.split("|"))
        if self.type == "int_list":
            return ", ".join(self.allowed.split("|")) + " or sizes such as 16,64,256"
        return "any text"


def _bounds(allowed):
    if not allowed:
        return None, None
    lo, _, hi = allowed.partition("..")
    return (int(lo) if lo else None), (int(hi) if hi else None)


class _Invalid(Exception):
    pass


def _parse_bool(s, setting):
    v = s.lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise _Invalid


def _parse_int(s, setting):
    if not _INT.match(s):
        raise _Invalid
    v = int(s)
    lo, hi = _bounds(setting.allowed)
    if abs(v) > _INT64_MAX or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise _Invalid
    return v


def _parse_bytes(s, setting):
    v = s.lower().rstrip()
    if v.endswith("ib"):
        v = v[:-2]  # 512MiB
    elif v.endswith("b") and len(v) > 1 and v[-2].isalpha():
        v = v[:-1]  # 512MB
    shift = 0
    if v and v[-1].isalpha():
        shift = {"k": 10, "m": 20, "g": 30, "t": 40}.get(v[-1])
        if shift is None:
            raise _Invalid
        v = v[:-1]
    if not _DIGITS.match(v):
        raise _Invalid
    n = int(v) << shift
    if n > _INT64_MAX:
        raise _Invalid
    return n


def _parse_enum(s, setting):
    v = s.lower()
    if v not in setting.allowed.split("|"):
        raise _Invalid
    return v


def _parse_int_list(s, setting):
    v = s.strip().lower()
    if v in setting.allowed.split("|"):
        return v
    items = [x.strip() for x in v.split(",") if x.strip()]
    if not items or not all(_DIGITS.match(x) for x in items):
        raise _Invalid
    sizes = tuple(sorted(int(x) for x in items))
    if sizes[0] < 1:
        raise _Invalid
    return sizes


def _parse_path_list(s, setting):
    return [d for d in s.split(":") if d]


# Exactly one parser per type; csrc/settings/settings.cpp mirrors them.
_PARSERS = {
    "bool": _parse_bool,
    "int": _parse_int,
    "bytes": _parse_bytes,
    "enum": _parse_enum,
    "int_list": _parse_int_list,
    "path": lambda s, setting: s,
    "path_list": _parse_path_list,
    "string": lambda s, setting: s,
}


def load_table(path=TABLE):
    """The declarations of settings.def, in file order."""
    with open(path) as f:
        lines = [line for line in f if not line.lstrip().startswith("//")]
    table = {}
    for node in ast.parse("".join(lines), path).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "TT_SETTING" and len(call.args) == 6
                and not call.keywords):
            raise ValueError(f"{path}:{node.lineno}: expected TT_SETTING(NAME, type, default, allowed, section, doc)")
        name, typ, default, allowed, section, doc = call.args
        if not all(isinstance(a, ast.Name) for a in (name, typ, section)) or not all(
                isinstance(a, ast.Constant) and isinstance(a.value, str) for a in (default, allowed, doc)):
            raise ValueError(f"{path}:{node.lineno}: NAME, type and section are words; the others string literals")
        s = Setting(name.id, typ.id, default.value, allowed.value, section.id, doc.value)
        if not s.name.startswith("TORCH_TPU_") or s.name in table:
            raise ValueError(f"{path}:{node.lineno}: {s.name} is not a new TORCH_TPU_* name")
        if s.type not in TYPES or s.section not in SECTIONS:
            raise ValueError(f"{path}:{node.lineno}: {s.name}: type is one of {TYPES}, section one of {SECTIONS}")
        if s.type in ("enum", "int_list") and not s.allowed:
            raise ValueError(f"{path}:{node.lineno}: {s.name}: an {s.type} lists its allowed values")
        if s.type == "int" and s.allowed and not re.match(r"[+-]?[0-9]+\.\.([+-]?[0-9]+)?\Z", s.allowed):
            raise ValueError(f"{path}:{node.lineno}: {s.name}: an int's allowed is MIN..MAX or MIN..")
        if s.type not in ("enum", "int_list", "int") and s.allowed:
            raise ValueError(f"{path}:{node.lineno}: {s.name}: a {s.type} has no allowed values")
        if s.default:
            try:
                _PARSERS[s.type](s.default, s)
            except _Invalid:
                raise ValueError(f"{path}:{node.lineno}: {s.name}: default {s.default!r} is not {s.accepts()}")
        table[s.name] = s
    return table


SETTINGS = load_table()


def parse(name, text):
    """`text` as setting `name`'s value; ValueError naming both when bad."""
    s = SETTINGS[name]
    try:
        return _PARSERS[s.type](text, s)
    except _Invalid:
        raise ValueError(f"{name}={text} is not valid: expected {s.accepts()}") from None


def raw(name):
    """The variable's text as set, or None when unset or empty."""
    SETTINGS[name]  # KeyError: undeclared
    return os.environ.get(name) or None


def get(name):
    """The setting's value: its variable parsed when set, else its parsed
    default; None when neither is given (the setting's doc says what then),
    except a path_list, which is then empty."""
    s = SETTINGS[name]
    text = raw(name)
    if text is not None:
        return parse(name, text)
    return parse(name, s.default) if s.default or s.type == "path_list" else None


def validate(section="runtime"):
    """Parses every variable of `section` that is set; the first bad one raises."""
    for s in SETTINGS.values():
        if s.section == section:
            get(s.name)


def markdown():
    """docs/settings.md: the table rendered (tools/settings_doc.py writes it)."""
    out = ["# Settings", "",
           "Every environment variable torch_tpu reads, generated from `torch_tpu/settings.def`",
           "by `python tools/settings_doc.py` (tests/test_settings.py checks this file is current).",
           "A bad value is an error that names the variable and what it accepts; an empty value",
           "is the same as unset. From Python: `torch_tpu.settings.get(NAME)`.", ""]
    titles = {"runtime": "## Read by torch_tpu", "build": "## Build and test"}
    for section in SECTIONS:
        out += [titles[section], "", "| Variable | Type | Default | Accepts | Meaning |", "|---|---|---|---|---|"]
        for s in SETTINGS.values():
            if s.section == section:
                default = f"`{s.default}`" if s.default else "unset"
                accepts = {"path": "a file or folder", "path_list": "folders separated by `:`"}.get(
                    s.type, s.accepts())
                out.append(f"| `{s.name}` | {s.type} | {default} | {accepts} | {s.doc.replace('|', '/')} |")
        out.append("")
    return "\n".join(out)
