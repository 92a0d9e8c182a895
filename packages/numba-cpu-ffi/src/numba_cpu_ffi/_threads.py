"""OpenMP's wait policy, set before Numba starts its OpenMP thread pool.

After each parallel region, GNU OpenMP's workers spin for a while waiting for
more work. Under XLA that is harmful: XLA's own CPU thread pool runs the other
operations of the program, and spinning OpenMP workers take its cores. On a
2-core machine a small ``prange`` kernel measured 8 ms per call instead of
0.04 ms, because each XLA operation after it waited for a scheduler time
slice. A passive wait policy makes the workers sleep instead.

The variable is read once, when the OpenMP runtime starts (Numba starts it at
the first parallel call), so this module is imported first; a value the user set
is kept.
"""

from __future__ import annotations

import os

__all__: list[str] = []

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
