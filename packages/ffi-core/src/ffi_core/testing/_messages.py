"""Whole-message matching: the style every error test here follows.

``pytest.raises(..., match=re.escape(message))`` searches, so it passes when
the message only contains the text; a test that states a message states all
of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "DIFFERENTIATION_TRANSFORMS",
    "check_differentiation_refused",
    "differentiation_refused_message",
    "raises_exactly",
    "whole_message",
]

# JAX appends a note on the frames it filtered to errors raised under a
# transform; it is JAX's, not the message under test, so it may follow.
_JAX_NOTE = r"(\n-+\nFor simplicity, JAX has removed its internal frames.*)?"


def whole_message(message: str) -> str:
    """A pattern for ``pytest.raises(match=...)`` that matches exactly
    ``message`` (followed by JAX's note on its filtered frames, if any).

    Example:
        >>> import re
        >>> bool(re.search(whole_message("got 1 (int)"), "got 1 (int)"))
        True
        >>> bool(re.search(whole_message("got 1"), "got 1 (int)"))
        False
    """
    return "(?s)^" + re.escape(message) + _JAX_NOTE + r"\Z"


def raises_exactly(expected_exception: type[BaseException], message: str) -> Any:
    """``pytest.raises(expected_exception)`` that also requires the message to
    be exactly ``message`` (see :func:`whole_message`).

    Example:
        >>> with raises_exactly(ValueError, "`n` must be positive, got -1"):
        ...     raise ValueError("`n` must be positive, got -1")
        >>> with raises_exactly(ValueError, "`n` must be positive"):  # doctest: +ELLIPSIS
        ...     raise ValueError("`n` must be positive, got -1")
        Traceback (most recent call last):
        ...
        AssertionError: Regex pattern did not match...
    """
    import pytest  # a test dependency: imported only when a test asks for it

    return pytest.raises(expected_exception, match=whole_message(message))


#: The transforms :func:`check_differentiation_refused` checks, by name.
DIFFERENTIATION_TRANSFORMS = ("grad", "jvp", "vjp", "linear_transpose")


# What a bridge kernel without a derivative needs when its bridge names no
# other way than JAX's: the test's own statement of the end of
# ffi_core.bridge.raise_on_differentiation's messages.
_JAX_FIX = "define the derivative by wrapping the operation in `jax.custom_vjp`/`jax.custom_jvp`"


def differentiation_refused_message(kernel: str, transform: str, fix: str | None = None) -> str:
    """The whole message with which ``transform`` (one of
    :data:`DIFFERENTIATION_TRANSFORMS`) refuses a bridge kernel without a
    derivative, ``kernel`` being that kernel in words and ``fix`` what its
    bridge says to do (None: JAX's way alone, ffi-core's default).

    Example:
        >>> print(differentiation_refused_message("toy kernel 'scale'", "linear_transpose"))
        toy kernel 'scale' has no transpose rule, so jax.linear_transpose cannot transpose it; define the derivative by wrapping the operation in `jax.custom_vjp`/`jax.custom_jvp`
        >>> print(differentiation_refused_message("toy kernel 'scale'", "grad", "register it"))
        toy kernel 'scale' has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it; register it

    Raises:
        ValueError: ``transform`` is not one of them.
    """
    _check_transform(transform)
    fix = _JAX_FIX if fix is None else fix
    if transform == "linear_transpose":
        return f"{kernel} has no transpose rule, so jax.linear_transpose cannot transpose it; {fix}"
    return (
        f"{kernel} has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it; {fix}"
    )


def _check_transform(transform: str) -> None:
    if transform not in DIFFERENTIATION_TRANSFORMS:
        raise ValueError(
            f"`transform` must be one of {', '.join(DIFFERENTIATION_TRANSFORMS)}, got {transform!r}"
        )


def _traced(op: Callable[[Any], Any], transform: str) -> Callable[[Any], Any]:
    import jax

    if transform == "grad":
        return jax.grad(lambda x: op(x).sum())
    if transform == "jvp":
        return lambda x: jax.jvp(op, (x,), (x,))
    if transform == "vjp":
        return lambda x: jax.vjp(op, x)[0]
    return lambda x: jax.linear_transpose(op, x)(x)


def check_differentiation_refused(
    op: Callable[[Any], Any], x: Any, *, kernel: str, transform: str, fix: str | None = None
) -> None:
    """Trace ``transform`` of the one-argument ``op`` at ``x`` and require the
    NotImplementedError of a bridge kernel without a derivative, whole:
    naming ``kernel`` (``"numba kernel 'scale'"``) and ``fix``.

    Only traced (``jax.make_jaxpr``), never lowered, so it runs on the
    emulated GPU as on a real one.

    Args:
        op: the operation, of one array.
        x: the array to differentiate at.
        kernel: the kernel in words, as the message names it.
        transform: one of :data:`DIFFERENTIATION_TRANSFORMS`.
        fix: what the kernel's bridge says to do, as the message ends (its
            ``KernelInfo.derivative_fix``); None: ffi-core's default, JAX's
            way alone.

    Raises:
        ValueError: ``transform`` is not one of them.
        AssertionError: the transform does not raise that error and message.
    """
    import jax

    _check_transform(transform)
    with raises_exactly(
        NotImplementedError, differentiation_refused_message(kernel, transform, fix)
    ):
        jax.make_jaxpr(_traced(op, transform))(x)
