"""ffi-core's root holds what a user of an operation needs; every other name of the
last release resolves from its new module with a DeprecationWarning naming it."""

from __future__ import annotations

import importlib
import re

import ffi_core
import ffi_core.abi
import ffi_core.bridge
import pytest
from ffi_core._moved import moved_message, renamed_message

# The root's names in the last release (0.1.0), as its api.txt listed them.
LAST_RELEASE = (
    "CALL_SIG_FIELDS HINT_MIN_ELEMENTS PLATFORMS REBUILDER_ENTRY_POINTS SUPPORTED_DTYPES "
    "VMAP_METHODS XLA_PLATFORM_NAMES ArraySig BoundPrimitive BufferView CacheDirWarning "
    "CallFrame CallSig DataType ErrorCode ExecutionStage ExportError FFIError HandlerTraits "
    "KernelCatalog KernelCompileError KernelDTypes MissingKernelError ShapedCall ShardingRule "
    "StepField TargetConflictError Unexportable UnsignedBlobWarning UnsupportedDTypeError "
    "__version__ address_bound_values api_version array_sig batch_call batch_to_front "
    "c_api_header cache_root capi check_aliases check_arity check_dtype check_inputs "
    "check_sharding_rule check_vmap_method checked_cache_dir code_from_dtype create_error "
    "custom_call_targets def_eager_impl deserialize destroy_error dtype_from_code "
    "error_message expand_batch export function_digest handler_address "
    "hint_source is_output_spec leading_batch lower_with_hint normalize_outs output_avals partitioned_call "
    "positional_count python_handler raise_on_differentiation recipe_context record_recipe "
    "register_kernel_acceptor register_rebuilder register_target registered_targets "
    "require_devices_at_lowering resolve_sharding_rule scan_batch serialize shaped_values "
    "target_name"
).split()


def test_the_root_exports_at_most_fifteen_names():
    assert len(ffi_core.__all__) <= 15
    assert {"export", "serialize", "deserialize", "ShardingRule", "__version__"} <= set(
        ffi_core.__all__
    )


def test_every_name_of_the_last_release_is_kept_or_moved():
    assert set(LAST_RELEASE) == set(ffi_core.__all__) | set(ffi_core._MOVED) | set(
        ffi_core._RENAMED
    )
    assert not set(ffi_core.__all__) & set(ffi_core._MOVED)
    assert not (set(ffi_core.__all__) | set(ffi_core._MOVED)) & set(ffi_core._RENAMED)


@pytest.mark.parametrize("name", sorted(ffi_core._MOVED))
def test_a_moved_name_warns_and_is_the_object_at_its_new_place(name):
    new_module = ffi_core._MOVED[name]
    expected = getattr(importlib.import_module(new_module), name)
    with pytest.warns(
        DeprecationWarning, match=re.escape(moved_message("ffi_core", name, new_module))
    ):
        value = getattr(ffi_core, name)
    assert value is expected
    assert name in importlib.import_module(new_module).__all__


def test_the_warning_names_the_new_place():
    with pytest.warns(DeprecationWarning) as caught:
        ffi_core.target_name  # noqa: B018
    assert str(caught[0].message) == (
        "`ffi_core.target_name` has moved: import it from `ffi_core.bridge` "
        "(`from ffi_core.bridge import target_name`); the old name will be removed in the "
        "next minor release"
    )
    assert caught[0].filename == __file__  # the warning points at the caller's line


def test_from_import_of_a_moved_name_warns():
    with pytest.warns(DeprecationWarning, match=re.escape("import it from `ffi_core.abi`")):
        from ffi_core import capi
    assert capi is ffi_core.abi.capi


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(
        AttributeError, match=re.escape("module 'ffi_core' has no attribute 'no_such_name'")
    ):
        ffi_core.no_such_name  # noqa: B018


def test_the_old_native_module_warns_per_name():
    pytest.importorskip("numba")
    import ffi_core.abi.native
    import ffi_core.native

    # The last release's names; those added to ffi_core.abi.native since are only there.
    added = {"HandlerCacheWarning", "Layers", "cache_dispatcher", "cached_cfunc", "cached_njit"}
    added |= {"array_view", "call_c", "handler_module", "load_at", "store_at"}
    added |= {"PORTABLE_CPUS", "handler_name", "portable_cpus"}
    assert sorted(ffi_core.native.__all__) == sorted(set(ffi_core.abi.native.__all__) - added)
    assert not hasattr(ffi_core.native, "call_c")
    assert not hasattr(ffi_core.native, "portable_cpus")
    with pytest.warns(
        DeprecationWarning,
        match=re.escape(moved_message("ffi_core.native", "load", "ffi_core.abi.native")),
    ):
        load = ffi_core.native.load
    assert load is ffi_core.abi.native.load


def test_layers_import_one_way():
    # The ABI layer imports nothing else of ffi-core but the install hint; the
    # export layer only the ABI layer, the registry and the install hint.
    import ast
    import pathlib

    src = pathlib.Path(ffi_core.__file__).parent
    allowed = {"abi": {"abi", "_install"}, "export": {"abi", "export", "_registry", "_install"}}
    for layer, may in allowed.items():
        for path in sorted((src / layer).rglob("*.py")):
            depth = len(path.relative_to(src).parts) - 1  # folders below ffi_core
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level:
                    if node.level > depth:
                        target = (node.module or "").split(".")[0]
                        assert target in may, (
                            f"{path.relative_to(src)}: from {'.' * node.level}{node.module}"
                        )
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "ffi_core"
                ):
                    target = node.module.split(".")[1] if "." in node.module else ""
                    assert target in may, f"{path.relative_to(src)}: from {node.module}"


_RENAMED_IN = ("ffi_core", "ffi_core.bridge", "ffi_core.bridge.cpu", "ffi_core.bridge.cuda")


@pytest.mark.parametrize(
    ("module_name", "name"),
    [
        (module_name, name)
        for module_name in _RENAMED_IN
        for name in sorted(importlib.import_module(module_name)._RENAMED)
    ],
)
def test_a_renamed_name_warns_with_its_new_name_and_is_that_object(module_name, name):
    module = importlib.import_module(module_name)
    new_module, new_name = module._RENAMED[name]
    expected = getattr(importlib.import_module(new_module), new_name)
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(module, name)
    assert value is expected
    assert new_name in importlib.import_module(new_module).__all__
    assert name not in module.__all__
    assert str(caught[0].message) == renamed_message(module_name, name, new_module, new_name)
    assert caught[0].filename == __file__


def test_the_renamed_kit_names():
    renamed = {
        f"{module_name}.{old}": ".".join(importlib.import_module(module_name)._RENAMED[old])
        for module_name in _RENAMED_IN
        for old in importlib.import_module(module_name)._RENAMED
    }
    assert renamed == {
        "ffi_core.PLATFORMS": "ffi_core.bridge.TARGET_PLATFORMS",
        "ffi_core.bridge.PLATFORMS": "ffi_core.bridge.TARGET_PLATFORMS",
        "ffi_core.bridge.cpu.build_handler": "ffi_core.bridge.cpu.build_cpu_handler",
        "ffi_core.bridge.cpu.handler_source": "ffi_core.bridge.cpu.cpu_handler_source",
        "ffi_core.bridge.cuda.build_handler": "ffi_core.bridge.cuda.build_launch_handler",
        "ffi_core.bridge.cuda.handler_source": "ffi_core.bridge.cuda.launch_handler_source",
    }
    assert ffi_core.bridge.TARGET_PLATFORMS == ("cpu", "cuda", "rocm")


def test_the_rename_warning_says_the_new_name():
    with pytest.warns(DeprecationWarning) as caught:
        ffi_core.bridge.PLATFORMS  # noqa: B018
    assert str(caught[0].message) == (
        "`ffi_core.bridge.PLATFORMS` is now `ffi_core.bridge.TARGET_PLATFORMS` "
        "(`from ffi_core.bridge import TARGET_PLATFORMS`); the old name will be removed in "
        "the next minor release"
    )
