"""One call signature of an operation, as a chooser of backend ``"auto"`` sees it.

A :class:`CallSite` carries what a chooser needs to pick a backend for one
call signature (the operation, the platform, the shapes and dtypes, the static
keywords, the ``vmap`` batch levels, the registered backends that can run
and those that cannot (with why), a digest to file
the choice under) and :meth:`CallSite.runner`, which runs the operation with a
named backend. The primitive's parameters stay this package's own: a chooser
never binds them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax import core as jax_core

from ._platforms import BACKEND_PLATFORMS, platform_of_backend

__all__ = ["CallSite"]

# "<function f at 0x7f...>": a repr that differs in every process.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def _describe_aval(aval: Any) -> str:
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


@dataclasses.dataclass(frozen=True, eq=False)
class CallSite:
    """One call signature of an operation whose backend is ``"auto"``.

    ``XLACustomKernel`` makes one when it lowers such a call (and for
    :meth:`XLACustomKernel.explain`) and hands it to the registered chooser
    (see ``xla_custom_kernel.register_chooser``).

    Attributes:
        kernel: the ``XLACustomKernel``.
        platform: ``"cpu"``, ``"gpu"`` or ``"tpu"``.
        inputs: the abstract values of the inputs, batch axes in front.
        outs: the abstract values of the outputs, without the batch axes.
        multiple: whether the operation returns a tuple of outputs.
        static: the static keywords, sorted by name.
        batch: the ``vmap`` batch levels, outermost first: ``(size, mask)``,
            ``mask[i]`` saying whether input ``i`` has that batch axis.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import xla_custom_kernel as xck
        >>> op = xck.XLACustomKernel("doc_call_site")
        >>> _ = op.def_jax_kernel(lambda outs: lambda x: 2 * x, platform="cpu")
        >>> site = xck.CallSite.from_call(op, jnp.ones(3), outs=jax.ShapeDtypeStruct((3,), "float32"))
        >>> site.describe(), site.backends
        ('float32[3]', ('jax',))
        >>> site.runner("jax")(jnp.ones(3))
        [Array([2., 2., 2.], dtype=float32)]
    """

    kernel: Any
    platform: str
    inputs: tuple[Any, ...]
    outs: tuple[Any, ...]
    multiple: bool
    static: tuple[tuple[str, Any], ...] = ()
    batch: tuple[tuple[int, tuple[bool, ...]], ...] = ()

    @classmethod
    def from_call(
        cls, kernel: Any, *inputs: Any, outs: Any, platform: str | None = None, **static: Any
    ) -> CallSite:
        """The call site of ``kernel(*inputs, outs=outs, **static)`` on ``platform``
        (default: JAX's default backend); ``inputs`` may be arrays or
        ``jax.ShapeDtypeStruct``s.

        Raises:
            ValueError: ``platform`` is not one of ours, or ``kernel`` has no
                backend there.
            TypeError: an input has no shape and dtype.
        """
        if platform is None:
            platform = platform_of_backend(jax.default_backend())
        if platform not in BACKEND_PLATFORMS:
            raise ValueError(f"`platform` must be None, 'cpu', 'gpu' or 'tpu', got {platform!r}")
        for i, x in enumerate(inputs):
            if not (hasattr(x, "shape") and hasattr(x, "dtype")):
                raise TypeError(
                    f"input {i} of explain must be an array or a jax.ShapeDtypeStruct, got {type(x)!r}"
                )
        multiple = isinstance(outs, list | tuple)
        out_list = list(outs) if multiple else [outs]
        if not kernel.available_backends(platform):
            missing = kernel.unavailable_backends(platform)
            detail = "".join(f"; {b}: {why}" for b, why in missing.items())
            that_runs = " that can run" if missing else ""
            raise ValueError(
                f"kernel {kernel.name!r} has no backend{that_runs} for platform {platform!r}{detail}"
            )
        return cls(
            kernel,
            platform,
            tuple(jax_core.ShapedArray(tuple(x.shape), np.dtype(x.dtype)) for x in inputs),
            tuple(jax_core.ShapedArray(tuple(o.shape), np.dtype(o.dtype)) for o in out_list),
            multiple,
            tuple(sorted(static.items())),
        )

    @property
    def op(self) -> str:
        """The operation's name."""
        return str(self.kernel.name)

    @functools.cached_property
    def backends(self) -> tuple[str, ...]:
        """The backends registered for the platform that can run there (their
        bridge packages installed), in registration order: the candidates."""
        return tuple(self.kernel.available_backends(self.platform))

    @functools.cached_property
    def unavailable(self) -> dict[str, str]:
        """The backends registered for the platform that cannot run there, each
        with why (its bridge package is not installed): a chooser passes them
        over and says so."""
        found: dict[str, str] = self.kernel.unavailable_backends(self.platform)
        return found

    @property
    def reference(self) -> str | None:
        """The platform's fixed default: the fallback where nothing can be
        measured, and the backend whose results the others are compared with."""
        result: str | None = self.kernel.fixed_default(self.platform)
        return result

    @functools.cached_property
    def lookup_key(self) -> tuple[Any, ...]:
        """A hashable key of the call signature, cheap to compute (no digest):
        for a chooser's memory within one process."""
        return (
            self.op,
            self.platform,
            *self.inputs,
            None,
            *self.outs,
            self.multiple,
            self.static,
            self.batch,
            self.backends,
        )

    @functools.cached_property
    def key(self) -> str:
        """A digest of the call signature (32 hexadecimal digits), the same in
        every process where the static keywords' reprs are (see
        :meth:`unstable_static`): to file a choice under."""
        data = {
            "op": self.op,
            "platform": self.platform,
            "inputs": [[list(a.shape), np.dtype(a.dtype).name] for a in self.inputs],
            "outs": [[list(a.shape), np.dtype(a.dtype).name] for a in self.outs],
            "multiple": self.multiple,
            "static": [[k, repr(v)] for k, v in self.static],
            "batch": [[size, list(mask)] for size, mask in self.batch],
            "backends": list(self.backends),
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]

    def unstable_static(self) -> str | None:
        """The first static keyword whose repr holds a memory address (so that
        :attr:`key` differs in every process), or None."""
        return next((k for k, v in self.static if _ADDRESS.search(repr(v))), None)

    def describe(self) -> str:
        """The call signature in words: inputs, static keywords, batch levels."""
        parts = [", ".join(map(_describe_aval, self.inputs)) or "no inputs"]
        if self.static:
            parts.append(", ".join(f"{k}={v!r}" for k, v in self.static))
        for size, mask in self.batch:
            which = ", ".join(str(i) for i, m in enumerate(mask) if m)
            parts.append(f"vmap {size} over input {which}")
        return "; ".join(parts)

    def lead(self, i: int) -> tuple[int, ...]:
        """The batch axes in front of input ``i``."""
        return tuple(size for size, mask in self.batch if mask[i])

    def input_structs(self) -> list[jax.ShapeDtypeStruct]:
        """The inputs of one unbatched call, as ``jax.ShapeDtypeStruct``s."""
        return [
            jax.ShapeDtypeStruct(tuple(a.shape[len(self.lead(i)) :]), a.dtype)
            for i, a in enumerate(self.inputs)
        ]

    def out_structs(self) -> Any:
        """The outputs as kernel generators get them: one struct, or a tuple."""
        structs = tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in self.outs)
        return structs if self.multiple else structs[0]

    def example_inputs(self) -> Sequence[Any] | None:
        """The arrays the operation's ``def_autotune_data`` function makes for
        one unbatched call, or None when it has none."""
        result: Sequence[Any] | None = self.kernel.autotune_data(
            self.input_structs(), self.out_structs(), dict(self.static)
        )
        return result

    def runner(self, backend: str) -> Callable[..., list[Any]]:
        """``run(*inputs)``: the operation with ``backend`` on inputs of this
        call signature (batch axes in front), returning the list of outputs.
        Traceable: put it in ``jax.jit`` or a loop to time it.

        Raises:
            ValueError: ``backend`` is not one of ``self.backends`` (registered
                for the platform and installed).
        """
        if backend not in self.backends:
            raise ValueError(
                f"`backend` must be one of the backends of {self.op!r} on {self.platform} "
                f"({', '.join(map(repr, self.backends))}), got {backend!r}"
            )
        bind = self.kernel.primitive.bind
        params = {
            "outs": self.outs,
            "multiple": self.multiple,
            "static": self.static,
            "backend": backend,
            "batch": self.batch,
        }

        def run(*inputs: Any) -> list[Any]:
            return list(bind(*inputs, **params))

        return run
