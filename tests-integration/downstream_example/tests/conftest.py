"""Four CPU devices, so that the sharding checks run on one machine (before
any test starts JAX's backends)."""

import jax

jax.config.update("jax_num_cpu_devices", 4)
