"""The first step of torch.compile(backend="tpu"): each graph's program builds
in the background as soon as AOTAutograd hands the graph over (the
backward's too, before the first backward) where TORCH_TPU_COMPILE_AHEAD or
the core count says so, else at the first call; Dynamo's optimizer tracing
does not import Inductor; a second process on the same persistent cache
folder (programs loaded in the background) compiles nothing and gets the
same numbers."""
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch._dynamo

import torch_tpu
from torch_tpu.compiler import compiled_graph

NEUTRAL_CWD = os.path.dirname(os.path.abspath(__file__))  # not the source tree


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _aten_graph():
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(lambda x: (torch.tanh(x) * 2,))(torch.randn(2, 3))


def _build_threads(monkeypatch):
    """{graph kind: name of the thread that built its program}."""
    threads = {}
    build = compiled_graph.CompiledGraph._build

    def spy(self, args):
        threads[self.name.rsplit("_", 1)[0]] = threading.current_thread().name
        return build(self, args)

    monkeypatch.setattr(compiled_graph.CompiledGraph, "_build", spy)
    return threads


def _train_once(model):
    fn = torch.compile(lambda x: (model(x) ** 2).mean(), backend="tpu")
    x = torch.linspace(-1, 1, 24).reshape(4, 6)
    loss = fn(x.to("tpu"))
    loss.backward()
    return loss.cpu(), [p.grad.cpu() for p in model.parameters()]


def _cpu_reference():
    model = _model()
    x = torch.linspace(-1, 1, 24).reshape(4, 6)
    loss = (model(x) ** 2).mean()
    loss.backward()
    return loss, [p.grad for p in model.parameters()]


def _train_and_compare(monkeypatch, ahead):
    """One compiled training step with TORCH_TPU_COMPILE_AHEAD=ahead, checked
    against the CPU; returns the threads that built each program."""
    monkeypatch.setenv("TORCH_TPU_COMPILE_AHEAD", ahead)
    torch._dynamo.reset()
    threads = _build_threads(monkeypatch)
    loss, grads = _train_once(_model().to("tpu"))
    ref_loss, ref_grads = _cpu_reference()
    torch.testing.assert_close(loss, ref_loss)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    return threads


def test_forward_and_backward_build_ahead_in_background(monkeypatch):
    threads = _train_and_compare(monkeypatch, "1")
    assert threads["forward"].startswith("torch_tpu_compile"), threads
    assert threads["backward"].startswith("torch_tpu_compile"), threads


def test_compile_ahead_off_builds_at_first_call(monkeypatch):
    threads = _train_and_compare(monkeypatch, "0")
    assert threads["forward"] == threading.main_thread().name, threads
    assert not threads["backward"].startswith("torch_tpu_compile"), threads


def test_compile_ahead_default_follows_the_cores(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_COMPILE_AHEAD", raising=False)
    monkeypatch.setattr(compiled_graph.os, "sched_getaffinity", lambda pid: set(range(2)))
    assert not compiled_graph.compile_ahead_enabled()
    monkeypatch.setattr(compiled_graph.os, "sched_getaffinity", lambda pid: set(range(8)))
    assert compiled_graph.compile_ahead_enabled()
    monkeypatch.setenv("TORCH_TPU_COMPILE_AHEAD", "0")
    assert not compiled_graph.compile_ahead_enabled()


def test_graph_built_ahead_then_called_with_other_shapes_compiles_again(monkeypatch):
    """A program built for the example inputs is used only when the call's
    signature matches; another signature builds its own."""
    monkeypatch.setenv("TORCH_TPU_COMPILE_AHEAD", "1")
    torch._dynamo.reset()
    gm = _aten_graph()
    g = compiled_graph.CompiledGraph(gm, "inference_ahead")
    g.build_ahead([torch.empty(3, 6, device="tpu")])
    assert len(g.pending) == 1
    x = torch.randn(2, 6)
    (out,) = g([x.to("tpu")])
    torch.testing.assert_close(out.cpu(), torch.tanh(x) * 2)
    assert len(g.pending) == 1  # the (3, 6) build is still unused
    y = torch.randn(3, 6)
    (out,) = g([y.to("tpu")])
    torch.testing.assert_close(out.cpu(), torch.tanh(y) * 2)
    assert not g.pending and len(g.programs) == 2


def test_lowering_error_in_background_runs_eagerly_with_warning(monkeypatch):
    """A graph that cannot be lowered, found in the background thread, warns
    on the calling thread at the first call and runs op by op."""
    monkeypatch.setenv("TORCH_TPU_COMPILE_AHEAD", "1")
    gm = _aten_graph()

    def refuse(*args, **kwargs):
        raise torch_tpu._C.LoweringError("refused for the test")

    monkeypatch.setattr(compiled_graph._C, "_GraphExecutable", refuse)
    g = compiled_graph.CompiledGraph(gm, "inference_refused")
    g.build_ahead([torch.empty(2, 3, device="tpu")])
    x = torch.randn(2, 3)
    with pytest.warns(UserWarning, match="refused for the test"):
        (out,) = g([x.to("tpu")])
    torch.testing.assert_close(out.cpu(), torch.tanh(x) * 2)


TRAIN = textwrap.dedent(
    """
    import json, sys
    import torch, torch_tpu
    torch_tpu.compiler.register()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    @torch.compile(backend="tpu")
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    x, y = torch.randn(32, 8).to("tpu"), torch.randn(32, 4).to("tpu")
    before = torch_tpu.cache_info()
    losses = [step(x, y).item() for _ in range(3)]
    after = torch_tpu.cache_info()
    print("RESULT " + json.dumps({
        "losses": losses,
        "graph_compiles": after["modes"]["graph"]["compiles"] - before["modes"]["graph"]["compiles"],
        "compiles": after["compiles"] - before["compiles"],
        "disk_hits": after["disk_hits"] - before["disk_hits"],
        "inductor": "torch._inductor.cudagraph_trees" in sys.modules,
    }))
    """
)


def _run_train(cache_dir):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir), TORCH_TPU_COMPILE_AHEAD="1")
    env.pop("TORCH_TPU_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", TRAIN], capture_output=True, text=True, env=env, timeout=300,
                          cwd=NEUTRAL_CWD)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_warm_process_compiles_nothing_and_matches(tmp_path):
    cold = _run_train(tmp_path)
    warm = _run_train(tmp_path)
    assert cold["graph_compiles"] >= 3 and cold["disk_hits"] == 0, cold
    assert warm["compiles"] == 0 and warm["graph_compiles"] == 0, warm
    assert warm["disk_hits"] >= cold["graph_compiles"], warm
    assert warm["losses"] == cold["losses"]
    # Dynamo's optimizer tracing of tpu tensors skips Inductor's CUDA graph trees.
    assert not cold["inductor"] and not warm["inductor"]


def test_static_for_cudagraphs_answer_kept_for_non_cuda():
    from torch._dynamo.variables import optimizer

    from torch_tpu.patches import dynamo_cudagraph_check

    torch_tpu.compiler.register()
    assert dynamo_cudagraph_check.installed()
    assert optimizer._is_static_for_cudagraphs(torch.zeros(2, device="tpu")) is True
    assert optimizer._is_static_for_cudagraphs(torch.zeros(2)) is True  # the original's answer
    assert optimizer._is_static_for_cudagraphs.__wrapped__(torch.zeros(2)) is True
