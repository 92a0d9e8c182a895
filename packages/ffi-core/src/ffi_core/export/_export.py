"""``jax.export`` round trips for functions that call this project's kernels.

An exported function names its kernels only by FFI target; a process that
deserializes it must register the same handlers before the first call. Every
bridge therefore gives each target a *recipe* when it registers it: a small
JSON description of how to make the handler again (the kernel's digest and the
dtype/rank signature), preceded by the steps of any library that produced the
kernel (``xla-custom-kernel`` re-runs the kernel generator with the recorded
outputs and static keywords). :func:`serialize` stores the recipes of the
targets a function calls beside JAX's bytes; :func:`deserialize` runs them in
the new process, which finds each kernel by digest among the kernels it has
imported (or was given), and raises :class:`MissingKernelError` naming the
kernel when one is absent.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import jax

from ._blob import MAGIC, check_key, pack
from ._kernel_catalog import KernelCatalog as KernelCatalog
from ._rebuilders import distribution_of, register_rebuilder
from ._recipe import (
    ExportError,
    MissingKernelError,
    StepField,
    Unexportable,
    from_json,
    to_json,
)

__all__ = [
    "MAGIC",
    "ExportError",
    "KernelCatalog",
    "MissingKernelError",
    "StepField",
    "Unexportable",
    "accept_kernel",
    "custom_call_targets",
    "export",
    "from_json",
    "kernels_accepted",
    "recipe_context",
    "record_recipe",
    "register_kernel_acceptor",
    "register_rebuilder",
    "serialize",
    "to_json",
]

_lock = threading.Lock()
_steps: contextvars.ContextVar[tuple[str | Unexportable, ...]] = contextvars.ContextVar(
    "ffi_core_export_steps", default=()
)
# target name -> the chains of steps seen to produce it, each step JSON text
_recipes: dict[str, dict[tuple[str | Unexportable, ...], None]] = {}
# (accept, what it accepts in words or None), in the order they were registered
_acceptors: list[tuple[Callable[[object], bool], str | None]] = []


# -- recording ----------------------------------------------------------------------


def _encode(step: Mapping[str, Any] | Unexportable) -> str | Unexportable:
    if isinstance(step, Unexportable):
        return step
    if not isinstance(step.get("kind"), str):
        raise ValueError(f"a recipe step needs a str 'kind', got {dict(step)!r}")
    try:
        return json.dumps({k: to_json(v) for k, v in step.items()}, sort_keys=True)
    except TypeError as exc:
        return Unexportable(f"{step['kind']} step holds a {exc} that JSON cannot keep")


@contextlib.contextmanager
def recipe_context(step: Mapping[str, Any] | Unexportable) -> Iterator[None]:
    """Within this block, recipes recorded with :func:`record_recipe` start
    with ``step``: a library that makes kernels (``xla-custom-kernel`` running
    a generator) says how to make them again.

    ``step`` is a dict with a str ``"kind"`` naming a rebuilder (see
    :func:`register_rebuilder`); values are what :func:`to_json` keeps. (A
    ``"module"`` field is kept but never read: the kind alone picks the
    rebuilder.) A step holding anything else is kept as
    unexportable, and a recipe is then written from the steps after it.
    """
    token = _steps.set((*_steps.get(), _encode(step)))
    try:
        yield
    finally:
        _steps.reset(token)


def record_recipe(target: str, step: Mapping[str, Any] | Unexportable) -> None:
    """Note how ``target`` is made: ``step`` (the bridge's own, e.g. kernel
    digest and signature) after the steps of the enclosing
    :func:`recipe_context` blocks. Called by a bridge at every lowering."""
    chain = (*_steps.get(), _encode(step))
    with _lock:
        _recipes.setdefault(target, {})[chain] = None


def register_kernel_acceptor(accept: Callable[[object], bool], *, what: str | None = None) -> None:
    """``accept(obj)`` makes ``obj`` known to a bridge (a kernel passed in
    :func:`deserialize`'s ``kernels``) and returns True, or returns False when
    the object is not the bridge's.

    Args:
        accept: the bridge's test and registration of one object.
        what: the objects it accepts, in words (``"the @numba.njit
            function"``), which ``deserialize``'s messages list for a
            ``kernels`` entry no bridge accepts; None: not listed.

    Raises:
        TypeError: ``accept`` is not callable, or ``what`` not None or a
            non-empty str.
    """
    if not callable(accept):
        raise TypeError(f"`accept` must be callable, got {type(accept)!r}")
    if what is not None and not (isinstance(what, str) and what):
        raise TypeError(f"`what` must be None or a non-empty str, got {what!r}")
    with _lock:
        _acceptors.append((accept, what))


def accept_kernel(obj: object) -> bool:
    """Make ``obj`` known to the bridge whose kernel it is; False when no
    registered acceptor takes it."""
    with _lock:
        acceptors = [accept for accept, _ in _acceptors]
    return any(accept(obj) for accept in acceptors)


def kernels_accepted() -> str:
    """What ``deserialize``'s ``kernels`` may hold, in words: the objects the
    registered acceptors say they accept, or only the advice to import the
    kernel's bridge where none says."""
    with _lock:
        said = list(dict.fromkeys(what for _, what in _acceptors if what is not None))
    if not said:
        return "import the bridge of the kernel first"
    return (
        f"each one an imported bridge takes: {', '.join(said)}; import the bridge of any "
        "other kernel first"
    )


# -- export -------------------------------------------------------------------------

# MLIR prints a symbol that is not an identifier quoted, with \XX escapes:
# @"numba_cpu.dobl\C3\A9_0123".
_TARGET = re.compile(r'custom_call @(?:([\w.$-]+)|"((?:[^"\\]|\\.)*)")\(')
_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}


def _unquote(text: str) -> str:
    out = bytearray()
    at = 0
    for match in _ESCAPE.finditer(text):
        out += text[at : match.start()].encode()
        code = match.group(1)
        out += (
            bytes([int(code, 16)]) if len(code) == 2 else _SIMPLE_ESCAPES.get(code, code).encode()
        )
        at = match.end()
    out += text[at:].encode()
    return out.decode("utf-8", "surrogateescape")


def custom_call_targets(exported: jax.export.Exported | str) -> list[str]:
    """The custom-call targets a function calls, sorted: of an
    ``Exported`` or of lowered text (``jax.jit(f).lower(x).as_text()``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> custom_call_targets(jax.export.export(jax.jit(jnp.sin))(1.0))
        []
    """
    if isinstance(exported, str):
        text = exported
    elif isinstance(exported, jax.export.Exported):
        text = exported.mlir_module()
    else:
        raise TypeError(
            "`exported` must be a jax.export.Exported or lowered text (str), "
            f"got {type(exported)!r}"
        )
    return sorted({plain or _unquote(quoted) for plain, quoted in _TARGET.findall(text)})


def _known(targets: Iterable[str]) -> list[str]:
    with _lock:
        return [t for t in targets if t in _recipes]


def export(
    fun: Callable[..., Any],
    *,
    platforms: Iterable[str] | None = None,
    disabled_checks: Iterable[Any] = (),
) -> Callable[..., jax.export.Exported]:
    """``jax.export.export`` for a function that calls this project's kernels.

    JAX refuses to export custom calls it does not know to be stable: plain
    ``jax.export.export`` of a function calling a bridge's kernel raises
    ``ValueError: Cannot serialize code with custom calls whose targets have
    no compatibility guarantees``. Use this function there: it lowers ``fun``
    once to find the targets our bridges made and passes
    ``jax.export.DisabledSafetyCheck.custom_call`` for each (their names derive
    from content, so they are the same in every process). Other custom calls
    still need the user's ``disabled_checks``. Write the result with
    :func:`serialize`, which keeps how to make each kernel again.

    Args:
        fun: a function, or a ``jax.jit`` of one.
        platforms: as ``jax.export.export``'s (default: the default backend).
        disabled_checks: further checks to disable, as for ``jax.export.export``.

    Returns:
        A function of the arguments (arrays or ``jax.ShapeDtypeStruct``) returning
        the ``jax.export.Exported``; write it with :func:`serialize`.

    Raises:
        TypeError, ValueError: ``fun``, ``platforms`` (a str such as ``"cpu"``
            is refused: give ``["cpu"]``) or ``disabled_checks`` of the wrong
            type or value.
    """
    if not callable(fun):
        raise TypeError(f"`fun` must be callable, got {type(fun)!r}")
    jitted = fun if hasattr(fun, "trace") and hasattr(fun, "lower") else jax.jit(fun)
    if platforms is not None:
        if isinstance(platforms, str | bytes) or not isinstance(platforms, Iterable):
            raise TypeError(
                "`platforms` must be None or a sequence of platform names such as "
                f"['cpu', 'cuda'], got {platforms!r}"
            )
        platforms = tuple(platforms)
        if not platforms or not all(isinstance(p, str) and p for p in platforms):
            raise ValueError(
                "`platforms` must be None (the default backend) or name at least one platform "
                f"(str), got {platforms!r}"
            )
    if isinstance(disabled_checks, str | bytes) or not isinstance(disabled_checks, Iterable):
        raise TypeError(
            "`disabled_checks` must be a sequence of jax.export.DisabledSafetyCheck, "
            f"got {disabled_checks!r}"
        )
    extra = tuple(disabled_checks)
    if not all(isinstance(c, jax.export.DisabledSafetyCheck) for c in extra):
        raise TypeError(
            f"`disabled_checks` must be a sequence of jax.export.DisabledSafetyCheck, got {extra!r}"
        )

    def do(*args: Any, **kwargs: Any) -> jax.export.Exported:
        # Lowered for the platforms jax.export.export exports for: by default
        # the default backend, which under ``jax.default_device`` is not
        # the platform a plain lowering follows.
        targets = platforms or (jax.export.default_export_platform(),)
        lowered = jitted.trace(*args, **kwargs).lower(lowering_platforms=targets)
        ours = _known(custom_call_targets(lowered.as_text()))
        checks = [*extra, *(jax.export.DisabledSafetyCheck.custom_call(t) for t in ours)]
        return jax.export.export(jitted, platforms=targets, disabled_checks=checks)(*args, **kwargs)

    return do


def _with_distribution(step: dict[str, Any]) -> dict[str, Any]:
    # The distribution that registered the kind's rebuilder, for the message
    # of a process that lacks it (see register_rebuilder).
    distribution = distribution_of(step["kind"])
    if distribution is None or "distribution" in step:
        return step
    return {**step, "distribution": distribution}


def _manifest(exported: jax.export.Exported) -> dict[str, list[list[dict[str, Any]]]]:
    manifest: dict[str, list[list[dict[str, Any]]]] = {}
    for target in custom_call_targets(exported):
        with _lock:
            chains = list(_recipes.get(target, ()))
        if not chains:
            continue  # not ours: JAX's own, or another library's
        written, reasons = [], []
        for chain in chains:
            if isinstance(chain[-1], Unexportable):
                reasons.append(chain[-1].reason)
                continue
            start = max(
                (k + 1 for k, s in enumerate(chain) if isinstance(s, Unexportable)), default=0
            )
            steps = [_with_distribution(json.loads(s)) for s in chain[start:]]  # type: ignore[arg-type]
            if steps not in written:
                written.append(steps)
        if not written:
            raise ExportError(
                f"FFI target {target!r} cannot be made again in another process: "
                + "; ".join(dict.fromkeys(reasons))
            )
        manifest[target] = written
    return manifest


def serialize(exported: jax.export.Exported, *, key: bytes | None = None) -> bytes:
    """``exported``'s bytes with the recipes of the kernels it calls.

    Read them with :func:`deserialize` (``jax.export.deserialize`` cannot read
    them). With ``key``, the blob is signed: an HMAC-SHA256 under ``key`` of
    everything in it, which ``deserialize(blob, key=key)`` verifies before it
    reads anything else. Raises :class:`ExportError` when a kernel cannot be
    made again in another process (see the message for the value that
    prevents it).

    Args:
        exported: what :func:`export` returned.
        key: a secret of at least 16 bytes (``secrets.token_bytes(32)``) to
            sign the blob with; None writes it unsigned.

    Example:
        >>> import jax, jax.numpy as jnp, numpy as np, secrets
        >>> from ffi_core import deserialize
        >>> key = secrets.token_bytes(32)
        >>> blob = serialize(export(jnp.sin)(np.float32(1)), key=key)
        >>> float(deserialize(blob, key=key).call(np.float32(0)))
        0.0
    """
    if not isinstance(exported, jax.export.Exported):
        raise TypeError(f"`exported` must be a jax.export.Exported, got {type(exported)!r}")
    key = check_key(key)
    manifest = json.dumps({"targets": _manifest(exported)}, sort_keys=True).encode()
    return pack(manifest, bytes(exported.serialize()), key)
