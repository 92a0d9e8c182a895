"""``check_kernel``: every check that applies to an operation, in one call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import jax.numpy as jnp
from ffi_core.bridge import bounds_checking, check_sharding_rule

from ._aliases import check_aliases
from ._autodiff import check_autodiff
from ._bad_inputs import check_bad_inputs
from ._case import Case, describe_error, is_inexact, param_names
from ._compare import TOLERANCES
from ._compile import check_compile
from ._export import check_export
from ._report import CheckReport, CheckResult, failed, skipped
from ._results import check_backends, check_results, check_threads
from ._sanitize import check_sanitize
from ._sharding import check_sharding
from ._vmap import check_vmap

__all__ = ["CHECKS", "Options", "check_kernel"]


@dataclasses.dataclass(frozen=True)
class Options:
    """The options of one ``check_kernel`` call (see there)."""

    tolerances: Mapping[str, tuple[float, float]] | None
    vmap_methods: Sequence[str | None] | None
    other_args: Sequence[Any] | None
    batch_size: int
    threads: int
    signature_of: Callable[..., Any]
    export_imports: Sequence[str] | None = None
    aliases: Mapping[int, int] | None = None
    sharding_rule: Any = None
    sanitize: bool = False
    kwargs: Mapping[str, Any] | None = None
    other_kwargs: Mapping[str, Any] | None = None
    differentiable: tuple[int, ...] | None = None


#: The check families, in the order they run: name -> the function running it.
CHECKS: dict[str, Callable[[Case], list[CheckResult]]] = {
    "results": check_results,
    "backends": check_backends,
    "vmap": check_vmap,
    "autodiff": check_autodiff,
    "compile": check_compile,
    "export": check_export,
    "sharding": check_sharding,
    "aliases": check_aliases,
    "threads": check_threads,
    "bad_inputs": check_bad_inputs,
    "sanitize": check_sanitize,
}


def _bind(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Callable[..., Any]:
    def bound(*inputs: Any) -> Any:
        return fn(*inputs, **kwargs)

    return bound


def _check_names(names: Collection[str] | None, what: str) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, str):
        raise TypeError(f"`{what}` must be a collection of check names, got the str {names!r}")
    if not isinstance(names, Collection) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"`{what}` must be a collection of check names (str), got {names!r}")
    unknown = [n for n in names if n.split(":", 1)[0] not in CHECKS]
    if unknown:
        raise ValueError(
            f"`{what}` names unknown checks {unknown}; the checks are {', '.join(CHECKS)} "
            "(or one row of a check, as the report names it: 'bad_inputs: dtype')"
        )
    return tuple(names)


def _sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _differentiable(value: Any, op: Callable[..., Any], args: Sequence[Any]) -> tuple[int, ...]:
    # Positions of the inputs named by position or by the op's parameter name.
    accepted = "a collection of input positions (int) or the op's parameter names (str)"
    if isinstance(value, str | bytes) or not isinstance(value, Collection):
        raise TypeError(f"`differentiable` must be {accepted}, got {value!r}")
    names = param_names(op)
    found = []
    for item in value:
        if isinstance(item, str):
            if item not in names:
                known = ", ".join(names) or "none (its signature names no positional parameter)"
                raise ValueError(
                    f"`differentiable` names {item!r}, which is not a parameter of the op; "
                    f"its positional parameters: {known}"
                )
            index = names.index(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            index = item
        else:
            raise TypeError(f"`differentiable` must be {accepted}, got {value!r}")
        if not 0 <= index < len(args):
            raise ValueError(
                f"`differentiable` names input {index}, but the op is given {len(args)} "
                f"inputs (0 to {len(args) - 1})"
            )
        x = jnp.asarray(args[index])
        if not is_inexact(x):
            which = f"input {index}" + (f" (`{names[index]}`)" if index < len(names) else "")
            raise ValueError(
                f"`differentiable` names {which}, of dtype {x.dtype}; only "
                "floating-point and complex inputs are differentiated"
            )
        found.append(index)
    return tuple(sorted(set(found)))


def _dtype_name(name: str) -> bool:
    try:
        return bool(jnp.dtype(name).name == name)
    except TypeError:
        return False


def _check_options(
    args, tolerances, vmap_methods, other_args, aliases, export_imports, variants, skip
) -> None:
    if tolerances is not None:
        if not isinstance(tolerances, Mapping):
            raise TypeError(
                "`tolerances` must be a mapping {dtype name: (rtol, atol)} or None, "
                f"got {type(tolerances)!r}"
            )
        for name, pair in tolerances.items():
            if not (
                isinstance(name, str)
                and _sequence(pair)
                and len(pair) == 2
                and all(isinstance(t, int | float) and t >= 0 for t in pair)
            ):
                raise ValueError(
                    "`tolerances` must map dtype names to (rtol, atol), two numbers >= 0, "
                    f"got {name!r}: {pair!r}"
                )
            if not _dtype_name(name):
                raise ValueError(
                    f"`tolerances` names {name!r}, which is not a dtype's name; "
                    f"dtype names such as {', '.join(map(repr, TOLERANCES))}"
                )
    if vmap_methods is not None and (
        not _sequence(vmap_methods)
        or not all(m is None or isinstance(m, str) for m in vmap_methods)
    ):
        raise TypeError(f"`vmap_methods` must be a sequence of str or None, got {vmap_methods!r}")
    if other_args is not None and not _sequence(other_args):
        raise TypeError(f"`other_args` must be a sequence of arrays, got {type(other_args)!r}")
    if other_args is not None and len(other_args) != len(args):
        raise ValueError(
            f"`other_args` must hold as many arrays as the op is given inputs ({len(args)}), "
            f"got {len(other_args)}"
        )
    if aliases is not None and not (
        isinstance(aliases, Mapping)
        and all(isinstance(k, int) and isinstance(v, int) for k, v in aliases.items())
    ):
        raise TypeError(f"`aliases` must be a mapping {{input: output}} of ints, got {aliases!r}")
    for i, j in (aliases or {}).items():
        if not 0 <= i < len(args) or j < 0:
            raise ValueError(
                f"`aliases` maps input {i} to output {j}: inputs are 0 to {len(args) - 1} "
                "and outputs are counted from 0"
            )
    if variants is not None and not (
        isinstance(variants, Mapping)
        and all(isinstance(k, str) and callable(v) for k, v in variants.items())
    ):
        raise TypeError(
            f"`variants` must be a mapping {{name (str): callable}} or None, got {variants!r}"
        )
    if isinstance(skip, Mapping) and not all(isinstance(v, str) for v in skip.values()):
        raise TypeError(
            f"`skip` given as a mapping must map check names to reasons (str), got {skip!r}"
        )
    if export_imports is not None and not (
        _sequence(export_imports) and all(isinstance(m, str) for m in export_imports)
    ):
        raise TypeError(
            f"`export_imports` must be a sequence of module names (str), got {export_imports!r}"
        )


def check_kernel(
    op: Callable[..., Any],
    *args: Any,
    kwargs: Mapping[str, Any] | None = None,
    reference: Callable[..., Any] | None = None,
    variants: Mapping[str, Callable[..., Any]] | None = None,
    checks: Collection[str] | None = None,
    skip: Collection[str] | Mapping[str, str] = (),
    tolerances: Mapping[str, tuple[float, float]] | None = None,
    vmap_methods: Sequence[str | None] | None = None,
    other_args: Sequence[Any] | None = None,
    other_kwargs: Mapping[str, Any] | None = None,
    differentiable: Collection[int | str] | None = None,
    aliases: Mapping[int, int] | None = None,
    sharding_rule: Any = None,
    export_imports: Sequence[str] | None = None,
    batch_size: int = 3,
    threads: int = 8,
    sanitize: bool = False,
    name: str | None = None,
    raises: bool = True,
) -> CheckReport:
    """Check an operation under every JAX transform that applies to it.

    Runs, on the sample inputs ``args``: eager vs ``jit`` vs ``reference``
    and a repeated call (``results``); every other implementation in
    ``variants`` against the op (``backends``); ``jax.vmap`` against a loop
    over the batch, with the batch axis first and last, batched and unbatched
    inputs mixed, nested, and for each ``vmap_method`` (``vmap``); the JVP
    against finite differences, the transpose against the JVP, ``jax.grad``
    and second order (``autodiff``, skipped for an op without rules);
    compilation and FFI registration counts (``compile``); ``export`` ->
    ``serialize``, then ``deserialize`` and a call in a fresh process
    (``export``); a sharded ``jit`` and ``shard_map`` over the CPU devices
    against the unsharded op, where a sharding rule is given (``sharding``);
    inputs left untouched, and aliased outputs reusing donated
    buffers (``aliases``); 8 threads calling the jitted op at once
    (``threads``); another dtype (refused, or right results), a wrong rank and
    number of inputs (``bad_inputs``); with ``sanitize``, the op's GPU kernels
    under ``compute-sanitizer``'s memcheck in a child process, a failed row per
    kernel that reads or writes out of bounds or misaligned (``sanitize``).

    Args:
        op: the operation: a bridge's function (``numba_kernel(...)``), or any
            function calling such operations.
        *args: sample inputs; small ones keep the checks fast. Floating-point
            inputs are varied (scaled, shifted) to make batch rows and thread
            inputs differ; integer and bool inputs are kept as they are.
        kwargs: keywords passed to ``op`` on every call (``outs``, static
            keywords).
        reference: a function of the inputs alone giving the right results.
        variants: other implementations of the op that must give its results
            (its backends), by name; each is called as ``op`` is, with ``kwargs``.
        checks: the check families to run (default: all of :data:`CHECKS`), or
            single rows of the report (``"vmap: batch axis 0"``).
        skip: check families or rows of the report not to run, reported as
            skipped; a mapping ``{name: why}`` gives the report the reasons.
        tolerances: ``{dtype name: (rtol, atol)}`` replacing entries of
            :data:`TOLERANCES`.
        vmap_methods: the ``vmap_method``s to check the op's bridge calls
            under (default: None and ``"sequential"``, right for every
            kernel; add ``"expand_dims"``/``"broadcast_all"`` for kernels that
            handle the batch axis).
        other_args: the inputs in other sizes (same dtypes and ranks), to check
            that new shapes register no new FFI target.
        other_kwargs: the keywords of the call on ``other_args`` (default:
            ``kwargs``): the ``outs`` and static keywords that follow the new
            sizes (``{"shape": (7, 11)}``).
        differentiable: the inputs the op is differentiable in, by position or
            by the op's parameter name (``(3,)``, ``("v",)``); the ``autodiff``
            rows differentiate these alone, the other inputs held constant.
            Default: every floating-point input.
        aliases: ``{input: output}`` that share a buffer (default: those the
            op's bridge calls declare with ``input_output_aliases``).
        sharding_rule: the op's sharding rule (an ``ffi_core.ShardingRule`` or
            its string), to check it under a sharded ``jit`` and ``shard_map``
            over the host's CPU devices; None: the sharding check is skipped.
        export_imports: the modules a fresh process imports before it
            deserializes the exported op: those defining its kernels (default:
            the op's module).
        batch_size: rows of the batches ``vmap`` is checked on.
        threads: threads calling the op at once.
        sanitize: run the ``sanitize`` check: the op, imported in a child
            process as the export check imports it, called under NVIDIA's
            ``compute-sanitizer --tool memcheck`` (found on ``PATH`` or in
            ``$CUDA_HOME/bin``, else ``$CUDA_PATH/bin``); skipped, saying why, without a GPU or the tool.
        name: the op's name in the report (default: its ``__name__``).
        raises: raise an AssertionError listing every failed check (the
            default, for tests); False returns the report whatever failed.

    Returns:
        The :class:`CheckReport` (``print`` it for the table).

    Raises:
        AssertionError: with ``raises``, when a check failed.
        TypeError, ValueError: an argument of the wrong type or value (each
            message names the argument and what it accepts).

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> x = jnp.arange(4.0)
        >>> # jnp.cumsum takes any dtype and rank, so the bad-input rows are left out.
        >>> report = check_kernel(jnp.cumsum, x, reference=np.cumsum, skip=["bad_inputs"])
        >>> report.ok, [row.check for row in report.results][:3]
        (True, ['results: eager vs jit', 'results: repeated call', 'results: reference'])
    """
    if not callable(op):
        raise TypeError(f"`op` must be callable, got {type(op)!r}")
    if reference is not None and not callable(reference):
        raise TypeError(f"`reference` must be callable or None, got {type(reference)!r}")
    for what, given in (("kwargs", kwargs), ("other_kwargs", other_kwargs)):
        if given is not None and not isinstance(given, Mapping):
            raise TypeError(f"`{what}` must be a mapping or None, got {type(given)!r}")
    for what, flag in (("sanitize", sanitize), ("raises", raises)):
        if not isinstance(flag, bool):
            raise TypeError(f"`{what}` must be a bool, got {type(flag)!r}")
    for what, value, least in (("batch_size", batch_size, 2), ("threads", threads, 1)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"`{what}` must be an int, got {type(value)!r}")
        if value < least:
            raise ValueError(f"`{what}` must be at least {least}, got {value}")
    _check_options(
        args, tolerances, vmap_methods, other_args, aliases, export_imports, variants, skip
    )
    if sharding_rule is not None:
        check_sharding_rule(sharding_rule)
    if differentiable is not None:
        differentiable = _differentiable(differentiable, op, args)
    selected = _check_names(checks, "checks") or tuple(CHECKS)
    reasons = dict(skip) if isinstance(skip, Mapping) else {}
    excluded = {
        name: reasons.get(name) or "left out by `skip`" for name in _check_names(skip, "skip")
    }
    bound = dict(kwargs or {})

    case = Case(
        name=name or getattr(op, "__name__", None) or getattr(op, "name", None) or repr(op),
        fn=_bind(op, bound),
        args=tuple(args),
        reference=reference,
        variants={k: _bind(v, bound) for k, v in (variants or {}).items()},
        options=Options(
            tolerances=tolerances,
            vmap_methods=None if vmap_methods is None else tuple(vmap_methods),
            other_args=None if other_args is None else tuple(other_args),
            batch_size=batch_size,
            threads=threads,
            signature_of=op,
            export_imports=None if export_imports is None else tuple(export_imports),
            aliases=aliases,
            sharding_rule=sharding_rule,
            sanitize=sanitize,
            kwargs=bound,
            other_kwargs=None if other_kwargs is None else dict(other_kwargs),
            differentiable=differentiable,
        ),
        families=frozenset(c for c in selected if c in CHECKS),
        rows=frozenset(c for c in selected if c not in CHECKS),
        excluded=excluded,
    )
    # Every kernel the checks bind is compiled with bounds checks, where its
    # bridge can: an index out of range fails a row instead of corrupting memory.
    with bounds_checking():
        rows, ran = _run_checks(case, {c.split(":", 1)[0] for c in selected}, excluded)
    found = {row.check for row in rows}
    missing = sorted(r for r in case.rows if r not in found and r.split(":", 1)[0] not in excluded)
    if ran and missing:
        raise ValueError(
            f"`checks` names rows {missing}, which no check reported for this op; a row is "
            "named as the report names it ('bad_inputs: dtype'): run its check to see them"
        )
    report = CheckReport(case.name, tuple(rows))
    if raises:
        report.raise_for_failures()
    return report


def _run_checks(
    case: Case, wanted: set[str], excluded: Mapping[str, str]
) -> tuple[list[CheckResult], bool]:
    # The rows, and whether the checks ran (not when the op itself raised).
    try:
        _ = case.expected
    except Exception as exc:
        return [failed("results: eager", f"the op raised {describe_error(exc)}")], False
    rows: list[CheckResult] = []
    for family, run in CHECKS.items():
        if family not in wanted:
            continue
        if family in excluded:
            rows.append(skipped(family, excluded[family]))
            continue
        try:
            new = run(case)
        except Exception as exc:  # a check that raises fails; the others still run
            new = [failed(family, f"raised {describe_error(exc)}")]
        rows.extend(new)
    return rows, True
