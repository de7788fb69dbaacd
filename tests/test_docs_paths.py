"""The user-facing docs point at things that exist.

Checked in README.md, docs/*.md and benchmarks/README.md:
- every relative Markdown link resolves to a file or folder of the repository,
  and a `#fragment` on a Markdown target names one of its headings;
- every repository path written in backticks or in a shell code block
  (`benchmarks/run.py`, `tests/test_x.py`, `csrc/lowering/ops`, globs such as
  `tests/test_dist_*.py`) exists; a bare source file name (`fused_cluster.cpp`)
  exists somewhere in the tree;
- every `--option` given to a repository script (`scripts/setup.sh --titan`,
  `benchmarks/run.py --no-chart`, `python -m torch_tpu.coverage --max-samples`)
  is one that script's text accepts;
- README.md stays a front door: under 300 lines, no timestamps or history, and
  its first lines are the two commands CI runs, exactly.

Pure text checks: no device, no build.
"""
import fnmatch
import glob
import os
import re
import shlex

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DOCS = ["README.md", "benchmarks/README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))

# The first lines of README.md, which CI parses: keep them exactly.
README_COMMANDS = (
    "bash scripts/setup.sh && .venv/bin/python examples/quickstart.py",
    "bash scripts/test.sh",
)

# Docs pages that other work in flight writes (the settings table, the patch
# list, the kernel bridge, TorchTPU's names). The README and docs link them
# already; this list goes when they land.
PENDING_PAGES = set()  # pages linked before they are written (none)

# Top-level entries whose paths are checked when a word starts with "<entry>/".
TOP_LEVEL = ("csrc", "torch_tpu", "tests", "examples", "benchmarks", "scripts", "tools", "docs", ".ci")
# Top-level files checked when named alone.
TOP_FILES = {"pyproject.toml", "setup.py", "CMakeLists.txt", "torch_tpu_autoload.py", "README.md"}
SOURCE_NAME = re.compile(r"^[A-Za-z_][\w.-]*\.(?:cpp|h|py|sh)$")
SKIP_DIRS = {".git", ".venv", ".venv-2.14", "build", "__pycache__", "node_modules"}

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^\s*```(\w*)\s*$")
COMMAND_END = {"|", "||", "&&", ";", "&", ">", "2>&1", "#"}


def _all_files():
    out = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(".venv")]
        out.extend(files)
    return set(out)


_BASENAMES = None


def _basenames():
    global _BASENAMES
    if _BASENAMES is None:
        _BASENAMES = _all_files()
    return _BASENAMES


def _ignored(rel):
    """Output locations that .gitignore names (benchmarks/results/) are not repo paths."""
    try:
        with open(os.path.join(ROOT, ".gitignore")) as f:
            patterns = [p.strip().lstrip("/") for p in f if p.strip() and not p.startswith("#")]
    except OSError:
        return False
    cands = (rel.rstrip("/"), rel.rstrip("/") + "/")
    return any(fnmatch.fnmatch(c, p) for p in patterns for c in cands if "/" in p.rstrip("/"))


def _path_exists(rel):
    rel = rel.rstrip("/")
    if any(c in rel for c in "*?["):
        return bool(glob.glob(os.path.join(ROOT, rel)))
    return os.path.exists(os.path.join(ROOT, rel))


def _slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(md_text):
    out, seen = set(), {}
    in_fence = False
    for line in md_text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m and not in_fence:
            s = _slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def _split(text):
    """(prose, shell code lines): fenced shell blocks apart, other fences dropped."""
    prose, shell = [], []
    fence = None
    for line in text.splitlines():
        m = FENCE.match(line)
        if m:
            fence = None if fence is not None else (m.group(1) or "text")
            continue
        if fence is None:
            # An indented block of commands (4 spaces) is shell too.
            if line.startswith("    ") and re.match(r"\s+(bash|\.venv|curl|python)", line):
                shell.append(line.strip())
            else:
                prose.append(line)
        elif fence in ("bash", "sh", "shell", "console"):
            shell.append(line)
    return "\n".join(prose), shell


def _words(s):
    try:
        return shlex.split(s, comments=False)
    except ValueError:
        return s.split()


def _clean(word):
    w = word.strip().strip("()[]{},;:\"'")
    w = re.sub(r"^[A-Z_][A-Z0-9_]*=", "", w)     # VAR=value: check the value
    w = w.split("=", 1)[0] if w.startswith("--") else w
    w = re.sub(r"#.*$", "", w)
    return w.rstrip(".,:;")


def _repo_script(word):
    w = _clean(word)
    if w.startswith("./"):
        w = w[2:]
    if w.endswith((".py", ".sh")) and "/" in w and os.path.isfile(os.path.join(ROOT, w)):
        return w
    return None


def _check_options(words, problems, where):
    """`--opt` words after a repo script (or `-m module`) must appear in its text."""
    script = None
    i = 0
    while i < len(words):
        w = words[i]
        if w in COMMAND_END or w.startswith("#"):
            script = None
        elif w == "-m" and i + 1 < len(words):
            mod = words[i + 1].replace(".", "/")
            cand = [p for p in (mod + ".py", mod + "/__main__.py") if os.path.isfile(os.path.join(ROOT, p))]
            script = cand[0] if cand else None
            i += 1
        elif _repo_script(w):
            script = _repo_script(w)
        elif script and re.match(r"^--[a-z][\w-]*", w):
            opt = re.match(r"^--[a-z][\w-]*", w).group(0)
            with open(os.path.join(ROOT, script)) as f:
                text = f.read()
            if not re.search(re.escape(opt) + r"(?![\w-])", text):
                problems.append(f"{where}: {script} does not accept {opt}")
        i += 1


def check_text(text, doc_path):
    """Every problem found in one Markdown text, as strings (empty: all good)."""
    problems = []
    doc_dir = os.path.dirname(doc_path)
    prose, shell = _split(text)

    for target in LINK.findall(prose):
        if re.match(r"^[a-z]+:", target):          # http:, https:, mailto:
            continue
        path, _, frag = target.partition("#")
        rel = os.path.normpath(os.path.join(doc_dir, path)) if path else doc_path
        if rel in PENDING_PAGES:
            continue
        if not os.path.exists(os.path.join(ROOT, rel)):
            problems.append(f"{doc_path}: link to missing {target}")
            continue
        if frag and rel.endswith(".md"):
            with open(os.path.join(ROOT, rel)) as f:
                if frag not in _anchors(f.read()):
                    problems.append(f"{doc_path}: link {target}: no heading #{frag} in {rel}")

    # A code span may wrap onto the next line; paragraphs are joined first.
    spans = [m for para in prose.split("\n\n") for m in CODE_SPAN.findall(para.replace("\n", " "))]
    for span in spans:
        words = _words(span)
        _check_options(words, problems, doc_path)
        for word in words:
            _check_word(word, doc_path, problems, bare_names=len(words) == 1)
    for line in shell:
        words = _words(line.split(" #")[0])
        _check_options(words, problems, doc_path)
        for word in words:
            _check_word(word, doc_path, problems, bare_names=False)
    return problems


def _check_word(word, doc_path, problems, bare_names):
    w = _clean(word)
    if w.startswith("./"):
        w = w[2:]
    if not w or w.startswith("-") or any(c in w for c in "<>$"):
        return
    top = w.split("/", 1)[0]
    if "/" in w and top in TOP_LEVEL:
        if not _path_exists(w) and not _ignored(w) and w not in PENDING_PAGES:
            problems.append(f"{doc_path}: no such path {w}")
    elif w in TOP_FILES or re.match(r"^requirements[\w-]*\.txt$", w):
        if not os.path.exists(os.path.join(ROOT, w)):
            problems.append(f"{doc_path}: no such file {w}")
    elif bare_names and SOURCE_NAME.match(w) and "/" not in w:
        if w not in _basenames():
            problems.append(f"{doc_path}: no file named {w} in the tree")


@pytest.mark.parametrize("doc", DOCS)
def test_paths_and_links_exist(doc):
    with open(os.path.join(ROOT, doc)) as f:
        problems = check_text(f.read(), doc)
    assert not problems, "\n".join(problems)


def test_readme_is_a_front_door():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    lines = text.splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines; move detail to docs/"
    assert not re.search(r"\bUTC\b", text), "README.md has a timestamp; figures go to benchmarks/README.md"
    for phrase in ("this session", "Targets:", "used to"):
        assert phrase not in text, f"README.md tells history ({phrase!r}); keep that out of it"
    first_block = text.split("```", 2)[1]
    for cmd in README_COMMANDS:
        assert any(line.split("#")[0].strip() == cmd for line in first_block.splitlines()), \
            f"README.md's first code block must hold {cmd!r} exactly (CI runs it)"


def test_the_checker_reports_bad_paths():
    """The checks above can fail: a made-up page with one of each mistake."""
    bad = "\n".join([
        "See [the guide](docs/no_such_page.md) and [design](docs/design.md#no-such-heading).",
        "Run `benchmarks/no_such_script.py` and `bash scripts/setup.sh --no-such-extra`.",
        "The rule lives in `no_such_rule_file.cpp`; tests in `tests/test_no_such_*.py`.",
        "```bash",
        ".venv/bin/python benchmarks/run.py --no-such-flag",
        "```",
        "Good ones: `scripts/setup.sh --titan`, [design](docs/design.md#layers), `benchmarks/run.py --quick`.",
    ])
    problems = check_text(bad, "README.md")
    expected = ["docs/no_such_page.md", "#no-such-heading", "benchmarks/no_such_script.py",
                "--no-such-extra", "no_such_rule_file.cpp", "tests/test_no_such_*.py", "--no-such-flag"]
    for e in expected:
        assert any(e in p for p in problems), (e, problems)
    assert len(problems) == len(expected), problems
