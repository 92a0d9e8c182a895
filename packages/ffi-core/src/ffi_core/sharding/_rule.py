"""A kernel's partitioning rule: which dimensions of its operands and results
are one *factor*, which factors it sums over, which it cannot split.

The notation is Shardy's einsum-like one, as
``jax.experimental.custom_partitioning`` takes it for ``sharding_rule``:
``"i j, j -> i"`` names the dimensions of each input (before ``->``) and of
each output (after it); one name is one factor, and a dimension of that
factor may be split across devices wherever it appears. ``"elementwise"``
says that every input and output has the same shape and every dimension is
independent. A rule is checked against the arrays of a call by
``ShardingRule.resolve``, before anything is traced.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

__all__ = ["ELEMENTWISE", "ShardingRule", "check_sharding_rule", "resolve_sharding_rule"]

#: The shorthand for "every array has the same shape, every dimension independent".
ELEMENTWISE = "elementwise"

# What a rule may be, in the words of every message that refuses one.
_ACCEPTED = (
    f'"{ELEMENTWISE}" or einsum-like notation with one space-separated list of factor names '
    'per array, inputs before "->" and outputs after it, arrays separated by commas '
    '(e.g. "i j, j -> i"; a scalar is an empty list)'
)
_FACTOR = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")

# The factor of a leading vmap axis: ``vmap<n>``, with the first n the rule does not use.
_BATCH_FACTOR = "vmap"


def _parse_side(text: str, rule: str) -> tuple[tuple[str, ...], ...]:
    arrays = []
    for part in text.split(","):
        names = tuple(part.split())
        for name in names:
            if not _FACTOR.match(name):
                raise ValueError(
                    f"`sharding_rule` {rule!r} has factor {name!r}; factor names are a letter "
                    "followed by letters, digits or '_' (compound factors and '...' are not "
                    f"supported); accepted: {_ACCEPTED}"
                )
        arrays.append(names)
    if len(arrays) == 1 and not arrays[0]:
        return ()
    return tuple(arrays)


def _factor_names(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"`{what}` must be a sequence of factor names (str), got {value!r}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"`{what}` must be a sequence of factor names (str), got {value!r}")
    return names


@dataclasses.dataclass(frozen=True)
class ShardingRule:
    """How a kernel can run on shards of its arrays (see the module docs).

    Args:
        rule: ``"elementwise"``, or Shardy's einsum-like notation:
            ``"i, i -> i"``, ``"i j, j -> i"``, ``"b i, b i -> b"``.
        reduction_factors: factors the kernel sums over (they appear in no
            output). Where one is split across devices, each device computes a
            partial result on its shard, and the partial results are summed
            across those devices (``jax.lax.psum``).
        need_replication_factors: factors the kernel must see whole: each
            device gets the full extent of that factor (gathered along it
            only, the other factors stay split). A factor that appears in no
            output and is not a reduction factor is kept whole too: the kernel
            combines its elements in a way only it knows.

    Example:
        >>> rule = ShardingRule("i k, k -> i", reduction_factors=("k",))
        >>> rule.inputs, rule.outputs
        ((('i', 'k'), ('k',)), (('i',),))
        >>> ShardingRule("i, -> i").inputs
        (('i',), ())
    """

    rule: str
    reduction_factors: tuple[str, ...] = ()
    need_replication_factors: tuple[str, ...] = ()
    inputs: tuple[tuple[str, ...], ...] | None = dataclasses.field(
        default=None, init=False, compare=False, repr=False
    )
    outputs: tuple[tuple[str, ...], ...] | None = dataclasses.field(
        default=None, init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.rule, str):
            raise TypeError(
                f"`sharding_rule` must be a str or an ffi_core.ShardingRule, got "
                f"{type(self.rule)!r}; accepted: {_ACCEPTED}"
            )
        reduction = _factor_names(self.reduction_factors, "reduction_factors")
        replication = _factor_names(self.need_replication_factors, "need_replication_factors")
        object.__setattr__(self, "reduction_factors", reduction)
        object.__setattr__(self, "need_replication_factors", replication)
        text = self.rule.strip()
        if text == ELEMENTWISE:
            if reduction or replication:
                raise ValueError(
                    f'`sharding_rule` "{ELEMENTWISE}" has no factors to name in '
                    "`reduction_factors` or `need_replication_factors`; write the rule in "
                    'einsum-like notation instead (e.g. "i j, i j -> i")'
                )
            return
        if text.count("->") != 1:
            raise ValueError(f"`sharding_rule` must be {_ACCEPTED}, got {self.rule!r}")
        lhs, rhs = text.split("->")
        inputs, outputs = _parse_side(lhs, self.rule), _parse_side(rhs, self.rule)
        if not outputs:
            raise ValueError(
                f"`sharding_rule` {self.rule!r} names no output after '->'; accepted: {_ACCEPTED}"
            )
        for names in (*inputs, *outputs):
            if len(set(names)) != len(names):
                raise ValueError(
                    f"`sharding_rule` {self.rule!r} names a factor twice in one array "
                    f"({' '.join(names)}); each dimension of an array is its own factor"
                )
        known = {f for names in (*inputs, *outputs) for f in names}
        for what, names in (
            ("reduction_factors", reduction),
            ("need_replication_factors", replication),
        ):
            unknown = [f for f in names if f not in known]
            if unknown:
                raise ValueError(
                    f"`{what}` names {', '.join(map(repr, unknown))}, which `sharding_rule` "
                    f"{self.rule!r} does not have; its factors: {', '.join(sorted(known))}"
                )
        in_outputs = sorted({f for names in outputs for f in names} & set(reduction))
        if in_outputs:
            raise ValueError(
                f"`reduction_factors` names {', '.join(map(repr, in_outputs))}, which output "
                f"dimensions of `sharding_rule` {self.rule!r} carry; a reduction factor is "
                "summed over and appears in no output"
            )
        both = [f for f in reduction if f in replication]
        if both:
            raise ValueError(
                f"`reduction_factors` and `need_replication_factors` both name "
                f"{', '.join(map(repr, both))} in `sharding_rule` {self.rule!r}; a factor is "
                "either summed over (split, partial results added) or kept whole, not both"
            )
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "outputs", outputs)
        # Shardy numbers factors in the order they first appear in the rule and
        # wants each list of special factors in that order: kept so here.
        object.__setattr__(self, "reduction_factors", self._in_rule_order(reduction))
        object.__setattr__(self, "need_replication_factors", self._in_rule_order(replication))

    @property
    def factors(self) -> tuple[str, ...]:
        """Every factor, in the order it first appears in the rule (inputs,
        then outputs): the order Shardy numbers them in. Empty for
        ``"elementwise"`` until resolved.

        Example:
            >>> ShardingRule("k, i -> i").factors
            ('k', 'i')
        """
        arrays = (*(self.inputs or ()), *(self.outputs or ()))
        return tuple(dict.fromkeys(f for names in arrays for f in names))

    def _in_rule_order(self, names: Sequence[str]) -> tuple[str, ...]:
        return tuple(f for f in self.factors if f in names)

    @property
    def whole_factors(self) -> tuple[str, ...]:
        """The factors never split, in rule order (:attr:`factors`):
        ``need_replication_factors``, and the factors of inputs only that are
        not reduction factors.

        Example:
            >>> ShardingRule("k, i -> i", need_replication_factors=("i",)).whole_factors
            ('k', 'i')
        """
        # "elementwise" (no factors named until resolved) keeps nothing whole.
        outputs = {f for names in self.outputs or () for f in names}
        return tuple(
            f
            for f in self.factors
            if f in self.need_replication_factors
            or (f not in outputs and f not in self.reduction_factors)
        )

    @property
    def elementwise(self) -> bool:
        """Whether this is the ``"elementwise"`` shorthand."""
        return self.inputs is None

    def resolve(
        self,
        in_shapes: Sequence[Sequence[int]],
        out_shapes: Sequence[Sequence[int]],
        *,
        name: str,
        aliases: Sequence[tuple[int, int]] = (),
    ) -> ShardingRule:
        """This rule checked against a call's arrays; ``"elementwise"`` spelled out.

        Args:
            in_shapes, out_shapes: the shapes of the call's inputs and outputs.
            name: what is called, for messages (``"kernel 'add'"``).
            aliases: the call's ``(input, output)`` aliased pairs: each pair
                must have the same factors (so the same shard on each device).

        Raises:
            ValueError: the rule has another number of inputs or outputs, or
                another rank for one of them, or gives one factor two sizes,
                or other factors to an aliased input and output.

        Example:
            >>> ShardingRule("elementwise").resolve([(4, 2)], [(4, 2)], name="kernel 'f'").rule
            'e0 e1 -> e0 e1'
        """
        in_shapes = [tuple(s) for s in in_shapes]
        out_shapes = [tuple(s) for s in out_shapes]
        if self.inputs is None or self.outputs is None:  # "elementwise"
            shapes = in_shapes + out_shapes
            for shape in shapes:
                if shape != shapes[0]:
                    raise ValueError(
                        f'`sharding_rule` "{ELEMENTWISE}" of {name} needs every input and '
                        f"output to have one shape, got {_describe(in_shapes, out_shapes)}; "
                        'write the rule in einsum-like notation instead (e.g. "i, -> i")'
                    )
            factors = " ".join(f"e{d}" for d in range(len(shapes[0])))
            text = f"{', '.join([factors] * len(in_shapes))} -> {', '.join([factors] * len(out_shapes))}"
            return ShardingRule(text)
        inputs, outputs = self.inputs, self.outputs
        for side, arrays, shapes in (
            ("inputs", inputs, in_shapes),
            ("outputs", outputs, out_shapes),
        ):
            if len(arrays) != len(shapes):
                raise ValueError(
                    f"`sharding_rule` {self.rule!r} has {len(arrays)} {side}, but {name} is "
                    f"called with {len(shapes)} {side}: {_describe(in_shapes, out_shapes)}"
                )
            for k, (names, shape) in enumerate(zip(arrays, shapes, strict=True)):
                if len(names) != len(shape):
                    raise ValueError(
                        f"`sharding_rule` {self.rule!r} gives {side[:-1]} {k} {len(names)} "
                        f"dimensions ({' '.join(names) or 'a scalar'}), but {name} is called "
                        f"with {side[:-1]} {k} of shape {list(shape)} (rank {len(shape)})"
                    )
        sizes: dict[str, tuple[int, str]] = {}
        for side, arrays, shapes in (
            ("input", inputs, in_shapes),
            ("output", outputs, out_shapes),
        ):
            for k, (names, shape) in enumerate(zip(arrays, shapes, strict=True)):
                for d, (factor, size) in enumerate(zip(names, shape, strict=True)):
                    where = f"{side} {k} dimension {d}"
                    if factor in sizes and sizes[factor][0] != size:
                        size0, where0 = sizes[factor]
                        raise ValueError(
                            f"`sharding_rule` {self.rule!r} gives factor {factor!r} size "
                            f"{size0} ({where0}) and size {size} ({where}) in {name}; a factor "
                            "has one size everywhere it appears"
                        )
                    sizes.setdefault(factor, (size, where))
        for i, j in aliases:
            if inputs[i] != outputs[j]:
                raise ValueError(
                    f"`sharding_rule` {self.rule!r} gives input {i} factors "
                    f"({' '.join(inputs[i])}) and output {j} factors "
                    f"({' '.join(outputs[j])}), but `input_output_aliases` maps input {i} "
                    f"to output {j} in {name}; aliased arrays need the same factors"
                )
        return self

    def batched(self, in_batched: Sequence[bool]) -> ShardingRule:
        """This (resolved) rule with a leading batch factor on the inputs that
        ``in_batched`` marks and on every output (a ``jax.vmap`` axis: independent,
        may be split across devices).

        Example:
            >>> ShardingRule("i, i -> i").batched([True, False]).rule
            'vmap0 i, i -> vmap0 i'
        """
        # Resolved: its factors are named (the cast: "elementwise" has them only then).
        inputs = cast("tuple[tuple[str, ...], ...]", self.inputs)
        outputs = cast("tuple[tuple[str, ...], ...]", self.outputs)
        used = {f for names in (*inputs, *outputs) for f in names}
        batch = next(
            f"{_BATCH_FACTOR}{n}" for n in range(len(used) + 1) if f"{_BATCH_FACTOR}{n}" not in used
        )
        return ShardingRule(
            _spell(
                [
                    ((batch,) if b else ()) + names
                    for names, b in zip(inputs, in_batched, strict=True)
                ],
                [(batch, *names) for names in outputs],
            ),
            self.reduction_factors,
            self.need_replication_factors,
        )


def _spell(inputs: Sequence[Sequence[str]], outputs: Sequence[Sequence[str]]) -> str:
    return f"{', '.join(' '.join(n) for n in inputs)} -> {', '.join(' '.join(n) for n in outputs)}"


def _describe(in_shapes: Sequence[Sequence[int]], out_shapes: Sequence[Sequence[int]]) -> str:
    ins = ", ".join(str(list(s)) for s in in_shapes) or "none"
    outs = ", ".join(str(list(s)) for s in out_shapes)
    return f"inputs of shapes {ins} and outputs of shapes {outs}"


def check_sharding_rule(rule: Any) -> ShardingRule | None:
    """``sharding_rule`` as a ``ShardingRule`` (a str is parsed), or None.

    A bridge's public function calls this when a kernel is wrapped, and
    ``ShardingRule.resolve`` on each call.

    Raises:
        TypeError: ``rule`` is neither None, a str nor a ``ShardingRule``.
        ValueError: the str is not a valid rule.

    Example:
        >>> check_sharding_rule("i, i -> i")
        ShardingRule(rule='i, i -> i', reduction_factors=(), need_replication_factors=())
        >>> check_sharding_rule(None) is None
        True
    """
    if rule is None or isinstance(rule, ShardingRule):
        return rule
    if isinstance(rule, str):
        return ShardingRule(rule)
    raise TypeError(
        f"`sharding_rule` must be None, a str or an ffi_core.ShardingRule, got {type(rule)!r}; "
        f"accepted: {_ACCEPTED}"
    )


def resolve_sharding_rule(
    rule: ShardingRule | None,
    args: Sequence[Any],
    out_avals: Sequence[Any],
    *,
    name: str,
    aliases: Sequence[tuple[int, int]] = (),
) -> ShardingRule | None:
    """``rule`` checked against one call's arrays (``ShardingRule.resolve``), or
    None for a kernel without a rule: what a bridge's call passes to
    ``partitioned_call``.

    Example:
        >>> import numpy as np
        >>> resolve_sharding_rule(None, [np.ones(4)], [np.ones(4)], name="kernel 'f'") is None
        True
        >>> x = np.ones((4, 2))
        >>> resolve_sharding_rule(ShardingRule("elementwise"), [x], [x], name="kernel 'f'").rule
        'e0 e1 -> e0 e1'
    """
    if rule is None:
        return None
    in_shapes = [np.shape(x) for x in args]
    return rule.resolve(in_shapes, [a.shape for a in out_avals], name=name, aliases=aliases)
