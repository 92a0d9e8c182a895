"""Moved to :mod:`ffi_core.bridge.cuda`: each name here warns and forwards."""

from .._moved import forward

__moved_to__ = "ffi_core.bridge.cuda"
_NAMES = {
    "CTX_FN": "CTX_FN",
    "CTYPES": "CTYPES",
    "LAUNCH_FN": "LAUNCH_FN",
    "MAX_DEVICES": "MAX_DEVICES",
    "VMAP_METHODS": "VMAP_METHODS",
    "ArtifactCache": "ArtifactCache",
    "ArtifactCacheWarning": "ArtifactCacheWarning",
    "ArtifactField": "ArtifactField",
    "BadArtifact": "BadArtifact",
    "Driver": "Driver",
    "DriverError": "DriverError",
    "Field": "Field",
    "Handler": "Handler",
    "KernelImage": "KernelImage",
    "LaunchConfig": "LaunchConfig",
    "LaunchPlan": "LaunchPlan",
    "LaunchPlanner": "LaunchPlanner",
    "LaunchSpec": "LaunchSpec",
    "LayoutBuilder": "LayoutBuilder",
    "NativeDriver": "NativeDriver",
    "ParamLayout": "ParamLayout",
    "PtxError": "PtxError",
    "attribute_value": "attribute_value",
    "build_handler": "build_launch_handler",
    "cuda_devices": "cuda_devices",
    "cuda_launch": "cuda_launch",
    "cuda_launch_p": "cuda_launch_p",
    "device_ordinal": "device_ordinal",
    "driver": "driver",
    "ensure_target": "ensure_target",
    "handler_source": "launch_handler_source",
    "launch_config": "launch_config",
    "local_capabilities": "local_capabilities",
    "lower_launch": "lower_launch",
    "ptx_entries": "ptx_entries",
    "ptx_entry": "ptx_entry",
    "ptx_params": "ptx_params",
}
__all__ = sorted(_NAMES)
__getattr__ = forward(__name__, __moved_to__, _NAMES)
