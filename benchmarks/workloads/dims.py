"""Sizes of each workload, shared by its PyTorch and JAX versions (kept free of
any framework import). Small enough that a step takes tens of milliseconds on
one CPU core."""


class mlp:
    BATCH, SIZES = 128, (784, 1024, 1024, 10)


class gpt2:
    BATCH, CTX, VOCAB, EMBD, LAYERS, HEADS = 8, 128, 1024, 128, 2, 4


class llama_decode:
    BATCH, MAX_SEQ, VOCAB, DIM, LAYERS = 4, 256, 1024, 256, 4
    HEADS, KV_HEADS, FFN, ROPE_THETA, NORM_EPS = 8, 2, 512, 10000.0, 1e-5
    HEAD_DIM = DIM // HEADS


class convnet:
    BATCH, CHANNELS, CLASSES, IMAGE = 32, (3, 16, 32), 10, 32


class kv_cache:
    # 32 MiB per float32 cache: a step that copied its caches would show it.
    BATCH, MAX_SEQ, DIM = 8, 2048, 512


class gpt_100m:
    # GPT-2 small's shape (12 layers, 768 wide, 12 heads) with a 32k vocabulary:
    # 110M parameters. 256 tokens a step: its matmuls (~170 GFLOP with the
    # backward) and AdamW over 110M parameters take seconds here, so compute,
    # not per-op overhead, is what a step measures. Not in the default run.
    BATCH, CTX, VOCAB, EMBD, LAYERS, HEADS = 2, 128, 32000, 768, 12, 12
