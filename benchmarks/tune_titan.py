"""TorchTitan 0.3.0's llama3 debug model (6.2 M parameters, 6 layers, dim 256,
vocabulary 2,048) as a torch_tpu.tune workload, one rank, in the model form:

    .venv-2.14/bin/python -m torch_tpu.tune benchmarks/tune_titan.py --budget 300

The model is TorchTitan's own, built from its `llama3_debugmodel` config with
its attention set to TorchTitan's `ScaledDotProductAttention`
(examples/torchtitan/tpu_configs.py's `llama3_debugmodel_sdpa`; flex
attention's backward has no CPU reference); the loss is TorchTitan's (cross entropy over the flattened
logits) and the optimizer its config's AdamW. Sequences of SEQ_LEN random
tokens. Needs the environment with TorchTitan (`scripts/setup.sh --torch
2.14 --titan`).
"""
import os
import sys

import torch
import torch.nn.functional as F

SEQ_LEN = 256
BATCH_SIZE = 4
TOKENS_PER_SAMPLE = SEQ_LEN
VOCAB = 2048


def _config():
    """examples/torchtitan's `llama3_debugmodel_sdpa`: TorchTitan's config, SDPA attention."""
    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "torchtitan")
    if examples not in sys.path:
        sys.path.insert(0, examples)
    from tpu_configs import llama3_debugmodel_sdpa

    return llama3_debugmodel_sdpa()


def make_model():
    torch.manual_seed(0)
    model = _config().model_spec.model.build()
    model.init_states()
    return model


def make_batch(batch_size, length=None):
    g = torch.Generator().manual_seed(batch_size)
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ_LEN + 1), generator=g)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def loss_fn(model, inputs, labels):
    logits = model(inputs)
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


def make_optimizer(model):
    group = _config().optimizer.param_groups[0]
    kwargs = dict(group.optimizer_kwargs)
    return torch.optim.AdamW(model.parameters(), **kwargs)
