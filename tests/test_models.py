"""Hugging Face transformers models on tpu, built from small configs (no
downloads, fixed seed), compared with the same model on the CPU:
forward logits, one training step's gradients and, for the decoders, greedy
generate() of 20 tokens with the default dynamic KV cache and a static cache.
Zero CPU fallbacks (the suite runs with TORCH_TPU_FALLBACK=error).
generate() checks stop tokens with isin, and the grouped_mm experts count
tokens per expert with histc: those rules live in the OpInfo family's files
(ops/order_statistics.cpp, ops/searching.cpp)."""
import copy
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")
import torch_tpu  # noqa: E402
from torch_tpu import settings  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers.logging.set_verbosity_error()

VOCAB = 96
SMALL = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64, attn_implementation="sdpa")
GQA = dict(SMALL, num_key_value_heads=2)


def gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, attn_implementation="sdpa"))


def llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**GQA))


def mistral():
    return transformers.MistralForCausalLM(transformers.MistralConfig(**GQA))


def qwen2():
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**GQA))


def qwen2_moe(experts="eager"):
    # experts="eager": transformers' per-expert loop (data-dependent token
    # selection: nonzero, index, index_add). Its default, "grouped_mm", sorts
    # tokens by expert and runs torch._grouped_mm (qwen2_moe_grouped below).
    return transformers.Qwen2MoeForCausalLM(transformers.Qwen2MoeConfig(
        **GQA, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
        decoder_sparse_step=1, experts_implementation=experts))


def bert():
    return transformers.BertForMaskedLM(transformers.BertConfig(
        **SMALL, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def t5():
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, dropout_rate=0.0,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, attn_implementation="sdpa"))


def vit():
    return transformers.ViTForImageClassification(transformers.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        attn_implementation="sdpa"))


DECODERS = {"gpt2": gpt2, "llama": llama, "mistral": mistral, "qwen2": qwen2, "qwen2_moe": qwen2_moe,
            "qwen2_moe_grouped": lambda: qwen2_moe("grouped_mm")}
MODELS = {**DECODERS, "bert": bert, "t5": t5, "vit": vit}


def build(name):
    torch.manual_seed(0)
    cpu = MODELS[name]().eval()
    # Module.to() keeps a Parameter object only when the old and new tensors
    # allow a shallow copy, which PyTorch grants to its in-tree devices only;
    # otherwise each module gets a new Parameter and tied weights (GPT-2's and
    # T5's embedding and LM head, BERT's decoder) come apart. Swapping tensors
    # keeps the Parameter objects, as a move to cuda does.
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        dev = copy.deepcopy(cpu).to("tpu")
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)
    return cpu, dev


def batch(name):
    """Model inputs and the training labels, on the CPU."""
    g = torch.Generator().manual_seed(1)
    if name == "vit":
        return dict(pixel_values=torch.randn(2, 3, 16, 16, generator=g), labels=torch.tensor([1, 3]))
    ids = torch.randint(2, VOCAB, (2, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # padding in the second row (left padding, as generate expects)
    inputs = dict(input_ids=ids, attention_mask=mask)
    if name == "t5":
        inputs["decoder_input_ids"] = torch.randint(2, VOCAB, (2, 7), generator=g)
        inputs["labels"] = torch.randint(2, VOCAB, (2, 7), generator=g)
    else:
        inputs["labels"] = ids.masked_fill(mask == 0, -100)
    return inputs


def to_tpu(inputs):
    return {k: v.to("tpu") for k, v in inputs.items()}


def logits_of(model, inputs):
    return model(**{k: v for k, v in inputs.items() if k != "labels"}).logits


# f32 throughout; tpu matmuls/reductions order sums differently from the CPU.
TOL = dict(rtol=1e-4, atol=1e-5)
# atol: some gradients are zero in exact arithmetic (a key bias under softmax)
# and come out as rounding noise of ~1e-5 on either side.
GRAD_TOL = dict(rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", list(MODELS))
def test_forward_logits_match_cpu(name):
    cpu, dev = build(name)
    inputs = batch(name)
    with torch.no_grad():
        expected = logits_of(cpu, inputs)
        actual = logits_of(dev, to_tpu(inputs))
    assert actual.device.type == "tpu"
    torch.testing.assert_close(actual.cpu(), expected, **TOL)
    assert torch_tpu.fallback_ops() == {}


@pytest.mark.parametrize("name", list(MODELS))
def test_training_step_gradients_match_cpu(name):
    cpu, dev = build(name)
    cpu.train()
    dev.train()
    inputs = batch(name)
    loss_c = cpu(**inputs).loss
    loss_d = dev(**to_tpu(inputs)).loss
    loss_c.backward()
    loss_d.backward()
    torch.testing.assert_close(loss_d.cpu(), loss_c, **TOL)
    checked = 0
    for (n, pc), (_, pd) in zip(cpu.named_parameters(), dev.named_parameters()):
        if pc.grad is None:
            assert pd.grad is None, n
            continue
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, **GRAD_TOL, msg=lambda m: f"{name} {n}: {m}")
        checked += 1
    assert checked > 0
    # The optimizer step runs on tpu too and keeps the models in step.
    for m in (cpu, dev):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        opt.step()
    for (n, pc), (_, pd) in zip(cpu.named_parameters(), dev.named_parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), **GRAD_TOL, msg=lambda m: f"{name} {n}: {m}")
    assert torch_tpu.fallback_ops() == {}


GENERATE_MODELS = list(DECODERS) + ["t5"]


def _generate_params():
    """(name, cache) for every model; with the dynamic cache every new length
    builds new programs, so the default tier runs one model that way (llama)
    and the heavy tier (TORCH_TPU_HEAVY=1) all of them (CI time budget)."""
    heavy = pytest.mark.skipif(not settings.get("TORCH_TPU_HEAVY"),
                               reason="heavy tier: set TORCH_TPU_HEAVY=1 (dynamic cache: llama runs by default)")
    return [pytest.param(name, cache, id=f"{name}-{cache}",
                         marks=[heavy] if cache == "dynamic" and name != "llama" else [])
            for name in GENERATE_MODELS for cache in ("dynamic", "static")]


@pytest.mark.parametrize("name,cache", _generate_params())
def test_greedy_generate_matches_cpu(name, cache):
    cpu, dev = build(name)
    inputs = batch(name)
    prompt = dict(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    kw = dict(max_new_tokens=20, min_new_tokens=20, do_sample=False, pad_token_id=0)
    if cache == "static":
        # generate() would torch.compile a static-cache decoder step; the
        # tpu compile backend is tested elsewhere, here the eager path.
        kw.update(cache_implementation="static", disable_compile=True)
    expected = cpu.generate(**prompt, **kw)
    actual = dev.generate(**to_tpu(prompt), **kw)
    assert actual.device.type == "tpu"
    assert expected.shape[1] >= prompt["input_ids"].shape[1] + 20 or name == "t5"
    assert torch.equal(actual.cpu(), expected)
    assert torch_tpu.fallback_ops() == {}


def test_static_cache_generate_compiles_its_decode_step_with_the_tpu_backend():
    """generate() with a static cache torch.compiles the decoder step; on tpu
    that is backend="tpu": one graph, no eager fallback, the CPU's tokens."""
    torch_tpu.compiler.register()
    torch._dynamo.reset()
    torch_tpu.reset_compile_stats()
    cpu, dev = build("llama")
    inputs = batch("llama")
    prompt = dict(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    kw = dict(max_new_tokens=20, min_new_tokens=20, do_sample=False, pad_token_id=0, cache_implementation="static")
    expected = cpu.generate(**prompt, **kw, disable_compile=True)
    actual = dev.generate(**to_tpu(prompt), **kw)
    assert torch.equal(actual.cpu(), expected)
    stats = torch_tpu.compile_stats()
    assert stats["compiles"] >= 1 and stats["eager_graphs"] == {}
    assert torch_tpu.fallback_ops() == {}
    torch._dynamo.reset()


def train_step(model, inputs):
    """Loss, gradients and parameters after one AdamW step."""
    model.train()
    loss = model(**inputs).loss
    loss.backward()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.step()
    grads = [p.grad.cpu() for p in model.parameters() if p.grad is not None]
    return [loss.detach().cpu()] + grads + [p.detach().cpu() for p in model.parameters()]


# Same device, same rules: fusion only changes XLA's order of float operations.
FUSED_TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(MODELS))
def test_fused_eager_matches_strict_eager(name):
    """Fused eager (one program per cluster of ops) gives op-by-op eager's
    logits, gradients and optimizer step, with zero fallbacks."""
    inputs = to_tpu(batch(name))
    _, strict_model = build(name)
    with torch.no_grad():
        strict_logits = logits_of(strict_model, inputs).cpu()
    strict = train_step(strict_model, inputs)
    _, fused_model = build(name)
    torch_tpu.reset_fused_stats()
    with torch_tpu.eager_mode("fused"):
        with torch.no_grad():
            fused_logits = logits_of(fused_model, inputs).cpu()
        fused = train_step(fused_model, inputs)
    stats = torch_tpu.fused_stats()
    assert stats["ops"] > 50 and stats["clusters"] < stats["ops"] / 10, stats
    torch.testing.assert_close(fused_logits, strict_logits, **FUSED_TOL)
    assert len(fused) == len(strict)
    for i, (f, s) in enumerate(zip(fused, strict)):
        torch.testing.assert_close(f, s, **GRAD_TOL, msg=lambda m: f"{name} tensor {i}: {m}")
    assert torch_tpu.fallback_ops() == {}


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "vit"])
def test_compiled_forward_matches_eager(name):
    """torch.compile(backend="tpu") of the whole model: eager's logits."""
    torch_tpu.compiler.register()
    torch._dynamo.reset()
    inputs = to_tpu(batch(name))
    _, model = build(name)
    with torch.no_grad():
        eager = logits_of(model, inputs).cpu()
        compiled = torch.compile(model, backend="tpu")
        actual = logits_of(compiled, inputs).cpu()
    torch._dynamo.reset()
    torch.testing.assert_close(actual, eager, **FUSED_TOL)
    assert torch_tpu.fallback_ops() == {}
