"""Element types across torch, JAX and StableHLO (MLIR names, as the C++
external-op bindings take them)."""
import jax.numpy as jnp
import torch

# torch dtype -> (jax dtype, MLIR element type name)
_TABLE = {
    torch.float32: (jnp.float32, "f32"),
    torch.float64: (jnp.float64, "f64"),
    torch.float16: (jnp.float16, "f16"),
    torch.bfloat16: (jnp.bfloat16, "bf16"),
    torch.float8_e4m3fn: (jnp.float8_e4m3fn, "f8E4M3FN"),
    torch.float8_e5m2: (jnp.float8_e5m2, "f8E5M2"),
    torch.int8: (jnp.int8, "i8"),
    torch.int16: (jnp.int16, "i16"),
    torch.int32: (jnp.int32, "i32"),
    torch.int64: (jnp.int64, "i64"),
    torch.uint8: (jnp.uint8, "ui8"),
    torch.uint16: (jnp.uint16, "ui16"),
    torch.uint32: (jnp.uint32, "ui32"),
    torch.uint64: (jnp.uint64, "ui64"),
    torch.bool: (jnp.bool_, "i1"),
    torch.complex64: (jnp.complex64, "complex<f32>"),
    torch.complex128: (jnp.complex128, "complex<f64>"),
}
_FROM_JAX = {jnp.dtype(j): t for t, (j, _) in _TABLE.items()}
_FROM_MLIR = {m: t for t, (_, m) in _TABLE.items()}


def to_jax(dtype: torch.dtype):
    try:
        return jnp.dtype(_TABLE[dtype][0])
    except KeyError:
        raise NotImplementedError(f"Unsupported dtype for pallas kernels: {dtype}") from None


def to_mlir(dtype: torch.dtype) -> str:
    try:
        return _TABLE[dtype][1]
    except KeyError:
        raise NotImplementedError(f"Unsupported dtype for pallas kernels: {dtype}") from None


def from_jax(dtype) -> torch.dtype:
    try:
        return _FROM_JAX[jnp.dtype(dtype)]
    except KeyError:
        raise NotImplementedError(f"Unsupported dtype for pallas kernels: {dtype}") from None


def from_mlir(name: str) -> torch.dtype:
    try:
        return _FROM_MLIR[name]
    except KeyError:
        raise NotImplementedError(f"Unsupported element type for pallas kernels: {name}") from None


def is_64bit(dtype: torch.dtype) -> bool:
    return dtype in (torch.float64, torch.int64, torch.uint64, torch.complex128)
