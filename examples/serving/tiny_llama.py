"""A small random Llama and a BPE tokenizer trained offline on a given text,
written into a folder (nothing comes from a model hub): the model
make_tiny_llama.py writes and benchmarks/serving.py serves, and the smaller
one tests/test_serving_vllm.py and tests/test_serving_sglang.py check."""


def build_tiny_llama(path, corpus, *, vocab_size=200, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     max_position_embeddings=256, chat_template=None):
    """Trains the tokenizer on `corpus` (a list of texts), builds the Llama
    (seed 0, float32, head_dim 32, 4 heads over 2 KV heads), saves both in
    `path` -> (tokenizer, model)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    # Metaspace pieces are whole characters, so every token decodes to text
    # on its own (no partial UTF-8 bytes) and texts compare exactly.
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size,
                                                        special_tokens=["<unk>", "<s>", "</s>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    if chat_template is not None:
        fast.chat_template = chat_template
    fast.save_pretrained(path)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=hidden_size, intermediate_size=intermediate_size,
                         num_hidden_layers=num_hidden_layers, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=32, max_position_embeddings=max_position_embeddings, bos_token_id=1,
                         eos_token_id=2)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(path)
    return fast, model
