"""The native CPU call that every CPU bridge uses: ``cpu_call_p`` and its
one handler template.

The CPU twin of :mod:`ffi_core.bridge.cuda`. A bridge describes its kernel with a
:class:`CpuPlanner` (the target's name, and how to build its handler), the
handler comes from one template (:func:`cpu_handler_source`: the metadata
handshake, buffer and attribute checks, FFI errors naming the kernel, the
batch loop) into which the bridge writes only how to call its kernel
(:class:`HandlerBody`), and :data:`cpu_call_p` does the JAX side (abstract
eval, lowering with the cost hint of large calls, ``vmap``, JVP and
transpose rules that name the fix). Needs numba (``ffi-core[native]``) to
build handlers; the rest is plain Python.
"""

from ..._moved import moved_getattr as _moved_getattr
from ._handler import AttrSig as AttrSig
from ._handler import HandlerBody as HandlerBody
from ._handler import HandlerSpec as HandlerSpec
from ._handler import build_cpu_handler as build_cpu_handler
from ._handler import cpu_handler_source as cpu_handler_source
from ._handler import cpu_threaded_loop_source as cpu_threaded_loop_source
from ._handler import handler_globals as handler_globals
from ._op import CpuPlan as CpuPlan
from ._op import CpuPlanner as CpuPlanner
from ._op import cpu_call as cpu_call
from ._op import cpu_call_bind as cpu_call_bind
from ._op import cpu_call_p as cpu_call_p
from ._op import ensure_target as ensure_target
from ._op import lower_cpu_call as lower_cpu_call
from ._record import BoundHandler as BoundHandler
from ._record import HandlerRecord as HandlerRecord
from ._record import bind_record as bind_record

__all__ = [
    "AttrSig",
    "BoundHandler",
    "CpuPlan",
    "CpuPlanner",
    "HandlerBody",
    "HandlerRecord",
    "HandlerSpec",
    "bind_record",
    "build_cpu_handler",
    "cpu_call",
    "cpu_call_bind",
    "cpu_call_p",
    "cpu_handler_source",
    "cpu_threaded_loop_source",
    "ensure_target",
    "handler_globals",
    "lower_cpu_call",
]

# The names of the last release that moved or have a new name: ffi_core._moved's tables.
__getattr__ = _moved_getattr(__name__)
