"""Runs a test's snippet of Python in a fresh interpreter, for what only a new
process shows (the device before its first use, the PJRT client as it is
created)."""
import subprocess
import sys
import textwrap


def run_snippet(body, cwd="/", timeout=300):
    """Runs `body` (dedented; pytest is imported for it, for pytest.raises)
    with this Python from `cwd`, a folder outside the source tree so that the
    installed torch_tpu is imported, and checks that it ran to its end."""
    code = "import pytest\n" + textwrap.dedent(body) + 'print("OK")\n'
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=timeout)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
