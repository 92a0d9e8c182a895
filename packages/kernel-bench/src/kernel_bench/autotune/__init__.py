"""Autotuning: which backend of an ``XLACustomKernel`` is fastest, per call signature.

kernel-bench registers :data:`CHOOSER` into xla-custom-kernel as the chooser
of backend ``"auto"`` (``xla_custom_kernel.register_chooser``) when it is
imported, and declares it under the entry point group
``xla_custom_kernel.choosers``, so that ``"auto"`` finds it without the user
importing kernel-bench. A kernel call with ``backend="auto"`` (or a platform
whose default is ``"auto"``, or ``xla_custom_kernel.set_backend("auto")``)
asks it, when XLA lowers the call, which registered backend to use. The
answer is keyed by the operation, the platform, the input and output shapes
and dtypes, the static keywords, the batch levels of ``vmap`` and the set of
registered backends (``xla_custom_kernel.CallSite``). It comes, in order, from:

1. this process's memory;
2. process 0, in a program of several JAX processes (``jax.distributed``):
   process 0 decides and shares the decision through JAX's key-value store,
   so that every process lowers the same program with the same backends
   (``_distributed``);
3. the cache on disk (:func:`cache_dir`), one file per machine and software
   (CPU model or GPU name, the CPUs the process may run on, Python, the
   versions of jax, jaxlib, numpy, numba, numba-cuda, warp-lang, triton and
   of every installed package of this project;
   and whether idle CPUs were kept awake, as the suite keeps them while it
   times, ``kernel_bench._awake``): a new version is a new file; what is read back is checked before it is
   used (``_decision`` and ``_cache``): a bad file or entry is
   a miss with an :class:`AutotuneWarning` naming it (a bad message from
   process 0 gives the fixed default, with a warning naming its key). A
   decision read from the disk that is not *settled* (``Decision.settled``:
   its margin is within its noise or a 5 % tie (``TIE``), or it was measured
   while the machine was busy), or one measured without the load of other processes on a machine
   that measures it (written by an earlier version), is measured again, once
   per process, and the disk updated. A run of the suite (``kernel-bench``)
   that times a decision from the disk slower than the fastest fixed backend
   beyond the noise removes it, so the next process measures it again;
4. a measurement (``_measure``): every backend runs once on data of
   the call's shapes (from the kernel's ``def_autotune_data``, else random
   floats and zero integers); their results are compared with the reference
   backend's (the platform's fixed default) within per-dtype tolerances
   (:data:`TOLERANCES`); the ones that fail or disagree are never chosen (an
   :class:`AutotuneWarning` names them); the rest are timed by kernel-bench's
   engine, each run a chain of calls in one compiled program (the suite's
   in-program time), the candidates interleaved round by round, within a
   time budget (:func:`set_budget`); the one with the lowest median time per
   call wins (the statistic of the suite's verdict), ties going to the
   earlier registered. The decision records its ``margin`` over the
   runner-up, the ``noise`` of the winner's rounds (interquartile range over
   median), the ``load`` of other processes while it was timed (the
   share of the machine's CPU time they used, from ``/proc/stat``; None
   where unknown) and ``busy`` (the load above :data:`BUSY_LOAD`, or where
   it is unknown, the noise above :data:`BUSY_NOISE`).

``XLACustomKernel.explain`` and ``kernel-bench autotune`` show decisions;
:func:`clear` forgets them.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import Any

import xla_custom_kernel
from kernel_check import TOLERANCES as _TOLERANCES
from xla_custom_kernel import CallSite

from .._load import BUSY_LOAD as BUSY_LOAD
from .._observed import recording as recording
from ._cache import cached_decisions as cached_decisions
from ._cache import fingerprint as fingerprint
from ._decide import DEFAULT_BUDGET_S as DEFAULT_BUDGET_S
from ._decide import AutotuneChooser as AutotuneChooser
from ._decide import clear as clear
from ._decide import decide_site
from ._decide import get_budget as get_budget
from ._decide import set_budget as set_budget
from ._decide import stats as stats
from ._decision import BUSY_NOISE as BUSY_NOISE
from ._decision import TIE as TIE
from ._decision import AutotuneWarning as AutotuneWarning
from ._decision import Candidate as Candidate
from ._decision import Decision as Decision
from ._decision import InvalidDecision as InvalidDecision
from ._location import CACHE_ENV as CACHE_ENV
from ._location import cache_dir as cache_dir

__all__ = [
    "BUSY_LOAD",
    "BUSY_NOISE",
    "CACHE_ENV",
    "CHOOSER",
    "DEFAULT_BUDGET_S",
    "TIE",
    "TOLERANCES",
    "AutotuneChooser",
    "AutotuneWarning",
    "Candidate",
    "Decision",
    "InvalidDecision",
    "cache_dir",
    "cached_decisions",
    "clear",
    "decide",
    "explain",
    "fingerprint",
    "get_budget",
    "recording",
    "set_budget",
    "stats",
]

#: ``(rtol, atol)`` by dtype name within which a backend's results must agree
#: with the reference backend's; dtypes not named must agree exactly. The one
#: table of ``kernel_check``, which ``check_kernel`` holds results to too.
TOLERANCES: dict[str, tuple[float, float]] = _TOLERANCES

#: The chooser of backend ``"auto"`` that kernel-bench registers into
#: xla-custom-kernel (and declares as its entry point).
CHOOSER = AutotuneChooser()


def decide(
    kernel: Any,
    platform: str,
    inputs: Sequence[Any],
    outs: Sequence[Any],
    multiple: bool,
    static: tuple[tuple[str, Any], ...],
    batch: tuple[tuple[int, tuple[bool, ...]], ...] = (),
) -> Decision:
    """The backend of ``kernel`` (an ``XLACustomKernel``) for one call signature
    on ``platform`` (see the module docs for where the answer comes from).
    ``inputs`` are the abstract values of the (batched) inputs, ``outs`` those
    of the unbatched outputs, ``multiple`` whether the operation returns a
    tuple of outputs,
    ``static`` the sorted static keywords, ``batch`` the batch levels.
    ``XLACustomKernel`` asks :data:`CHOOSER` the same when it lowers a call
    whose backend is ``"auto"``."""
    site = CallSite(kernel, platform, tuple(inputs), tuple(outs), multiple, tuple(static), batch)
    return decide_site(site)


def explain(
    kernel: Any, *inputs: Any, outs: Any, platform: str | None = None, **static: Any
) -> Decision:
    """The decision ``"auto"`` makes for ``kernel(*inputs, outs=outs, **static)``
    on ``platform`` (default: JAX's default backend), measured if it is not
    known yet. ``inputs`` may be arrays or ``jax.ShapeDtypeStruct``s."""
    site = CallSite.from_call(kernel, *inputs, outs=outs, platform=platform, **static)
    return decide_site(site)


# Registered when kernel-bench is imported; a chooser the user registered
# before stays (replace it with xla_custom_kernel.register_chooser(...,
# replace=True)).
if xla_custom_kernel.registered_chooser() is None:
    with contextlib.suppress(ValueError):  # another one registered meanwhile stays
        xla_custom_kernel.register_chooser(CHOOSER)


# Old names that still work for one release, each with what replaces it.
_RENAMED = {"InvalidRecord": "InvalidDecision"}


def __getattr__(name: str) -> Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"kernel_bench.autotune.{name} is deprecated: use kernel_bench.autotune.{new}",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]
