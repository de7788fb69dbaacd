"""The list of patches (torch_tpu.patches(), torch_tpu/patches/) against what
is installed, in both directions: every listed patch is in place where it
says, and nothing in PyTorch, safetensors, the engines or the import system
carries a torch_tpu object that the list does not name — neither in the live
process nor, by a scan of the source, anywhere outside torch_tpu/patches/.
docs/patches.md is current."""
import ast
import functools
import importlib
import inspect
import os
import sys
import sysconfig
import types

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.patches import RECORDS, doc, record, sglang_server_args, vllm_cuda_streams

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.dirname(os.path.realpath(torch_tpu.__file__))  # the source folder, through dev_build's links
PATCHES = os.path.join(SOURCE, "patches")
AT_IMPORT = [r for r in RECORDS if r.when.startswith("import torch_tpu")]
LIBRARY_ROOTS = tuple(os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib", "stdlib"))


@functools.lru_cache(maxsize=None)
def _in_source(path):
    return os.path.realpath(path).startswith(SOURCE + os.sep)


def _from_torch_tpu(obj):
    """Whether obj (a function, class or instance) was defined in torch_tpu.
    A function is judged by its own code (functools.wraps copies the wrapped
    function's __module__ onto a wrapper)."""
    if inspect.isfunction(obj):
        return _in_source(obj.__code__.co_filename)
    cls = obj if isinstance(obj, type) else type(obj)
    module = vars(cls).get("__module__")
    return isinstance(module, str) and module.split(".")[0] == "torch_tpu"


def _resolve(target):
    """The live object a dotted target names (None for os.environ[...] and sys.meta_path)."""
    if target.startswith(("os.environ[", "sys.meta_path")) or "[" in target:
        return None
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise LookupError(target)


def _installed_targets():
    """id -> patch name of every live object an installed patch put in place."""
    found = {}
    for r in RECORDS:
        if not r.installed():
            continue
        for target in r.targets:
            try:
                obj = _resolve(target)
            except (ImportError, LookupError, AttributeError):
                continue
            if obj is not None:
                found[id(obj)] = r.name
    return found


# ---- the list --------------------------------------------------------------------------

def test_listing_has_one_row_per_record_with_every_field():
    rows = torch_tpu.patches()
    assert [row.name for row in rows] == [r.name for r in RECORDS]
    assert len({row.name for row in rows}) == len(rows)
    for row, r in zip(rows, RECORDS):
        assert isinstance(row, record.Status)
        assert row.target == ", ".join(r.targets) and all(t.strip() for t in r.targets)
        assert len(row.reason) > 40, row.name
        assert row.issue is None or row.issue.startswith("https://github.com/"), row.issue
        assert row.versions and all(isinstance(v, tuple) and v for v in row.versions.values()), row.name
        assert isinstance(row.installed, bool)
        assert r.when and r.scope
        assert callable(r.install) and callable(r.installed)


def test_every_module_of_the_folder_is_a_listed_patch():
    helpers = {"__init__", "record", "doc", "import_hook"}
    modules = sorted(f[:-3] for f in os.listdir(PATCHES) if f.endswith(".py") and f[:-3] not in helpers)
    assert modules == sorted(r.name for r in RECORDS)
    for name in modules:
        assert importlib.import_module(f"torch_tpu.patches.{name}").PATCH in RECORDS


def test_patches_installed_at_import_are_in_place():
    assert {r.name for r in AT_IMPORT} == {
        "xla_log_level", "data_parallel", "autograd_flush", "safetensors_load", "accelerate_device", "inductor_tpu",
        "flex_attention_device"}
    for r in AT_IMPORT:
        assert r.installed(), r.name
        for target in r.targets:
            obj = _resolve(target)
            if obj is None:
                continue
            assert record.marked(obj, r.name), target
            original = obj.__wrapped__
            assert not _from_torch_tpu(original), target  # the library's own function is kept
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"]
    assert any(record.marked(f, "safetensors_load") for f in sys.meta_path) or "safetensors.torch" in sys.modules


def test_install_is_idempotent():
    before = (torch.nn.DataParallel.__init__, torch.autograd.backward,
              torch.autograd.grad, list(sys.meta_path))
    for r in AT_IMPORT:
        r.install()
    after = (torch.nn.DataParallel.__init__, torch.autograd.backward,
             torch.autograd.grad, list(sys.meta_path))
    assert after == before


def test_safetensors_hook_wraps_load_file_on_import():
    safetensors_torch = pytest.importorskip("safetensors.torch")
    assert record.marked(safetensors_torch.load_file, "safetensors_load")


def test_compile_patches_install_with_the_backend_and_fix_the_traced_loss():
    torch_tpu.compiler.register()
    rows = {row.name: row for row in torch_tpu.patches()}
    assert rows["dynamo_cudagraph_check"].installed
    from torch._dynamo.variables import optimizer

    assert optimizer._is_static_for_cudagraphs(torch.zeros(2, device="tpu")) is True
    assert not _from_torch_tpu(optimizer._is_static_for_cudagraphs.__wrapped__)
    # The reason for multilabel_margin_tracing: 1.28 on the CPU, 5.34 from PyTorch's traced kernel.
    x = torch.tensor([[0.1, 0.2, 0.4, 0.8, -0.3]], requires_grad=True)
    y = torch.tensor([[3, 0, -1, 1, 2]])
    compiled = torch.compile(F.multilabel_margin_loss, backend="tpu", fullgraph=True)
    got = compiled(x.detach().to("tpu").requires_grad_(), y.to("tpu")).detach().cpu()
    torch.testing.assert_close(got, F.multilabel_margin_loss(x, y).detach())
    assert {row.name: row for row in torch_tpu.patches()}["multilabel_margin_tracing"].installed


def test_scoped_vllm_streams_patch_is_held_only_inside_its_block():
    saved = torch.Event, torch.cuda.Event, torch.cuda.Stream
    assert not vllm_cuda_streams.installed()
    with vllm_cuda_streams.without_cuda_streams():
        assert {row.name: row for row in torch_tpu.patches()}["vllm_cuda_streams"].installed
        torch.cuda.Event().record()
        assert torch.cuda.Stream().device.type == "tpu"
        with pytest.raises(RuntimeError):
            with vllm_cuda_streams.without_cuda_streams():
                raise RuntimeError("restored on the way out")
    assert (torch.Event, torch.cuda.Event, torch.cuda.Stream) == saved
    assert not vllm_cuda_streams.installed()


def test_sglang_defaults_fill_only_unset_arguments():
    args = types.SimpleNamespace(attention_backend=None, sampling_backend="flashinfer")
    sglang_server_args.apply(args)
    assert (args.attention_backend, args.sampling_backend) == ("torch_native", "flashinfer")


# ---- nothing unlisted: the live process ------------------------------------------------

def _library_modules(only=None):
    for name, module in list(sys.modules.items()):
        if only is not None and name not in only:
            continue
        if not isinstance(module, types.ModuleType) or name.split(".")[0] in ("torch_tpu", "torch_tpu_autoload"):
            continue
        if getattr(module, "__name__", None) != name:
            continue  # an alias, such as torch.tpu.amp for torch_tpu.amp
        path = getattr(module, "__file__", None)
        if path is None or os.path.realpath(path).startswith(LIBRARY_ROOTS):
            yield name, module


def _torch_tpu_objects_in_libraries(only=None):
    """(dotted name, object): torch_tpu functions and classes that library
    modules (or those named in `only`), and the classes they define, hold as
    attributes."""
    for name, module in _library_modules(only):
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            if isinstance(value, types.ModuleType):
                continue
            if (inspect.isfunction(value) or inspect.isclass(value)) and _from_torch_tpu(value):
                yield f"{name}.{attr}", value
            if inspect.isclass(value) and vars(value).get("__module__") == name:
                for cattr, cvalue in list(vars(value).items()):
                    fn = cvalue.__func__ if isinstance(cvalue, (staticmethod, classmethod)) else cvalue
                    if inspect.isfunction(fn) and _from_torch_tpu(fn):
                        yield f"{name}.{attr}.{cattr}", fn


def _py_kernels_from_torch_tpu():
    for ns_name, ns in list(vars(torch.ops).items()):
        if not isinstance(ns, types.ModuleType):
            continue
        for packet_name, packet in list(vars(ns).items()):
            overloads = [(packet_name, packet)] if hasattr(packet, "py_kernels") else []
            if isinstance(packet, torch._ops.OpOverloadPacket):
                overloads = [(f"{packet_name}.{o}", op) for o, op in vars(packet).items()
                             if isinstance(op, torch._ops.OpOverload)]
            for op_name, op in overloads:
                tables = [getattr(op, "py_kernels", {}), getattr(op, "python_key_table", {})]
                for table in tables:
                    for key, fn in list(table.items()):
                        if callable(fn) and _from_torch_tpu(fn):
                            yield f"torch.ops.{ns_name}.{op_name}[{getattr(key, 'name', key)}]", fn


@pytest.mark.filterwarnings("ignore::FutureWarning")  # the scan touches deprecated attributes
def test_live_process_holds_no_unlisted_patch():
    torch_tpu.compiler.register()
    torch_tpu.patches.multilabel_margin_tracing.install()
    pytest.importorskip("safetensors.torch")
    listed = _installed_targets()
    found = dict(_torch_tpu_objects_in_libraries())
    for name in ("torch.autograd.backward", "torch.autograd.grad",
                 "torch.nn.parallel.data_parallel.DataParallel.__init__"):
        assert name in found, f"the scan missed the listed {name}: it is blind"
    stray = [name for name, obj in found.items() if id(obj) not in listed]
    assert not stray, f"torch_tpu objects in other libraries that torch_tpu/patches does not list: {stray}"

    targets = {t for r in RECORDS if r.installed() for t in r.targets}
    kernels = list(_py_kernels_from_torch_tpu())
    assert kernels, "the listed py_impl kernel was not found: the scan is blind"
    stray = [name for name, _ in kernels if name not in targets]
    assert not stray, f"py_impl kernels from torch_tpu that torch_tpu/patches does not list: {stray}"

    hooks = [f for f in sys.meta_path + sys.path_hooks if _from_torch_tpu(f)]
    assert all(any(record.marked(f, r.name) and "sys.meta_path" in r.targets for r in RECORDS) for f in hooks), hooks


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_the_live_scan_finds_a_patch_made_elsewhere(monkeypatch):
    stray = torch_tpu.cache_info  # any function of torch_tpu's, put where it does not belong
    monkeypatch.setattr(torch.nn.Module, "zero_grad", stray)
    found = [name for name, obj in _torch_tpu_objects_in_libraries({"torch.nn.modules.module"}) if obj is stray]
    assert found == ["torch.nn.modules.module.Module.zero_grad"]


# ---- nothing unlisted: the source ------------------------------------------------------

_ENV_OWN = "TORCH_TPU_"   # torch_tpu's own settings (the settings table), not another library's
_MUTATING_CALLS = {"setattr", "delattr"}
_LIST_MUTATORS = {"insert", "append", "extend", "remove", "pop", "clear", "__setitem__"}
_ENV_MUTATORS = {"setdefault", "update", "pop", "clear", "__setitem__", "__delitem__"}


def _foreign_names(tree):
    """Names bound by absolute imports of other libraries (import torch, from vllm.x import y)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "torch_tpu":
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] != "torch_tpu":
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _chain(node):
    """['torch', 'nn', 'Module', '_apply'] for torch.nn.Module._apply (subscripts kept as '[...]')."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else "?"
            parts.append(f"[{key}]")
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return parts[::-1]
        else:
            return None


def _allowed(chain):
    dotted = ".".join(chain)
    if dotted.startswith("os.environ.[") and chain[2][1:].startswith(_ENV_OWN):
        return True
    if dotted.startswith("sys.modules.[") and chain[2][1:].startswith(("torch.tpu", "torch.backends.tpu")):
        return True  # torch.tpu.* and torch.backends.tpu: names of torch_tpu's own modules
    if dotted == "torch.backends.tpu":
        return True  # the device's own backends namespace, as torch.backends.cuda is CUDA's
    return False


# Files whose foreign-looking assignments change no library: the tuner's
# worker runs the user's script as __main__ (as runpy does, sys.argv and
# sys.modules["__main__"] set for that run), and torch_tpu.tune makes its own
# module callable.
_NOT_PATCHES = {os.path.join("tune", "workload.py"), os.path.join("tune", "__init__.py")}


def _patches_in_source(path):
    tree = ast.parse(open(path).read(), path)
    foreign = _foreign_names(tree)
    found = []

    def note(node, what):
        found.append(f"{os.path.relpath(path, SOURCE)}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for t in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                chain = _chain(t) if isinstance(t, (ast.Attribute, ast.Subscript)) else None
                if chain and chain[0] in foreign and not _allowed(chain):
                    note(node, "assigns " + ".".join(chain))
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _MUTATING_CALLS and node.args:
                chain = _chain(node.args[0])
                if chain and chain[0] in foreign:
                    note(node, f"{func.id}({'.'.join(chain)}, ...)")
            elif isinstance(func, ast.Attribute):
                chain = _chain(func.value) or []
                dotted = ".".join(chain)
                if func.attr == "py_impl":
                    note(node, f"{dotted}.py_impl(...)")
                elif dotted in ("sys.meta_path", "sys.path_hooks") and func.attr in _LIST_MUTATORS:
                    note(node, f"{dotted}.{func.attr}(...)")
                elif dotted == "sys.modules" and func.attr in _ENV_MUTATORS:
                    key = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else "?"
                    if not str(key).startswith(("torch.tpu", "torch.backends.tpu")):
                        note(node, f"sys.modules.{func.attr}({key!r}, ...)")
                elif dotted == "os.environ" and func.attr in _ENV_MUTATORS:
                    key = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else "?"
                    if not str(key).startswith(_ENV_OWN):
                        note(node, f"os.environ.{func.attr}({key!r}, ...)")
                elif dotted == "os" and func.attr in ("putenv", "unsetenv"):
                    note(node, f"os.{func.attr}(...)")
    return found


def _source_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(folder, f)


def test_no_patch_in_the_source_outside_the_patches_folder():
    found = []
    for path in _source_files(SOURCE):
        if not os.path.realpath(path).startswith(PATCHES + os.sep) and os.path.relpath(path, SOURCE) not in _NOT_PATCHES:
            found += _patches_in_source(path)
    assert not found, "patches outside torch_tpu/patches/ (move each there, with its record):\n" + "\n".join(found)


def test_the_source_scan_finds_the_listed_patches():
    found = [line for path in _source_files(PATCHES) for line in _patches_in_source(path)]
    text = "\n".join(found)
    for expected in ("torch.autograd", "sys.meta_path.insert", "py_impl",
                     "torch.cuda.Event", "gpu_model_runner.allocate_kv_cache", "os.environ.setdefault",
                     "VLLM_WORKER_MULTIPROC_METHOD"):
        assert expected in text, (expected, text)


def test_cpp_registers_kernels_for_the_tpu_keys_only():
    """A C++ kernel registered for another backend's key (CPU, CUDA, Autograd,
    CompositeImplicitAutograd, ...) would change PyTorch's behaviour off tpu."""
    import re

    block = re.compile(r"TORCH_LIBRARY(_IMPL|_FRAGMENT)?\(\s*(\w+)\s*(?:,\s*(\w+))?")
    found = []
    for folder, _, files in os.walk(os.path.join(REPO, "csrc")):
        for f in files:
            if f.endswith((".cpp", ".h")):
                path = os.path.join(folder, f)
                for n, line in enumerate(open(path, errors="replace"), 1):
                    for kind, ns, key in block.findall(line):
                        if (kind != "_IMPL" and ns != "torch_tpu") or (kind == "_IMPL" and "PrivateUse1" not in key):
                            found.append(f"{os.path.relpath(path, REPO)}:{n}: {line.strip()}")
    assert not found, "C++ registrations outside the tpu keys (a patch: list it in torch_tpu/patches):\n" + "\n".join(found)


# ---- the doc ---------------------------------------------------------------------------

def test_docs_patches_md_is_current():
    path = os.path.join(REPO, "docs", "patches.md")
    with open(path) as f:
        assert f.read() == doc.render(), "docs/patches.md is stale: run `python -m torch_tpu.patches.doc`"
