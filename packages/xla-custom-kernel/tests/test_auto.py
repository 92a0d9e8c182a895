"""Backend "auto" as xla-custom-kernel sees it: names, defaults, and the
error without kernel-bench (the measuring is tested with kernel-bench)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import xla_custom_kernel as xck


def test_auto_is_a_known_backend_name_and_a_default():
    k = xck.XLACustomKernel("auto_names")
    k.def_jax_kernel(lambda outs: lambda x: 2 * x, platform="cpu")
    with pytest.raises(xck.NoKernelError) as info:
        k.set_default("gpu", "auto")
    assert str(info.value) == (
        "no kernel registered for platform 'gpu' in 'auto_names' to choose from; "
        "registered: cpu: jax"
    )
    pytest.importorskip("kernel_bench")
    k.set_default("cpu", "auto")
    assert (k.get_default("cpu"), k.fixed_default("cpu")) == ("auto", "jax")
    assert k.defaults == {"cpu": "auto"}
    assert k.fixed_default("gpu") is None


_WITHOUT_KERNEL_BENCH = textwrap.dedent(
    """
    import sys
    sys.modules["kernel_bench"] = None  # as if it were not installed
    import jax, jax.numpy as jnp
    import xla_custom_kernel as xck

    k = xck.XLACustomKernel("auto_without_bench")
    k.def_jax_kernel(lambda outs: lambda x: 2 * x)
    attempts = [
        lambda: xck.set_backend("auto"),
        lambda: k.set_default("cpu", "auto"),
        lambda: k(jnp.ones(2), outs=jax.ShapeDtypeStruct((2,), jnp.float32), backend="auto"),
    ]
    for attempt in attempts:
        try:
            attempt()
        except ImportError as exc:
            print(exc)
        else:
            print("no error")
    print(xck.get_backend(), k.get_default("cpu"))
    """
)


def test_auto_without_kernel_bench_says_how_to_install_it():
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_KERNEL_BENCH], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    message = (
        "backend 'auto' measures the registered backends with kernel-bench, which is not "
        'installed; install it with uv add "xla-custom-kernel[bench]" (or pick a backend by name)'
    )
    assert done.stdout.splitlines() == [message, message, message, "None jax"]
