"""An import hook that runs a function on a module right after it is first
imported: the way a patch changes an optional or heavy library without
importing it at `import torch_tpu`."""
import importlib.abc
import importlib.machinery
import sys

from .record import mark, marked


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, after):
        self.inner = inner
        self.after = after

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.after(module)


class AfterImport(importlib.abc.MetaPathFinder):
    """A `sys.meta_path` finder for one module: once that module has run,
    `after(module)` runs. It carries its patch's mark."""

    def __init__(self, target, after, patch_name):
        self.target = target
        self.after = after
        mark(self, patch_name)

    def find_spec(self, name, path, target=None):
        if name != self.target:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self.after)
        return spec


def run_after_import(target, after, patch_name):
    """Runs `after(module)` on `target` now if it is imported, else installs
    an AfterImport hook for it (once)."""
    if target in sys.modules:
        after(sys.modules[target])
    elif not waiting(target):
        sys.meta_path.insert(0, AfterImport(target, after, patch_name))


def waiting(target):
    """Whether a hook for `target` is installed."""
    return any(isinstance(f, AfterImport) and f.target == target for f in sys.meta_path)


def wrapped_after_import(target, attribute, patch_name):
    """Whether `target`'s `attribute` carries patch_name's mark, once the
    module is imported; until then, whether the hook waits for it."""
    module = sys.modules.get(target)
    if module is not None:
        return marked(getattr(module, attribute, None), patch_name)
    return waiting(target)
