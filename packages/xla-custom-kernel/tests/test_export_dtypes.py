"""An operation's recipe step names each output dtype so that it reads back, and
the step passes the checks ``ffi_core.deserialize`` makes before rebuilding."""

import jax
import jax.numpy as jnp
import pytest
from ffi_core.export._recipe import check_step
from xla_custom_kernel import _export
from xla_custom_kernel._entry import KernelEntry


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32, jnp.int8, jnp.bool_])
def test_recipe_step_outs_read_back(dtype):
    entry = KernelEntry.__new__(KernelEntry)
    object.__setattr__(entry, "platform", "cpu")
    object.__setattr__(entry, "backend", "numba")
    step = _export.recipe_step("op", entry, [jax.ShapeDtypeStruct((2, 3), dtype)], False, ())
    check_step(step, _export._FIELDS, "step")  # raises ExportError when refused
    ((shape, name),) = step["outs"]
    assert (shape, jnp.dtype(name)) == ([2, 3], jnp.dtype(dtype))
