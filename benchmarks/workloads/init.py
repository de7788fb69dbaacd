"""Framework-neutral initial values (numpy only): one parameter is a function of
its name and shape alone, so the PyTorch and JAX versions of a workload, which
hold their parameters differently, start from identical numbers."""
import zlib

import numpy as np

SEED = 1234


def param(name, shape):
    """Biases are zero, 1-D norm scales are one, everything else is N(0, 0.02^2)
    (the GPT-2 convention; good enough for every workload here)."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "bias":
        return np.zeros(shape, np.float32)
    if len(shape) == 1 and ("norm" in name or "ln" in name):
        return np.ones(shape, np.float32)
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


def normal(name, shape):
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.standard_normal(shape).astype(np.float32)


def integers(name, shape, high):
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    return rng.integers(0, high, shape).astype(np.int64)


# AdamW hyperparameters shared by every training workload and framework.
# A small learning rate: each step trains on the same batch, and a larger one
# drives the loss (and the gradients) to zero within the timed steps.
LR, BETAS, EPS, WEIGHT_DECAY = 1e-4, (0.9, 0.999), 1e-8, 0.01
