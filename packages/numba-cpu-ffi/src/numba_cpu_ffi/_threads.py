"""OpenMP's wait policy for Numba's threads under XLA, chosen by the user.

After a parallel region, GNU OpenMP's workers spin for a while waiting for
more work, then sleep. Under XLA both sides of that can hurt:

- XLA runs a program on one of several threads of its own, and each thread
  that starts a parallel region becomes the master of a team of its own. The
  runtime then manages more threads than there are CPUs, and with the default
  policy its workers spin only 100 times before they sleep: every parallel
  call of a program wakes its workers again (about two context switches a
  call), which can cost a call what its threads save. ``ACTIVE`` spins 1,000
  times in that case, enough for the next call of a chain to find its workers
  awake.
- Spinning workers take cores that XLA's own threads, or other processes,
  need. ``PASSIVE`` makes them sleep at once.

The policy is an environment variable, read once by the OpenMP runtime when it
is loaded, and shared by every OpenMP library in the process, so this package
never sets it by itself: :func:`configure_threads` sets it when the user asks.
Small calls do not need it: the handler runs a ``parallel=True`` kernel's
serial twin below ``parallel_min_elements()``, so threads are woken only for
calls large enough to keep them busy.
"""

from __future__ import annotations

import os

from numba.np.ufunc import parallel as numba_parallel

__all__ = ["configure_threads"]

_POLICY = "OMP_WAIT_POLICY"
_POLICIES = ("PASSIVE", "ACTIVE")


def configure_threads(policy: str = "PASSIVE") -> str:
    """Choose how Numba's OpenMP workers wait between parallel calls, unless
    the user chose already: sets ``OMP_WAIT_POLICY`` to ``policy`` in
    ``os.environ`` when it is unset, and returns the policy in force.

    ``"PASSIVE"`` (the default) makes the workers sleep after each parallel
    call: they leave the cores to XLA's threads and to other processes, and
    each threaded call wakes them. ``"ACTIVE"`` makes them spin a little
    first, so that a program calling threaded kernels one after another (a
    ``scan``, a loop, a chain of large calls) finds them awake; on an idle
    2-core machine a chain of 2^20-element ``prange`` adds then ran at
    0.58-0.65x its serial twin's time in six processes of eight (0.89x and
    1.02x in the others), against 0.94-1.19x with the policy unset and
    0.93-1.22x with ``"PASSIVE"`` (``tools/bench_numba_cpu.py --only
    wait_policy``; docs/performance.md). Choose ``"ACTIVE"`` when the machine's cores are
    yours, ``"PASSIVE"`` when other work shares them.

    It changes the environment of the whole process (every OpenMP library
    loaded later sees it), which is why importing the package does not do it.
    Call it before the first parallel kernel runs, or set the variable before
    starting Python.

    Args:
        policy: ``"PASSIVE"`` or ``"ACTIVE"`` (any case).

    Example:
        >>> import numba_cpu_ffi
        >>> numba_cpu_ffi.configure_threads("ACTIVE")  # doctest: +SKIP
        'ACTIVE'

    Raises:
        TypeError: ``policy`` is not a string.
        ValueError: ``policy`` is neither ``"PASSIVE"`` nor ``"ACTIVE"``.
        RuntimeError: Numba's thread pool has already started, so the OpenMP
            runtime has read its settings and a policy set now would not apply.
    """
    if not isinstance(policy, str):
        raise TypeError(f"`policy` must be 'PASSIVE' or 'ACTIVE', got {policy!r}")
    chosen = policy.upper()
    if chosen not in _POLICIES:
        raise ValueError(f"`policy` must be 'PASSIVE' or 'ACTIVE', got {policy!r}")
    if _POLICY in os.environ:
        return os.environ[_POLICY]
    if numba_parallel._is_initialized:
        raise RuntimeError(
            "configure_threads() must run before Numba's thread pool starts (the first "
            "parallel kernel, or the first numba_kernel handler loaded from the disk "
            "cache); call it right after importing numba_cpu_ffi, or set "
            f"OMP_WAIT_POLICY={chosen} in the environment before starting Python"
        )
    os.environ[_POLICY] = chosen
    return chosen
