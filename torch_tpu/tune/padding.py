"""Padding advice: vocabulary-like sizes that are not a multiple of the MXU's
128-wide tile, and a padded copy of the model to measure what padding gains.

The tuner cannot pad a user's model for them (the extra rows change the
softmax unless their logits are masked, and a checkpoint's shapes change), so
padding is advice: "pad vocab 50,257 -> 50,304", with the step time of the
padded copy measured against the unpadded one.

What is padded: each nn.Embedding's number of rows, and the output rows of
each nn.Linear whose output size equals such a row count (an untied output
head). Parameters are resized in place (`param.data = ...`, new rows zero),
so the optimizer and tied weights still hold the same Parameter objects.
"""
import torch

from .space import PAD_MULTIPLE


def padded(n, multiple=PAD_MULTIPLE):
    return -(-n // multiple) * multiple


def sizes_to_pad(model, multiple=PAD_MULTIPLE):
    """Sorted row counts of the model's embeddings that are not a multiple of
    `multiple` (sizes under `multiple` are left alone: padding them would more
    than double them)."""
    return sorted({m.num_embeddings for m in model.modules()
                   if isinstance(m, torch.nn.Embedding) and m.num_embeddings >= multiple
                   and m.num_embeddings % multiple})


def _grow_rows(param, rows):
    with torch.no_grad():
        extra = torch.zeros((rows - param.shape[0],) + tuple(param.shape[1:]), dtype=param.dtype, device=param.device)
        param.data = torch.cat([param.data, extra])


def pad_model(model, multiple=PAD_MULTIPLE):
    """Pads in place; returns {old size: new size} of what it padded."""
    sizes = sizes_to_pad(model, multiple)
    done, grown = {}, set()
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding) and m.num_embeddings in sizes:
            new = padded(m.num_embeddings, multiple)
            if id(m.weight) not in grown:
                _grow_rows(m.weight, new)
                grown.add(id(m.weight))
            done[m.num_embeddings] = new
            m.num_embeddings = new
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and m.out_features in done:
            new = done[m.out_features]
            if id(m.weight) not in grown:
                _grow_rows(m.weight, new)
                grown.add(id(m.weight))
            if m.bias is not None and id(m.bias) not in grown:
                _grow_rows(m.bias, new)
                grown.add(id(m.bias))
            m.out_features = new
    return done


def advice_text(done):
    return "; ".join(f"pad vocab {old:,} -> {new:,}" for old, new in sorted(done.items()))
