"""The sharding layer: a kernel's ``ShardingRule`` and the call that runs it
on each device's shard under a sharded ``jit`` (``partitioned_call``).

Users give a rule (``ffi_core.ShardingRule`` or its string); bridges reach
the rest through ``ffi_core.bridge.kernel_op``, which checks the rule,
resolves it against a call's shapes and binds through ``partitioned_call``.
"""

from ._partition import BoundPrimitive as BoundPrimitive
from ._partition import ShapedCall as ShapedCall
from ._partition import partitioned_call as partitioned_call
from ._partition import partitioned_call_p as partitioned_call_p
from ._partition import shaped_values as shaped_values
from ._rule import ELEMENTWISE as ELEMENTWISE
from ._rule import ShardingRule as ShardingRule
from ._rule import check_sharding_rule as check_sharding_rule
from ._rule import resolve_sharding_rule as resolve_sharding_rule

__all__ = [
    "ELEMENTWISE",
    "BoundPrimitive",
    "ShapedCall",
    "ShardingRule",
    "check_sharding_rule",
    "partitioned_call",
    "partitioned_call_p",
    "resolve_sharding_rule",
    "shaped_values",
]
