"""warp-ffi's CPU handlers: one per layout, holding no address of the process,
cached on disk: a later process loads them instead of compiling, kernels of
one layout share one, and an empty ``$WARP_FFI_HANDLER_CACHE_DIR`` keeps
nothing on disk."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import warp as wp
from warp_ffi import _codegen, warp_kernel

# Two kernels of one layout (three float32 arrays), and a process that calls
# each once and prints how many handlers it compiled and loaded.
_KERNELS = textwrap.dedent(
    """
    import warp as wp

    @wp.kernel
    def scale_add(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
                  out: wp.array(dtype=wp.float32)):
        i = wp.tid()
        out[i] = 2.0 * x[i] + y[i]

    @wp.kernel
    def sub(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
            out: wp.array(dtype=wp.float32)):
        i = wp.tid()
        out[i] = x[i] - y[i]
    """
)

_USER = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np, warp as wp
    wp.config.log_level = wp.LOG_WARNING
    from warp_ffi import _codegen, warp_kernel
    import handler_cache_kernels as k

    x = jnp.arange(8, dtype=jnp.float32)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    np.testing.assert_allclose(jax.jit(warp_kernel(k.scale_add, out))(x, x), 3 * x)
    np.testing.assert_allclose(jax.jit(warp_kernel(k.sub, out))(x, 2 * x), -x)
    handlers = list(_codegen._shared.values())
    print(len(handlers), sum(h._cache_hits for h in handlers))
    """
)


def _run(folder: Path, cache: str) -> tuple[int, int]:
    (folder / "handler_cache_kernels.py").write_text(_KERNELS)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
        "WARP_CACHE_PATH": str(folder / "warp-cache"),
        "WARP_FFI_HANDLER_CACHE_DIR": cache,
        "XDG_CACHE_HOME": str(folder / "xdg"),
        # The CPU handlers are what this counts: on a GPU machine JAX's default
        # backend would run Warp's CUDA build instead.
        "JAX_PLATFORMS": "cpu",
    }
    result = subprocess.run(
        [sys.executable, "-c", _USER],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    handlers, hits = result.stdout.split()
    return int(handlers), int(hits)


def test_a_later_process_loads_the_handler_that_kernels_of_one_layout_share(tmp_path):
    cache = tmp_path / "handlers"
    # Two kernels, one layout: one handler, compiled (nothing to load yet).
    assert _run(tmp_path, str(cache)) == (1, 0)
    assert any(p.suffix == ".nbi" for p in cache.iterdir())
    # A later process loads it from the disk and computes the same results.
    assert _run(tmp_path, str(cache)) == (1, 1)


def test_an_empty_variable_keeps_no_handler_on_disk(tmp_path):
    assert _run(tmp_path, "") == (1, 0)
    assert not (tmp_path / "xdg").exists() or not any((tmp_path / "xdg").rglob("*.nbi"))


@wp.kernel
def _scale(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = 2.0 * x[i]


def test_the_handler_holds_no_address_nor_the_kernel_s_name(monkeypatch):
    sources = []
    original = _codegen.cpu_handler_source

    def recorded(spec, body):
        sources.append(original(spec, body))
        return sources[-1]

    monkeypatch.setattr(_codegen, "cpu_handler_source", recorded)
    x = jnp.arange(4, dtype=jnp.float32)
    op = warp_kernel(_scale, jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_allclose(jax.jit(op)(x), 2 * x)
    (source,) = sources
    # The entry point is read from the record; the name too (errors start with it).
    addresses = [str(v.forward) for v in _codegen._loaded.values()]
    assert addresses and not any(a in source for a in addresses)
    assert "_scale" not in source
    assert "call_void_fn(word_0, (bounds, args))" in source
