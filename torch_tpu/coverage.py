"""OpInfo conformance sweep and coverage report.

    python -m torch_tpu.coverage [--dtypes float32,bfloat16] [--ops REGEX]
                                 [--max-samples N] [--out docs/coverage.md]

Walks PyTorch's own operator database (op_db), runs every sample input of
each OpInfo on `tpu` and on the CPU and compares them with PyTorch's
tolerances (torch.testing.assert_close's per-dtype defaults, widened by the
OpInfo's own toleranceOverride decorators). The backward pass is the gradient
of the sum of the floating outputs with respect to the inputs that require
grad. Each (op, dtype, forward/backward) is classified:

    native       every sample matched and nothing fell back to the CPU
    fallback     every sample matched, but some ATen op ran on the CPU
    fail         a sample raised on tpu only, or did not match (first reason kept)
    unsupported  not supported by design (UNSUPPORTED lists each with its reason)
    nosample     no sample ran (the CPU itself rejected every sample)

The sweep runs in a worker process; the parent gives each (op, dtype, pass) a
time limit and restarts the worker after a crash or a hang, recording it as a
failure, so one op cannot stop the sweep.
"""
import argparse
import json
import os
import re
import select
import subprocess
import sys
import time
from collections import Counter, namedtuple

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "int64": torch.int64, "bool": torch.bool}

# Not supported by design, with the reason. Keys are op keys (name[.variant]).
_COMPLEX32 = "complex32 (chalf); tpu stores complex64 and complex128 only"
_SPARSE = "sparse layouts; tpu tensors are dense (strided) only"
# Ops outside PyTorch's OpInfo database with tpu rules and tests of their own.
OUTSIDE_OPINFO = ("Outside OpInfo: torchvision's detection ops `nms`, `roi_align`, `ps_roi_align`, `roi_pool`, "
                  "`ps_roi_pool` and `deform_conv2d` (forward and backward) are native on tpu in the torch 2.14 "
                  "environment (tests/test_ops_torchvision.py).")
UNSUPPORTED = {
    "chalf": _COMPLEX32,
    **{k: _SPARSE for k in ("to_sparse", "sparse.mm.reduce", "sparse.sampled_addmm")},
}

# Ops whose non-input tensor arguments PyTorch requires on the CPU (as a
# user would pass them): tensor_split's indices_or_sections.
ARGS_ON_CPU = {"tensor_split"}

# Ops whose values cannot be compared with the CPU's: random numbers come from
# the device's own counter-based generator, and empty tensors are
# uninitialised. For these only the result's dtype, shape and device are checked.
METADATA_ONLY = {
    "bernoulli", "normal", "normal.number_mean", "multinomial", "uniform", "log_normal",
    "rand_like", "randn_like", "randint_like", "randint", "randn", "cauchy", "exponential",
    "geometric", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.feature_alpha_dropout.without_train",
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "nn.functional.rrelu",
}

Result = namedtuple("Result", "status reason samples")


def op_key(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def load_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def tolerances(op, dtype):
    """(rtol, atol): assert_close's defaults for `dtype`, or the widest
    toleranceOverride the OpInfo declares for it."""
    from torch.testing._internal.common_device_type import toleranceOverride
    rtol = atol = None
    for info in getattr(op, "decorators", ()) or ():
        for dec in getattr(info, "decorators", ()) or ():
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                t = dec.d[dtype]
                rtol = max(rtol or 0.0, t.rtol)
                atol = max(atol or 0.0, t.atol)
    if rtol is None:
        return None, None
    from torch.testing._comparison import default_tolerances
    r0, a0 = default_tolerances(dtype)
    return max(rtol, r0), max(atol, a0)


# ---- moving samples and comparing results ------------------------------------------

def _map(obj, f):
    if isinstance(obj, torch.Tensor):
        return f(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_map(x, f) for x in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(x, f) for x in obj)
    if isinstance(obj, dict):
        return {k: _map(v, f) for k, v in obj.items()}
    return obj


def _to_tpu(t):
    y = t.detach().to("tpu")
    return y.requires_grad_(True) if t.requires_grad else y


def _device_to_tpu(v):
    """A CPU device argument (x.to("cpu"), device="cpu") becomes tpu."""
    if isinstance(v, (str, torch.device)) and str(v) == "cpu":
        return "tpu"
    return v


def tpu_sample(sample, args_on_cpu=False):
    args = sample.args if args_on_cpu else _map(sample.args, _to_tpu)
    args = tuple(_device_to_tpu(v) for v in args)
    kwargs = {k: _device_to_tpu(v) for k, v in _map(sample.kwargs, _to_tpu).items()}
    return _map(sample.input, _to_tpu), args, kwargs


def _flat(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _flat(x)]
    return []


def compare(actual, expected, rtol, atol, metadata_only=False, path="result"):
    """Raises AssertionError naming the first difference."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
        if expected.device.type == "cpu" and actual.device.type != "tpu" and actual.numel():
            raise AssertionError(f"{path}: result is on {actual.device}, expected tpu")
        if actual.dtype != expected.dtype:
            raise AssertionError(f"{path}: dtype {actual.dtype} != {expected.dtype}")
        if actual.shape != expected.shape:
            raise AssertionError(f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
        if metadata_only:
            return
        a = actual.detach().cpu()
        e = expected.detach()
        if e.layout != torch.strided:
            e = e.to_dense()
        try:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True, check_stride=False)
        except AssertionError as err:
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            raise AssertionError(f"{path}: " + "; ".join(lines[:4])) from None
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise AssertionError(f"{path}: expected a sequence of {len(expected)}, got {type(actual).__name__}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, rtol, atol, metadata_only, f"{path}[{i}]")
        return
    if isinstance(expected, float) and isinstance(actual, float) and expected != expected and actual != actual:
        return
    if actual != expected and not metadata_only:
        raise AssertionError(f"{path}: {actual!r} != {expected!r}")


def _reason(err):
    msg = str(err).strip().splitlines()
    first = msg[0] if msg else ""
    for ln in msg:  # the useful line of a long C++ message
        if "Error" in ln or "error" in ln:
            first = ln
            break
    return f"{type(err).__name__}: {first[:300]}"


def _float_grad_inputs(inp, args, kwargs):
    return [t for t in _flat([inp, list(args), list(kwargs.values())])
            if t.requires_grad and t.is_floating_point()]


def _sum_of_outputs(out):
    outs = [t for t in _flat(out) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    if not outs:
        return None
    return sum(t.sum() for t in outs)


def _backward(op, inp, args, kwargs, post=lambda x: x):
    """(grads, inputs) of the sum of `op`'s (post-processed) floating outputs; None
    when nothing is differentiable."""
    out = post(op(inp, *args, **kwargs))
    loss = _sum_of_outputs(out)
    leaves = _float_grad_inputs(inp, args, kwargs)
    if loss is None or not leaves:
        return None
    return torch.autograd.grad(loss, leaves, allow_unused=True)


# ---- checking one op ---------------------------------------------------------------

def _samples(op, dtype, requires_grad):
    torch.manual_seed(0)
    return op.sample_inputs("cpu", dtype, requires_grad=requires_grad)


def check(op, dtype, backward=False, max_samples=None, time_limit=None):
    """Runs the samples of `op` in `dtype` on tpu and the CPU. Returns a Result."""
    import torch_tpu
    key = op_key(op)
    if key in UNSUPPORTED:
        return Result("unsupported", UNSUPPORTED[key], 0)
    metadata_only = key in METADATA_ONLY or op.name in METADATA_ONLY
    rtol, atol = tolerances(op, dtype)
    start = time.monotonic()
    ran = 0
    failure = None
    fell_back = Counter()
    try:
        samples = iter(_samples(op, dtype, backward))
    except Exception as e:  # the OpInfo itself cannot make samples for this dtype
        return Result("nosample", f"sample_inputs raised {_reason(e)}", 0)
    mode = None
    while max_samples is None or ran < max_samples:
        if time_limit is not None and time.monotonic() - start > time_limit:
            break
        try:
            sample = next(samples)
        except StopIteration:
            break
        except Exception as e:
            failure = failure or f"sample_inputs raised {_reason(e)}"
            break
        # Both sides go through the sample's output_process_fn_grad, as PyTorch's own
        # CPU-vs-device test (test_compare_cpu) does: for SVD, eigh and the like it
        # removes the sign freedom of the vectors, which differ between valid answers.
        post = sample.output_process_fn_grad
        # The CPU reference; a sample the CPU rejects says nothing about tpu.
        try:
            if backward:
                expected = _backward(op.op, sample.input, sample.args, sample.kwargs, post)
                if expected is None:
                    continue
            else:
                expected = post(op.op(sample.input, *sample.args, **sample.kwargs))
        except Exception:
            continue
        ran += 1
        try:
            torch_tpu.set_fallback_mode("silent")
            torch_tpu.reset_fallback_ops()
            inp, args, kwargs = tpu_sample(sample, op.name in ARGS_ON_CPU)
            if backward:
                actual = _backward(op.op, inp, args, kwargs, post)
                if actual is None:
                    raise AssertionError("no differentiable output on tpu")
            else:
                actual = post(op.op(inp, *args, **kwargs))
            fell_back.update(torch_tpu.fallback_ops())
            compare(actual, expected, rtol, atol, metadata_only, "grad" if backward else "result")
        except Exception as e:
            fell_back.update(torch_tpu.fallback_ops())
            if failure is None:
                failure = f"sample {ran - 1}: {_reason(e)}"
        finally:
            torch_tpu.set_fallback_mode(mode or torch_tpu.settings.get("TORCH_TPU_FALLBACK"))
    if failure is not None:
        return Result("fail", failure, ran)
    if ran == 0:
        return Result("nosample", "no sample ran on the CPU", 0)
    if fell_back:
        return Result("fallback", "CPU fallback: " + ", ".join(sorted(fell_back)), ran)
    return Result("native", "", ran)


def units(op_db, dtypes, ops_filter=None, backward=True):
    """The (op, dtype name, backward) triples a sweep checks."""
    pat = re.compile(ops_filter) if ops_filter else None
    for op in op_db:
        key = op_key(op)
        if pat and not pat.search(key):
            continue
        supported = op.supported_dtypes("cpu")
        bwd = op.supported_backward_dtypes("cpu") if op.supports_autograd else set()
        for name in dtypes:
            dt = DTYPES[name]
            if dt not in supported:
                continue
            yield op, name, False
            if backward and dt.is_floating_point and dt in bwd:
                yield op, name, True


# ---- worker process ------------------------------------------------------------------

def _worker(args):
    """Reads 'key dtype fwd|bwd' lines; writes one JSON result line each."""
    import torch_tpu  # noqa: F401
    ops = {op_key(op): op for op in load_op_db()}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        key, dtype, kind = line.split()
        try:
            r = check(ops[key], DTYPES[dtype], kind == "bwd", args.max_samples, args.soft_limit)
        except BaseException as e:  # never lose the worker to one op
            r = Result("fail", f"harness: {_reason(e)}", 0)
        sys.stdout.write(json.dumps({"op": key, "dtype": dtype, "pass": kind, "status": r.status,
                                     "reason": r.reason, "samples": r.samples}) + "\n")
        sys.stdout.flush()


class _Worker:
    def __init__(self, args):
        cmd = [sys.executable, "-m", "torch_tpu.coverage", "--worker",
               "--max-samples", str(args.max_samples or 0), "--soft-limit", str(args.soft_limit)]
        env = dict(os.environ, TORCH_TPU_FALLBACK="silent")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env, bufsize=1)
        if self._readline(600) != "ready":
            raise RuntimeError("coverage worker failed to start")

    def _readline(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            return None
        return self.p.stdout.readline().strip()

    def run(self, key, dtype, kind, timeout):
        self.p.stdin.write(f"{key} {dtype} {kind}\n")
        self.p.stdin.flush()
        line = self._readline(timeout)
        if line is None:
            self.kill()
            return {"status": "fail", "reason": f"timed out after {timeout:.0f} s", "samples": 0}
        if not line:
            code = self.p.wait()
            return {"status": "fail", "reason": f"worker process died (exit status {code})", "samples": 0}
        return json.loads(line)

    def alive(self):
        return self.p.poll() is None

    def kill(self):
        self.p.kill()
        self.p.wait()

    def close(self):
        if self.alive():
            self.p.stdin.close()
            self.p.wait()


def sweep(args, progress=True):
    op_db = load_op_db()
    todo = list(units(op_db, args.dtypes, args.ops, backward=not args.no_backward))
    results = []
    worker = None
    t0 = time.monotonic()
    for i, (op, dtype, bwd) in enumerate(todo):
        if worker is None or not worker.alive():
            worker = _Worker(args)
        r = worker.run(op_key(op), dtype, "bwd" if bwd else "fwd", args.time_limit)
        r.update(op=op_key(op), dtype=dtype, **{"pass": "bwd" if bwd else "fwd"})
        results.append(r)
        if progress:
            print(f"[{i + 1}/{len(todo)} {time.monotonic() - t0:6.0f}s] {r['op']} {dtype} {r['pass']}: "
                  f"{r['status']} {r['reason'][:120]}", file=sys.stderr, flush=True)
    if worker is not None:
        worker.close()
    return results, time.monotonic() - t0


# ---- the report ----------------------------------------------------------------------

def _pct(n, d):
    return f"{100.0 * n / d:.1f}%" if d else "-"


def report(results, args, seconds):
    by = {}
    for r in results:
        by.setdefault(r["op"], {})[(r["dtype"], r["pass"])] = r
    out = ["# Operator coverage: PyTorch's OpInfo database on `tpu`", "",
           f"Generated by `python -m torch_tpu.coverage` (torch {torch.__version__}; dtypes "
           f"{', '.join(args.dtypes)}; at most {args.max_samples or 'all'} samples per op and dtype; "
           f"{seconds / 60:.0f} min). Every sample input runs on `tpu` and on the CPU and is compared "
           "with PyTorch's tolerances (assert_close defaults, widened by the OpInfo's toleranceOverride). "
           "Backward: the gradient of the sum of the floating outputs with respect to the inputs.", "",
           "Status: **native** (every sample matched, no CPU fallback), **fallback** (matched, but some "
           "ATen op ran on the CPU), **fail** (raised on tpu only, or mismatched), **unsupported** (by "
           "design, with its reason), **nosample** (the CPU rejected every sample; not counted).", "",
           "## Summary", "",
           "| dtype | pass | ops | samples | native | fallback | fail | unsupported | native % | native % of supported |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for dtype in args.dtypes:
        for kind in ("fwd", "bwd"):
            rs = [r for r in results if r["dtype"] == dtype and r["pass"] == kind and r["status"] != "nosample"]
            if not rs:
                continue
            c = Counter(r["status"] for r in rs)
            out.append(f"| {dtype} | {'forward' if kind == 'fwd' else 'backward'} | {len(rs)} | "
                       f"{sum(r['samples'] for r in rs)} | {c['native']} | {c['fallback']} | {c['fail']} | "
                       f"{c['unsupported']} | **{_pct(c['native'], len(rs))}** | {_pct(c['native'], len(rs) - c['unsupported'])} |")
    out += ["", f"{len(by)} OpInfo entries (op name and variant) in the sweep.", "", OUTSIDE_OPINFO, ""]
    if UNSUPPORTED:
        out += ["## Unsupported by design", ""] + [f"- `{k}`: {v}" for k, v in sorted(UNSUPPORTED.items())] + [""]
    cols = [(d, k) for d in args.dtypes for k in ("fwd", "bwd")]
    cols = [c for c in cols if any(c in v for v in by.values())]
    short = {"native": "✓", "fallback": "cpu", "fail": "✗", "unsupported": "n/a", "nosample": "–"}
    out += ["## Per op", "", "✓ native, cpu = fallback, ✗ fail, n/a unsupported by design, – no sample, "
            "blank = dtype not listed by the OpInfo.", "",
            "| op | " + " | ".join(f"{d} {k}" for d, k in cols) + " |",
            "|---|" + "---|" * len(cols)]
    for key in sorted(by):
        cells = [short[by[key][c]["status"]] if c in by[key] else "" for c in cols]
        out.append(f"| `{key}` | " + " | ".join(cells) + " |")
    out += ["", "## Failures and fallbacks", ""]
    for dtype, kind in cols:
        bad = [r for r in results if r["dtype"] == dtype and r["pass"] == kind
               and r["status"] in ("fail", "fallback")]
        if not bad:
            continue
        out += [f"### {dtype} {'forward' if kind == 'fwd' else 'backward'} ({len(bad)})", ""]
        for r in sorted(bad, key=lambda r: r["op"]):
            reason = r["reason"].replace("|", "\\|").replace("\n", " ")
            out.append(f"- `{r['op']}` ({r['status']}): {reason}")
        out.append("")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.coverage", description=__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated, among " + ", ".join(DTYPES))
    p.add_argument("--ops", default=None, help="regex on the op key (name[.variant])")
    p.add_argument("--out", default="docs/coverage.md")
    p.add_argument("--json", default=None, help="also write the raw results here")
    p.add_argument("--max-samples", type=int, default=None, help="samples per op and dtype (default: all)")
    p.add_argument("--time-limit", type=float, default=120.0, help="seconds per (op, dtype, pass) before the worker is killed")
    p.add_argument("--soft-limit", type=float, default=45.0, help="seconds after which no new sample starts")
    p.add_argument("--no-backward", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        args.max_samples = args.max_samples or None
        return _worker(args)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in args.dtypes:
        if d not in DTYPES:
            p.error(f"unknown dtype {d!r}; choose among {', '.join(DTYPES)}")
    results, seconds = sweep(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=0)
    text = report(results, args, seconds)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    print(text.split("## Per op")[0])


if __name__ == "__main__":
    main()
