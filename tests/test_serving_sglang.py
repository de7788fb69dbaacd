"""SGLang's offline Engine serving on tpu through torch_tpu's platform plugin
(torch_tpu/serving/sglang), against HF transformers' greedy tokens on the CPU.

SGLang 0.5.23 pins torch 2.14.1, so it lives in .venv-2.14
(`bash scripts/setup.sh --sglang`); this test drives that environment's
python in a subprocess, started from "/" so that the installed torch_tpu is
the one imported, with TORCH_TPU_FALLBACK=error: an op of the model path that
falls back to the CPU fails the test. The model is a small random Llama (fixed
seed, head_dim 32, grouped KV heads) with a BPE tokenizer trained here;
nothing comes from a hub.
"""

import json
import os
import shutil
import subprocess
import textwrap

import pytest

from torch_tpu import settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = os.path.join(ROOT, ".venv-2.14", "bin", "python")
TINY_LLAMA = os.path.join(ROOT, "examples", "serving", "tiny_llama.py")


def _sglang_installed():
    if not os.path.exists(PYTHON):
        return False
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('sglang') is None)"
    return subprocess.run([PYTHON, "-c", probe], cwd="/", capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.skipif(
        not _sglang_installed(),
        reason="SGLang is not installed in .venv-2.14: run `bash scripts/setup.sh --sglang`",
    ),
    # Engines start processes of their own: one at a time (tests/conftest.py).
    pytest.mark.xdist_group("one_at_a_time"),
]

DRIVER = textwrap.dedent(
    '''
    import json, sys

    from tiny_llama import build_tiny_llama

    PROMPTS = [
        "the quick brown fox",
        "hello",
        "a tiny llama serves tokens on a tpu and the lazy dog jumps over",
        "hello world from sglang and torch",
    ]
    MAX_TOKENS = 8


    def build(path):
        corpus = [
            "the quick brown fox jumps over the lazy dog",
            "a tiny llama serves tokens on a tpu",
            "hello world from sglang and torch",
        ] * 20
        return build_tiny_llama(path, corpus)


    def hf_greedy(fast, model):
        out = []
        for prompt in PROMPTS:
            ids = fast(prompt, return_tensors="pt").input_ids
            gen = model.generate(
                ids, max_new_tokens=MAX_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0
            )
            out.append(gen[0, ids.shape[1]:].tolist())
        return out


    if __name__ == "__main__":
        path = sys.argv[1]
        fast, model = build(path)
        ref = hf_greedy(fast, model)

        import sglang
        from sglang.srt.platforms import current_platform

        engine = sglang.Engine(
            model_path=path, device="tpu", dtype="float32", mem_fraction_static=0.5,
            max_total_tokens=2048, skip_server_warmup=True, log_level="warning",
        )
        try:
            outs = engine.generate(
                PROMPTS, {"max_new_tokens": MAX_TOKENS, "temperature": 0.0, "ignore_eos": True}
            )
        finally:
            engine.shutdown()
        print("RESULT " + json.dumps({
            "platform": type(current_platform).__name__,
            "attention": current_platform.get_default_attention_backend(),
            "ref": ref,
            "got": [o["output_ids"] for o in outs],
        }))
    '''
)


def _run(tmp_path, script):
    """Writes driver.py, server_driver.py and the model builder they import
    (examples/serving/tiny_llama.py) into tmp_path, runs `script` (one of the
    two) with .venv-2.14's python -> the RESULT it printed."""
    shutil.copy(TINY_LLAMA, tmp_path)
    (tmp_path / "driver.py").write_text(DRIVER)
    (tmp_path / "server_driver.py").write_text(SERVER_DRIVER)
    # The library's default eager mode (fused), not the suite's strict: the
    # platform must pin strict in SGLang's processes itself.
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               SGLANG_PLATFORM="tpu", TORCH_TPU_FALLBACK="error", TORCH_TPU_EAGER_MODE="fused")
    proc = subprocess.run(
        [PYTHON, str(tmp_path / script), str(tmp_path / "model")], cwd="/", env=env,
        capture_output=True, text=True, timeout=420,
    )
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-4000:] + proc.stderr[-8000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_engine_generate_matches_hf_greedy(tmp_path):
    result = _run(tmp_path, "driver.py")
    assert result["platform"] == "TpuSRTPlatform"
    assert result["attention"] == "torch_native"
    assert len(result["got"]) == 4 and all(len(ids) == 8 for ids in result["got"])
    assert result["got"] == result["ref"]


SERVER_DRIVER = textwrap.dedent(
    '''
    import json, os, signal, socket, subprocess, sys, time, urllib.request
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from driver import build, MAX_TOKENS

    path = sys.argv[1]
    fast, model = build(path)
    prompt = "the quick brown fox"
    ids = fast(prompt, return_tensors="pt").input_ids
    gen = model.generate(ids, max_new_tokens=MAX_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0)
    ref = fast.decode(gen[0, ids.shape[1]:])

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", "--model-path", path, "--device", "tpu",
         "--host", "127.0.0.1", "--port", str(port), "--max-total-tokens", "2048",
         "--mem-fraction-static", "0.5", "--skip-server-warmup", "--log-level", "warning"],
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240
        while True:
            assert server.poll() is None, "the server exited"
            try:
                urllib.request.urlopen(base + "/v1/models", timeout=2).read()
                break
            except OSError:
                assert time.time() < deadline, "the server did not come up in 240 s"
                time.sleep(2)
        body = json.dumps({"model": path, "prompt": prompt, "max_tokens": MAX_TOKENS,
                           "temperature": 0, "ignore_eos": True}).encode()
        req = urllib.request.Request(base + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        reply = json.loads(urllib.request.urlopen(req, timeout=120).read())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    print("RESULT " + json.dumps({"ref": ref, "got": reply["choices"][0]["text"],
                                  "usage": reply["usage"]}))
    '''
)


# Heavy tier: the engine test above covers the model path, the scheduler
# process and the platform plugin; this one adds SGLang's HTTP server.
@pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"), reason="heavy tier: set TORCH_TPU_HEAVY=1 (a server process, ~50 s)")
def test_server_completions_match_hf_greedy(tmp_path):
    result = _run(tmp_path, "server_driver.py")
    assert result["usage"]["completion_tokens"] == 8
    assert result["got"] == result["ref"]
