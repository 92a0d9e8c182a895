"""Names and modules that moved, kept working at their old place for one
release, each access warning with a DeprecationWarning naming the new place.

- :data:`MOVED` and :data:`RENAMED`: ffi-core's one table of each, keyed by
  the module that held the names: what moved to another module, and what has
  a new name.
- :func:`moved_getattr`: the ``__getattr__`` of such a module, serving its
  names from those tables (a module says ``__getattr__ = moved_getattr(__name__)``);
  it answers ``_MOVED`` and ``_RENAMED`` with the module's tables, which
  tools/api_snapshot.py lists, marked deprecated.
- :func:`moved_module`: what a shim left at a moved module's old path
  defines, from :data:`MOVED_MODULES` (old path -> the new module and the
  names added to it since the move) and the new module's :data:`RENAMED`
  entry (the names renamed since): ``__moved_to__``
  (the new module), ``_NAMES`` (old name -> new name), ``__all__``, and a
  ``__getattr__`` (made by :func:`forward`) and ``__dir__`` serving those names.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: The names of the last release that live elsewhere now, per module: the
#: module -> {the module that holds them now: their names, space-separated}.
MOVED: dict[str, dict[str, str]] = {
    "ffi_core": {
        "ffi_core.abi": (
            "SUPPORTED_DTYPES BufferView CallFrame DataType ErrorCode ExecutionStage FFIError "
            "HandlerTraits api_version c_api_header capi code_from_dtype create_error "
            "destroy_error dtype_from_code error_message python_handler"
        ),
        "ffi_core.bridge": (
            "HINT_MIN_ELEMENTS VMAP_METHODS XLA_PLATFORM_NAMES ArraySig BoundPrimitive "
            "CallSig KernelDTypes ShapedCall address_bound_values array_sig batch_call "
            "batch_to_front check_aliases check_arity check_dtype check_inputs "
            "check_sharding_rule check_vmap_method def_eager_impl expand_batch "
            "function_digest handler_address hint_source is_output_spec leading_batch "
            "lower_with_hint normalize_outs output_avals partitioned_call positional_count "
            "raise_on_differentiation register_target registered_targets "
            "require_devices_at_lowering resolve_sharding_rule scan_batch shaped_values "
            "target_name"
        ),
        "ffi_core.export": (
            "CALL_SIG_FIELDS REBUILDER_ENTRY_POINTS KernelCatalog StepField Unexportable "
            "custom_call_targets recipe_context record_recipe register_kernel_acceptor "
            "register_rebuilder"
        ),
    },
}

#: The names of the last release that have a new name, per module: old name ->
#: the new name in the same module, or ``module.name`` where it moved too.
RENAMED: dict[str, dict[str, str]] = {
    "ffi_core": {"PLATFORMS": "ffi_core.bridge.TARGET_PLATFORMS"},
    "ffi_core.bridge": {"PLATFORMS": "TARGET_PLATFORMS"},
    "ffi_core.bridge.cpu": {
        "build_handler": "build_cpu_handler",
        "handler_source": "cpu_handler_source",
    },
    "ffi_core.bridge.cuda": {
        "build_handler": "build_launch_handler",
        "handler_source": "launch_handler_source",
    },
}

#: The modules that moved: old path -> (the new module, the names added to
#: it since). The old path forwards every other name of the new module's
#: ``__all__``, the names it had, and each name the new module renamed since
#: (its entry of ``RENAMED``) under its old name.
MOVED_MODULES: dict[str, tuple[str, frozenset[str]]] = {
    "ffi_core.cpu": (
        "ffi_core.bridge.cpu",
        frozenset({"cpu_call_bind", "cpu_threaded_loop_source"}),
    ),
    "ffi_core.cuda": (
        "ffi_core.bridge.cuda",
        frozenset(
            {
                "MAX_BLOCK",
                "MAX_GRID",
                "MAX_SHARED_MEM",
                "MAX_THREADS_PER_BLOCK",
                "STATIC_SHARED_MEM",
                "cuda_launch_bind",
                "cuda_launch_cpu_lowering",
                "cuda_launch_lowering",
            }
        ),
    ),
    "ffi_core.cuda.testing": ("ffi_core.bridge.cuda.testing", frozenset()),
}


def moved_message(module: str, name: str, new_module: str) -> str:
    """The warning an old name gives.

    >>> moved_message("ffi_core", "target_name", "ffi_core.bridge")
    '`ffi_core.target_name` has moved: import it from `ffi_core.bridge` (`from ffi_core.bridge import target_name`); the old name will be removed in the next minor release'
    """
    return (
        f"`{module}.{name}` has moved: import it from `{new_module}` "
        f"(`from {new_module} import {name}`); the old name will be removed in the next "
        "minor release"
    )


def renamed_message(module: str, name: str, new_module: str, new_name: str) -> str:
    """The warning a renamed name gives.

    >>> renamed_message("ffi_core.bridge", "PLATFORMS", "ffi_core.bridge", "TARGET_PLATFORMS")
    '`ffi_core.bridge.PLATFORMS` is now `ffi_core.bridge.TARGET_PLATFORMS` (`from ffi_core.bridge import TARGET_PLATFORMS`); the old name will be removed in the next minor release'
    """
    return (
        f"`{module}.{name}` is now `{new_module}.{new_name}` "
        f"(`from {new_module} import {new_name}`); the old name will be removed in the next "
        "minor release"
    )


def moved_names(module: str) -> dict[str, str]:
    """``module``'s names in :data:`MOVED`: old name -> the module that holds it now."""
    return {name: new for new, names in MOVED.get(module, {}).items() for name in names.split()}


def renamed_names(module: str) -> dict[str, tuple[str, str]]:
    """``module``'s names in :data:`RENAMED`: old name -> (module, new name).

    >>> renamed_names("ffi_core.bridge.cpu")["build_handler"]
    ('ffi_core.bridge.cpu', 'build_cpu_handler')
    """
    places = {old: new.rpartition(".") for old, new in RENAMED.get(module, {}).items()}
    return {old: (new_module or module, new) for old, (new_module, _, new) in places.items()}


def moved_getattr(module: str, moved: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module``: its names of :data:`RENAMED` and of
    :data:`MOVED` (or of ``moved``: old name -> the module that holds it now)
    come from their new place with a DeprecationWarning; ``_MOVED`` and
    ``_RENAMED`` are those two tables (old name -> module, old name ->
    (module, new name))."""
    table = moved_names(module) if moved is None else dict(moved)
    renamed = renamed_names(module)

    def __getattr__(name: str) -> Any:
        if name == "_MOVED":
            return dict(table)
        if name == "_RENAMED":
            return dict(renamed)
        if name in renamed:
            renamed_module, new_name = renamed[name]
            warnings.warn(
                renamed_message(module, name, renamed_module, new_name),
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(renamed_module), new_name)
        new_module = table.get(name)
        if new_module is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(moved_message(module, name, new_module), DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), name)

    return __getattr__


def forward(old: str, new: str, names: Iterable[str] | Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the shim at ``old``: each of ``names`` (or
    each key of a mapping of old name to new name) warns and comes from
    ``new``; any other name raises AttributeError."""
    renamed = dict(names) if isinstance(names, Mapping) else {name: name for name in names}

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        target = renamed[name]
        warnings.warn(
            f"{old}.{name} moved to {new}.{target}; import it from there "
            f"({old} goes away in the next minor release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), target)

    return __getattr__


def moved_module(
    old: str,
) -> tuple[str, dict[str, str], list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """What the shim at ``old`` (a key of ``MOVED_MODULES``) defines:
    ``__moved_to__, _NAMES, __all__, __getattr__, __dir__``.

    Example:
        >>> new, names, all_, getattr_, dir_ = moved_module("ffi_core.cpu")
        >>> new, names["cpu_call"], "cpu_call" in all_
        ('ffi_core.bridge.cpu', 'cpu_call', True)
    """
    new, added = MOVED_MODULES[old]
    module = importlib.import_module(new)
    renames = {name: to for name, (_, to) in renamed_names(new).items()}
    kept = {*added, *renames.values()}
    renamed = {name: name for name in module.__all__ if name not in kept}
    renamed.update(renames)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[old]), *renamed})

    return new, renamed, sorted(renamed), forward(old, new, renamed), __dir__
