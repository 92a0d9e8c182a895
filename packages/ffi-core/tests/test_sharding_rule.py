"""ShardingRule: the notation, its checks against a call, and its batched form."""

import re

import pytest
from ffi_core import ShardingRule
from ffi_core.bridge import check_sharding_rule

ACCEPTED = (
    '"elementwise" or einsum-like notation with one space-separated list of factor names '
    'per array, inputs before "->" and outputs after it, arrays separated by commas '
    '(e.g. "i j, j -> i"; a scalar is an empty list)'
)


def test_parses_inputs_outputs_and_scalars():
    rule = ShardingRule("i j, j, -> i")
    assert rule.inputs == (("i", "j"), ("j",), ())
    assert rule.outputs == (("i",),)
    assert not rule.elementwise


def test_elementwise_spelled_out_per_rank():
    rule = ShardingRule("elementwise").resolve([(4, 3), (4, 3)], [(4, 3)], name="kernel 'f'")
    assert rule == ShardingRule("e0 e1, e0 e1 -> e0 e1")


def test_input_only_factors_stay_whole_unless_reduced():
    assert ShardingRule("i k, k -> i").whole_factors == ("k",)
    assert ShardingRule("i k, k -> i", reduction_factors=("k",)).whole_factors == ()
    rule = ShardingRule("i k, k -> i", need_replication_factors=("i",))
    assert rule.whole_factors == ("i", "k")


def test_batched_adds_a_fresh_factor():
    rule = ShardingRule("vmap0 i, i -> vmap0 i").batched([True, False])
    assert rule.rule == "vmap1 vmap0 i, i -> vmap1 vmap0 i"


def test_check_sharding_rule():
    assert check_sharding_rule(None) is None
    assert check_sharding_rule("i -> i") == ShardingRule("i -> i")
    rule = ShardingRule("i -> i")
    assert check_sharding_rule(rule) is rule
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`sharding_rule` must be None, a str or an ffi_core.ShardingRule, got "
            f"<class 'int'>; accepted: {ACCEPTED}"
        ),
    ):
        check_sharding_rule(3)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("i, i", f"`sharding_rule` must be {ACCEPTED}, got 'i, i'"),
        ("i -> i -> i", f"`sharding_rule` must be {ACCEPTED}, got 'i -> i -> i'"),
        ("i ->", f"`sharding_rule` 'i ->' names no output after '->'; accepted: {ACCEPTED}"),
        (
            "... i -> i",
            "`sharding_rule` '... i -> i' has factor '...'; factor names are a letter followed "
            "by letters, digits or '_' (compound factors and '...' are not supported); "
            f"accepted: {ACCEPTED}",
        ),
        (
            "i i -> i",
            "`sharding_rule` 'i i -> i' names a factor twice in one array (i i); each "
            "dimension of an array is its own factor",
        ),
    ],
)
def test_bad_notation(rule, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ShardingRule(rule)


def test_bad_factor_lists():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`reduction_factors` names 'q', which `sharding_rule` 'i k -> i' does not have; "
            "its factors: i, k"
        ),
    ):
        ShardingRule("i k -> i", reduction_factors=("q",))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`need_replication_factors` names 'z', which `sharding_rule` 'i -> i' does not "
            "have; its factors: i"
        ),
    ):
        ShardingRule("i -> i", need_replication_factors=("z",))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`reduction_factors` names 'i', which output dimensions of `sharding_rule` "
            "'i k -> i' carry; a reduction factor is summed over and appears in no output"
        ),
    ):
        ShardingRule("i k -> i", reduction_factors=("i",))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`reduction_factors` and `need_replication_factors` both name 'k' in "
            "`sharding_rule` 'i k -> i'; a factor is either summed over (split, partial "
            "results added) or kept whole, not both"
        ),
    ):
        ShardingRule("i k -> i", reduction_factors=("k",), need_replication_factors=("k",))
    with pytest.raises(
        TypeError,
        match=re.escape("`reduction_factors` must be a sequence of factor names (str), got 'k'"),
    ):
        ShardingRule("i k -> i", reduction_factors="k")
    with pytest.raises(
        ValueError,
        match=re.escape(
            '`sharding_rule` "elementwise" has no factors to name in `reduction_factors` or '
            "`need_replication_factors`; write the rule in einsum-like notation instead "
            '(e.g. "i j, i j -> i")'
        ),
    ):
        ShardingRule("elementwise", reduction_factors=("i",))


@pytest.mark.parametrize(
    ("rule", "ins", "outs", "message"),
    [
        (
            "i, i -> i",
            [(4,)],
            [(4,)],
            "`sharding_rule` 'i, i -> i' has 2 inputs, but kernel 'f' is called with 1 "
            "inputs: inputs of shapes [4] and outputs of shapes [4]",
        ),
        (
            "i -> i, i",
            [(4,)],
            [(4,)],
            "`sharding_rule` 'i -> i, i' has 2 outputs, but kernel 'f' is called with 1 "
            "outputs: inputs of shapes [4] and outputs of shapes [4]",
        ),
        (
            "i j -> i",
            [(4,)],
            [(4,)],
            "`sharding_rule` 'i j -> i' gives input 0 2 dimensions (i j), but kernel 'f' is "
            "called with input 0 of shape [4] (rank 1)",
        ),
        (
            "i, i -> i",
            [(4,), (5,)],
            [(4,)],
            "`sharding_rule` 'i, i -> i' gives factor 'i' size 4 (input 0 dimension 0) and "
            "size 5 (input 1 dimension 0) in kernel 'f'; a factor has one size everywhere "
            "it appears",
        ),
        (
            "elementwise",
            [(4,), (1,)],
            [(4,)],
            "`sharding_rule` \"elementwise\" of kernel 'f' needs every input and output to "
            "have one shape, got inputs of shapes [4], [1] and outputs of shapes [4]; write "
            'the rule in einsum-like notation instead (e.g. "i, -> i")',
        ),
    ],
)
def test_rule_against_a_call(rule, ins, outs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ShardingRule(rule).resolve(ins, outs, name="kernel 'f'")


def test_aliased_arrays_need_the_same_factors():
    ShardingRule("i, i -> i").resolve([(4,), (4,)], [(4,)], name="kernel 'f'", aliases=[(1, 0)])
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`sharding_rule` 'i j, j i -> i j' gives input 1 factors (j i) and output 0 "
            "factors (i j), but `input_output_aliases` maps input 1 to output 0 in kernel "
            "'f'; aliased arrays need the same factors"
        ),
    ):
        ShardingRule("i j, j i -> i j").resolve(
            [(4, 4), (4, 4)], [(4, 4)], name="kernel 'f'", aliases=[(1, 0)]
        )
