"""Block sizes of the Pallas kernels (attention.py's flash attention,
grouped_matmul.py's tiles), as the tuner's knobs turn them on a TPU plugin.

One value per kernel for the process, set before the kernel is first traced
for a shape: a traced kernel keeps the blocks it was built with. A dimension
longer than the block is cut into blocks of the largest power-of-two
fraction of it that divides the dimension, never below 128 (the rules take
the kernels only for dimensions that 128 divides); a shorter one is one
block. Imports no JAX.
"""
VALUES = (128, 256, 512)
_MIN = 128
_chosen = {"flash_attention_block": VALUES[0], "grouped_mm_tile": VALUES[0]}


def _set(name, value):
    if isinstance(value, bool) or value not in VALUES:
        raise ValueError(f"torch_tpu.kernels: {name} is one of {VALUES}, got {value!r}")
    _chosen[name] = int(value)


def set_flash_attention_block(value):
    """Query and key block of the flash attention kernel (default 128)."""
    _set("flash_attention_block", value)


def set_grouped_mm_tile(value):
    """Tile of each grouped matmul dimension (default 128)."""
    _set("grouped_mm_tile", value)


def block_for(name, n: int) -> int:
    """The block along a dimension of size n for kernel setting `name`."""
    b = _chosen[name]
    if n <= b:
        return n
    while n % b and b > _MIN:
        b //= 2
    return b
