"""Writes docs/settings.md from torch_tpu/settings.def (tests/test_settings.py
checks that the file is current).

    python tools/settings_doc.py           # rewrite docs/settings.md
    python tools/settings_doc.py --check   # exit 1 when it is stale
"""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "settings.md"


def load_settings():
    """torch_tpu/settings.py by path: no torch and no built extension needed."""
    spec = importlib.util.spec_from_file_location("torch_tpu_settings", ROOT / "torch_tpu" / "settings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    text = load_settings().markdown()
    if "--check" in argv:
        current = DOC.read_text() if DOC.exists() else ""
        if current != text:
            print(f"{DOC} is stale: run python tools/settings_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(DOC)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
