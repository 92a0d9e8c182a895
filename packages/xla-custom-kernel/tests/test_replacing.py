"""A kernel created again: by its own module (a reload, a retried import) it
replaces the old one with a warning; by another module it is an error."""

import importlib
import re
import sys

import jax
import jax.numpy as jnp
import pytest
import xla_custom_kernel as xck
from jax.extend.core import jaxpr_as_fun
from xla_custom_kernel import (
    DuplicateKernelError,
    KernelReplacedWarning,
    ReplacedKernelError,
    XLACustomKernel,
)

MODULE = """
import jax
import xla_custom_kernel as xck
from jax.extend.core import jaxpr_as_fun

op = xck.XLACustomKernel({name!r})
op.def_jax_kernel(lambda outs: lambda x: x * {factor})
op.def_jvp_rule2(lambda t, x, outs: t * {factor})
{tail}
"""


def _write(tmp_path, module, name, factor, tail=""):
    path = tmp_path / f"{module}.py"
    path.write_text(MODULE.format(name=name, factor=factor, tail=tail))
    # A rewritten source of the same size and mtime would be read from the
    # stale bytecode cache.
    importlib.invalidate_caches()
    return path


@pytest.fixture
def module_name(name, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    module = f"ops_{name}"
    yield module
    sys.modules.pop(module, None)


def _replaced(name, module):
    return (
        f"a kernel named {name!r} is already registered by module {module!r}; the new one "
        "replaces it (the module was reloaded or imported again). The old kernel object, and "
        "functions traced with it, raise ReplacedKernelError from now on: use the new one"
    )


def _stale(name, module):
    return (
        f"kernel {name!r} of module {module!r} was replaced by a newer kernel of that name "
        f"(module {module!r} was reloaded or imported again); this object, and functions traced "
        f"with it, no longer run. Use the new kernel (xla_custom_kernel.get_kernel({name!r}), "
        "or the module's attribute) and trace again"
    )


def test_a_reload_replaces_the_kernel_with_a_warning(name, module_name, tmp_path):
    _write(tmp_path, module_name, name, 2.0)
    mod = importlib.import_module(module_name)
    old = mod.op
    assert old.module == module_name
    x = jnp.arange(3.0)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    traced = jax.make_jaxpr(lambda x: old(x, outs=out))(x)
    assert jnp.array_equal(old(x, outs=out), 2 * x)

    (tmp_path / f"{module_name}.py").unlink()
    _write(tmp_path, module_name, name, 3.0, tail="# changed")
    with pytest.warns(KernelReplacedWarning, match=f"^{re.escape(_replaced(name, module_name))}$"):
        importlib.reload(mod)
    new = mod.op
    assert new is not old and xck.get_kernel(name) is new
    assert jnp.array_equal(new(x, outs=out), 3 * x)
    assert jnp.array_equal(jax.grad(lambda x: new(x, outs=out).sum())(x), jnp.full(3, 3.0))

    # The old object, and what was traced with it, fail clearly: never the
    # old kernel's backends or rules.
    stale = f"^{re.escape(_stale(name, module_name))}"
    with pytest.raises(ReplacedKernelError, match=stale + "$"):
        old(x, outs=out)
    # Raised inside JAX's tracing, the message gets JAX's traceback note after it.
    with pytest.raises(ReplacedKernelError, match=stale):
        jax.jit(jaxpr_as_fun(traced))(x)
    with pytest.raises(ReplacedKernelError, match=stale):
        jax.grad(lambda x: jaxpr_as_fun(traced)(x)[0].sum())(x)
    with pytest.raises(ReplacedKernelError, match=stale):
        jax.vmap(jaxpr_as_fun(traced))(jnp.ones((2, 3)))
    assert issubclass(ReplacedKernelError, RuntimeError)
    assert issubclass(KernelReplacedWarning, UserWarning)


def test_a_retried_import_replaces_the_half_imported_kernel(name, module_name, tmp_path):
    flag = tmp_path / "failed_once"
    tail = f"""
import pathlib
flag = pathlib.Path({str(flag)!r})
if not flag.exists():
    flag.touch()
    raise RuntimeError("the first import fails after creating the kernel")
"""
    _write(tmp_path, module_name, name, 2.0, tail=tail)
    with pytest.raises(RuntimeError, match=r"^the first import fails after creating the kernel$"):
        importlib.import_module(module_name)
    with pytest.warns(KernelReplacedWarning, match=f"^{re.escape(_replaced(name, module_name))}$"):
        mod = importlib.import_module(module_name)
    x = jnp.arange(3.0)
    assert jnp.array_equal(mod.op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)), 2 * x)


def test_another_module_cannot_take_the_name(name, module_name, tmp_path):
    _write(tmp_path, module_name, name, 2.0)
    first = importlib.import_module(module_name).op
    message = (
        f"a kernel named {name!r} already exists, created in module {module_name!r}; module "
        f"{__name__!r} cannot create another: kernel names identify primitives and must be "
        "unique in a process. Choose another name, for example prefixed with your package's "
        f"name ({__name__.split('.')[0] + '_' + name!r}), or use "
        f"xla_custom_kernel.get_kernel({name!r}) to reach the existing one"
    )
    with pytest.raises(DuplicateKernelError, match=f"^{re.escape(message)}$"):
        XLACustomKernel(name)
    assert issubclass(DuplicateKernelError, ValueError)
    assert xck.get_kernel(name) is first
    x = jnp.arange(3.0)
    assert jnp.array_equal(first(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)), 2 * x)


class _Subclass(XLACustomKernel):
    def __init__(self, name):
        super().__init__(name, doc="made by a subclass")


def test_the_creating_module_is_the_callers(name):
    # Not this package's, nor a subclass's __init__.
    assert XLACustomKernel(name).module == __name__
    assert _Subclass(name + "_sub").module == __name__
