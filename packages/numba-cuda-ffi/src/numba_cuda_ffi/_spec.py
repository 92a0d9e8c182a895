"""What a kernel call is: the kernel, the dtypes and vmap methods it takes, and
its signature as the kernel sees it.

One FFI target serves one (kernel, signature, launch); sizes are read from the
call frame at run time, so a signature never includes them. The signature is
ffi-core's ``CallSig`` (its ``kernel_arrays`` are the arrays as the kernel sees
them), and the checks of a call's arguments are ffi-core's too. Everything is
checked before anything is traced or bound.
"""

from __future__ import annotations

import ffi_core
import ffi_core.bridge
from ffi_core.bridge import (
    BASIC_DTYPES,
    COMPLEX_DTYPES,
    CallSig,
    KernelDTypes,
    check_kernel_type,
    function_kernel_fields,
)
from ffi_core.bridge import ArraySig as ArraySig
from ffi_core.bridge import KernelInfo as _KernelInfo

from ._runtime import numba_cuda

__all__ = [
    "CALLABLE_VMAP_METHODS",
    "DERIVATIVE_FIX",
    "DTYPES",
    "KIND",
    "SUPPORTED_DTYPES",
    "VMAP_METHODS",
    "CallSig",
    "KernelInfo",
]

#: Dtypes a numba CUDA kernel takes, by name.
SUPPORTED_DTYPES: tuple[str, ...] = (*BASIC_DTYPES, *COMPLEX_DTYPES)

#: The kernels, as dtype errors name them.
KIND = "numba CUDA"

#: The dtype table: what the checks accept and how their messages name the kernels.
DTYPES = KernelDTypes(SUPPORTED_DTYPES, "numba CUDA kernels")

#: ``vmap_method`` of ``numba_cuda_kernel``. None (default): one native call
#: launching the kernel once per batch element. ``"sequential"`` /
#: ``"sequential_unrolled"``: an XLA loop of calls. ``"fold"``: the caller
#: declares the kernel row-independent along axis 0, and one launch covers the
#: batch folded into axis 0 with launch axis x scaled by the batch size.
#: ``"expand_dims"`` / ``"broadcast_all"`` (as in ``jax.ffi.ffi_call``): the
#: kernel gets every array with the batch as a leading axis (unbatched inputs
#: with an axis of 1, or broadcast) and must handle it; the launch is unchanged.
VMAP_METHODS: tuple[str | None, ...] = (*ffi_core.bridge.VMAP_METHODS, "fold")

#: ``vmap_method`` of ``numba_cuda_callable`` (jax.ffi's methods; None is
#: ``"sequential"``: the function sees one batch element per call).
CALLABLE_VMAP_METHODS: tuple[str | None, ...] = ffi_core.bridge.VMAP_METHODS


#: What the refusal to differentiate a kernel or callable says to do: a kernel
#: of an XLACustomKernel takes its derivative from there.
DERIVATIVE_FIX = ffi_core.bridge.derivative_fix(
    "`XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for reverse mode)"
)


# Target options that change the generated code; others (extensions) do not.
_CODE_OPTIONS = ("debug", "lineinfo", "fastmath", "opt", "launch_bounds", "max_registers")


class KernelInfo(_KernelInfo):
    """A validated ``@cuda.jit`` kernel and a digest of its code, which names
    its FFI targets so they are the same in every process."""

    derivative_fix = DERIVATIVE_FIX

    def __init__(self, kernel: object) -> None:
        numba_cuda()
        from numba.cuda.dispatcher import CUDADispatcher

        kernel = check_kernel_type(
            kernel,
            CUDADispatcher,
            "a @numba.cuda.jit kernel (a numba CUDA dispatcher)",
            {"CPUDispatcher": "a @numba.njit kernel use numba_cpu_ffi.numba_kernel"},
        )
        options = kernel.targetoptions
        py_func = kernel.py_func
        name = py_func.__name__
        if options.get("device"):
            raise TypeError(
                f"`kernel` '{name}' is a device function (@cuda.jit(device=True)); "
                "wrap a kernel, which device functions can be called from"
            )
        if options.get("link"):
            raise NotImplementedError(
                f"kernel '{name}' links external code (`link=`), which numba_cuda_kernel "
                "does not load; launch it from numba_cuda_ffi.numba_cuda_callable instead"
            )
        self.kernel = kernel
        self.py_func = py_func
        self.options = {k: options.get(k) for k in _CODE_OPTIONS}
        # The digest covers code and captured values (closures, globals):
        # kernels from one factory must not share a target.
        super().__init__(**function_kernel_fields(py_func, "numba cuda kernel", self.options))
