"""triton-ffi: Triton kernels as JAX GPU operations, launched natively."""
