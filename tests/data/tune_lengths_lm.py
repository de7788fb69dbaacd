"""tests/data/tune_small_lm.py with varying sequence lengths (LENGTHS): the
tuner's steps cycle through them, and shape buckets become a knob."""
from tune_small_lm import BATCH_SIZE, loss_fn, make_batch, make_model  # noqa: F401

LENGTHS = [5, 7, 11, 16]
