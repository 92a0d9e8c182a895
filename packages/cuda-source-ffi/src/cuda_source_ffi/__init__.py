"""cuda-source-ffi: CUDA C++ source, compiled with NVRTC, as JAX GPU operations."""
