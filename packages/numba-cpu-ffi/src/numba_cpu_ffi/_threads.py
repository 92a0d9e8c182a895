"""OpenMP's wait policy for Numba's threads under XLA, chosen by the user.

After each parallel region, GNU OpenMP's workers spin for a while waiting for
more work. Under XLA that can hurt: XLA's own CPU thread pool runs the other
operations of the program, and spinning workers take its cores. A passive wait
policy (``OMP_WAIT_POLICY=PASSIVE``) makes them sleep instead.

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


def configure_threads() -> str:
    """Make Numba's OpenMP workers sleep between parallel calls, unless the
    user chose a wait policy: sets ``OMP_WAIT_POLICY=PASSIVE`` in
    ``os.environ`` when it is unset, and returns the policy in force.

    It changes the environment of the whole process (every OpenMP library
    loaded later sees it), which is why importing the package does not do it.
    Call it before the first parallel kernel runs, or set the variable before
    starting Python.

    Example:
        >>> import numba_cpu_ffi
        >>> numba_cpu_ffi.configure_threads()  # doctest: +SKIP
        'PASSIVE'

    Raises:
        RuntimeError: Numba's thread pool has already started, so the OpenMP
            runtime has read its settings and a policy set now would not apply.
    """
    if _POLICY in os.environ:
        return os.environ[_POLICY]
    if numba_parallel._is_initialized:
        raise RuntimeError(
            "configure_threads() must run before Numba's thread pool starts (the first "
            "parallel kernel, or the first numba_kernel handler loaded from the disk "
            "cache); call it right after importing numba_cpu_ffi, or set "
            "OMP_WAIT_POLICY=PASSIVE in the environment before starting Python"
        )
    os.environ[_POLICY] = "PASSIVE"
    return "PASSIVE"
