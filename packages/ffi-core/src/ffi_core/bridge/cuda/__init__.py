"""The native CUDA launcher that every GPU bridge uses.

One handler generator (a Numba ``cfunc`` XLA calls directly) launches any
kernel whose parameters a :class:`ParamLayout` describes: buffers' device
pointers, sizes and strides, constants and scalar attributes of the call,
packed per launch on XLA's stream, on the device the call frame names. Each
kernel image is loaded once per CUDA context and device; handlers declare
themselves command-buffer compatible so XLA can capture them in CUDA graphs.
One handler is compiled per call shape and cached on disk
(:func:`handler_cache_dir`), so a later process loads it in milliseconds.
:mod:`ffi_core.bridge.cuda.testing` runs these handlers without a GPU, and
:class:`ArtifactCache` keeps every GPU bridge's compiled kernels on disk, keyed
by content. Needs numba (``ffi-core[native]``) to build handlers; the rest is
plain Python.

The CUDA driver (``driver()``, ``Driver``, ``NativeDriver``) and the launch
limits of every CUDA GPU (``MAX_GRID``, ``MAX_BLOCK``, ...) are public here for
bridges that check a launch before it is planned.
"""

from ..._moved import moved_getattr as _moved_getattr
from ..._spec import attribute_value as attribute_value
from ._artifact_cache import ArtifactCache as ArtifactCache
from ._artifact_cache import ArtifactCacheWarning as ArtifactCacheWarning
from ._artifact_cache import ArtifactField as ArtifactField
from ._artifact_cache import BadArtifact as BadArtifact
from ._driver import CTX_FN as CTX_FN
from ._driver import LAUNCH_FN as LAUNCH_FN
from ._driver import Driver as Driver
from ._driver import DriverError as DriverError
from ._driver import NativeDriver as NativeDriver
from ._driver import driver as driver
from ._handler import HANDLER_CACHE_ENV as HANDLER_CACHE_ENV
from ._handler import MAX_DEVICES as MAX_DEVICES
from ._handler import Handler as Handler
from ._handler import LaunchSpec as LaunchSpec
from ._handler import build_launch_handler as build_launch_handler
from ._handler import handler_cache_dir as handler_cache_dir
from ._handler import launch_handler_source as launch_handler_source
from ._launch import MAX_BLOCK as MAX_BLOCK
from ._launch import MAX_GRID as MAX_GRID
from ._launch import MAX_SHARED_MEM as MAX_SHARED_MEM
from ._launch import MAX_THREADS_PER_BLOCK as MAX_THREADS_PER_BLOCK
from ._launch import STATIC_SHARED_MEM as STATIC_SHARED_MEM
from ._launch import LaunchConfig as LaunchConfig
from ._launch import launch_config as launch_config
from ._layout import CTYPES as CTYPES
from ._layout import Field as Field
from ._layout import LayoutBuilder as LayoutBuilder
from ._layout import ParamLayout as ParamLayout
from ._op import VMAP_METHODS as VMAP_METHODS
from ._op import LaunchPlanner as LaunchPlanner
from ._op import cuda_launch as cuda_launch
from ._op import cuda_launch_bind as cuda_launch_bind
from ._op import cuda_launch_cpu_lowering as cuda_launch_cpu_lowering
from ._op import cuda_launch_lowering as cuda_launch_lowering
from ._op import cuda_launch_p as cuda_launch_p
from ._op import lower_launch as lower_launch
from ._ptx import PtxError as PtxError
from ._ptx import ptx_entries as ptx_entries
from ._ptx import ptx_entry as ptx_entry
from ._ptx import ptx_params as ptx_params
from ._target import KernelImage as KernelImage
from ._target import LaunchPlan as LaunchPlan
from ._target import cuda_devices as cuda_devices
from ._target import device_ordinal as device_ordinal
from ._target import ensure_target as ensure_target
from ._target import local_capabilities as local_capabilities

__all__ = [
    "CTX_FN",
    "CTYPES",
    "HANDLER_CACHE_ENV",
    "LAUNCH_FN",
    "MAX_BLOCK",
    "MAX_DEVICES",
    "MAX_GRID",
    "MAX_SHARED_MEM",
    "MAX_THREADS_PER_BLOCK",
    "STATIC_SHARED_MEM",
    "VMAP_METHODS",
    "ArtifactCache",
    "ArtifactCacheWarning",
    "ArtifactField",
    "BadArtifact",
    "Driver",
    "DriverError",
    "Field",
    "Handler",
    "KernelImage",
    "LaunchConfig",
    "LaunchPlan",
    "LaunchPlanner",
    "LaunchSpec",
    "LayoutBuilder",
    "NativeDriver",
    "ParamLayout",
    "PtxError",
    "attribute_value",
    "build_launch_handler",
    "cuda_devices",
    "cuda_launch",
    "cuda_launch_bind",
    "cuda_launch_cpu_lowering",
    "cuda_launch_lowering",
    "cuda_launch_p",
    "device_ordinal",
    "driver",
    "ensure_target",
    "handler_cache_dir",
    "launch_config",
    "launch_handler_source",
    "local_capabilities",
    "lower_launch",
    "ptx_entries",
    "ptx_entry",
    "ptx_params",
]

# The names of the last release that moved or have a new name: ffi_core._moved's tables.
__getattr__ = _moved_getattr(__name__)
