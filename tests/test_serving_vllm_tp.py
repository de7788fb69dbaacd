"""vLLM tensor parallel on tpu: two worker processes, each on its own tpu
device (tpu:0, tpu:1), the model's linear layers sharded between them and
their partial sums all-reduced over torch_tpu's `tpu_dist` process group. The
greedy tokens equal HF transformers' on the CPU, as with one device
(test_serving_vllm.py). Eager mode keeps the test short: the compiled model's
collectives run as program segments, which test_dist_compiled.py covers."""
import json
import textwrap

import pytest

from test_serving_vllm import MAX_TOKENS, PROMPTS, _run_vllm, llama  # noqa: F401  (llama is a fixture)
from torch_tpu import settings

# Heavy tier: two vLLM workers (about a minute). tpu_dist's collectives and
# tensor parallelism stay in the default tier (test_dist_*.py), and vLLM on one
# device in test_serving_vllm.py.
pytestmark = pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"),
                                reason="heavy tier: set TORCH_TPU_HEAVY=1 (vLLM with 2 tensor-parallel workers)")

_GENERATE_TP = textwrap.dedent(
    """
    import json, os, sys

    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"

    # Where each worker runs and what its device group is.
    def placement(worker):
        import torch
        from vllm.distributed.parallel_state import get_tp_group
        group = get_tp_group()
        return [str(worker.device), group.rank_in_group, group.world_size,
                torch.distributed.get_backend(group.device_group), torch.tpu.device_count()]

    def main():
        from vllm import LLM, SamplingParams

        llm = LLM(model=sys.argv[1], dtype="float32", max_model_len=128, max_num_seqs=4,
                  tensor_parallel_size=2, enforce_eager=True, kv_cache_memory_bytes=1 << 22, seed=0)
        greedy = SamplingParams(temperature=0, max_tokens=int(sys.argv[3]), ignore_eos=True)
        out = llm.generate(json.loads(sys.argv[2]), greedy, use_tqdm=False)
        print("RESULT " + json.dumps({
            "tokens": [list(o.outputs[0].token_ids) for o in out],
            "placement": llm.collective_rpc(placement),
        }), flush=True)

    if __name__ == "__main__":
        main()
    """
)


def test_tensor_parallel_2_matches_hf_greedy(llama, tmp_path):  # noqa: F811
    path, (expected, _), _, _ = llama
    got = _run_vllm(tmp_path, _GENERATE_TP, path, json.dumps(PROMPTS), str(MAX_TOKENS))
    assert got["tokens"] == [tokens for _, tokens in expected]
    assert sorted(map(tuple, got["placement"])) == [
        ("tpu:0", 0, 2, "tpu_dist", 2),
        ("tpu:1", 1, 2, "tpu_dist", 2),
    ]
