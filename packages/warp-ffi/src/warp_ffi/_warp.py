"""Warp itself: imported once, initialized on first use, and the dtype tables.

The bridge changes none of Warp's settings (``wp.config``): the user's
choices (quiet, cache directory, verbosity) stay theirs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
from ffi_core.bridge import BASIC_DTYPES, install_hint

try:
    import warp as wp
except ImportError as exc:  # pragma: no cover - depends on the environment
    # warp-lang is a dependency of warp-ffi: installing warp-ffi brings it.
    raise ImportError(
        f"warp-ffi needs NVIDIA Warp (the package warp-lang): {install_hint('warp-ffi')}"
    ) from exc

from warp._src import context as wp_context
from warp._src import types as wp_types

__all__ = [
    "HALF_DTYPES",
    "SUPPORTED_DTYPES",
    "compile_for_arch",
    "dtype_name_of",
    "jaxinfo_to_warpinfo",
    "jaxtype_to_warptype",
    "resolve_block_dim",
    "runtime",
    "wp",
    "wp_context",
    "wp_types",
]

#: dtypes a Warp array or scalar parameter can take here, by name: ffi-core's
#: ``BASIC_DTYPES`` and Warp's ``bfloat16``.
SUPPORTED_DTYPES: tuple[str, ...] = (*BASIC_DTYPES, "bfloat16")

#: The 16-bit floats: XLA has no attributes of them, so a scalar of one
#: travels as its bits (uint16).
HALF_DTYPES: tuple[str, ...] = ("float16", "bfloat16")

_WARP_TYPES: dict[str, Any] = {name: getattr(wp, name) for name in SUPPORTED_DTYPES}
_NAMES: dict[Any, str] = {t: name for name, t in _WARP_TYPES.items()}


def _dtype_name(dtype: Any, argument: str) -> str:
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in _WARP_TYPES:
        raise TypeError(
            f"`{argument}` must be one of the dtypes Warp arrays take "
            f"({', '.join(SUPPORTED_DTYPES)}), got {dtype!r}"
        )
    return name


def jaxtype_to_warptype(dtype: Any) -> Any:
    """The Warp scalar type of a JAX/NumPy dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> jaxtype_to_warptype(jnp.float32).__name__
        'float32'
    """
    return _WARP_TYPES[_dtype_name(dtype, "dtype")]


def jaxinfo_to_warpinfo(info: Any) -> Any:
    """The Warp array type (``wp.array(dtype=..., ndim=...)``) of a
    ``jax.ShapeDtypeStruct`` (or anything with ``shape`` and ``dtype``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> t = jaxinfo_to_warpinfo(jax.ShapeDtypeStruct((3, 4), jnp.int32))
        >>> t.dtype.__name__, t.ndim
        ('int32', 2)
    """
    if not (hasattr(info, "shape") and hasattr(info, "dtype")):
        raise TypeError(
            f"`info` must be a jax.ShapeDtypeStruct (shape and dtype), got {type(info)!r}"
        )
    ndim = len(info.shape)
    if not 1 <= ndim <= wp_types.ARRAY_MAX_DIMS:
        raise ValueError(
            f"`info` must have 1 to {wp_types.ARRAY_MAX_DIMS} dimensions (Warp arrays), "
            f"got shape {tuple(info.shape)}"
        )
    return wp.array(dtype=_WARP_TYPES[_dtype_name(info.dtype, "info.dtype")], ndim=ndim)


def dtype_name_of(warp_type: Any) -> str | None:
    """The dtype name of a Warp scalar type, or None for other types."""
    return _NAMES.get(warp_type)


@functools.cache
def runtime() -> Any:
    """Warp's runtime, initialized once (``wp.init()``) and its CPU device."""
    wp.init()
    return wp.get_device("cpu")


def compile_for_arch(module: Any, arch: int, use_ptx: bool | None, block_dim: int) -> Any:
    """Build ``module`` for GPU architecture ``arch`` (``sm_<arch>``) with
    ``block_dim`` threads per block into Warp's kernel cache, or find it
    there; the binary's path.

    What ``wp.compile_aot_module(module, arch=arch)`` does, for one block
    size and without its warning about the module's generic kernels that have
    no overload yet (they are not this kernel's business): the module's build
    for one architecture, the CUDA context current before it put back after.
    """
    runtime()
    # Set by wp.init() (runtime() above); Warp's types declare only its initial None.
    core: Any = wp_context.runtime.core  # type: ignore[attr-defined]
    saved = core.wp_cuda_context_get_current() if wp_context.is_cuda_driver_initialized() else None
    try:
        options = module.resolve_options(wp.config, block_dim)
        module._compile(None, None, output_arch=arch, use_ptx=use_ptx, options=options)
        # Warp's _get_module_artifact_path, for this block size.
        suffix = wp_context._validate_cuda_arch_suffix(
            arch,
            device_arch=arch,
            toolkit_version=wp_context.runtime.toolkit_version,  # type: ignore[attr-defined]
            device_name=None,
        )
        name = module._get_compile_output_name(
            None, arch, arch_suffix=suffix, use_ptx=use_ptx, block_dim=block_dim
        )
        folder = module.get_module_identifier(block_dim=block_dim)
        # Set by wp.init() (runtime() above).
        return Path(str(wp.config.kernel_cache_dir)) / folder / name
    finally:
        if saved is not None:
            core.wp_cuda_context_set_current(saved)


def resolve_block_dim(block_dim: int | None, *, cpu: bool, module_default: int) -> int:
    """The threads per block of a launch, as Warp resolves them: on the CPU 1
    unless ``wp.config.enable_cpu_blocks`` is set (then ``block_dim``, at most
    1024); on a GPU ``block_dim``, or the module's (256 by default)."""
    if not cpu:
        return module_default if block_dim is None else block_dim
    return int(wp_context._resolve_launch_block_dim(runtime(), block_dim))
