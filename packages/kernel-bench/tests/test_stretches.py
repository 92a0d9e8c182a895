"""Whether the reference op's slow runs were the whole machine's: what
``_stretches`` reads from the suite's timed runs, and what the suite records
and says of it."""

from kernel_bench import _stretches
from kernel_bench._program import REFERENCE_OP
from kernel_bench._stretches import SlowStretches, describe, slow_stretches


def _runs(slow_backends):
    # Two cases, 20 rounds 0.5 s apart (each round's runs within 10 ms); in
    # rounds 5-9 the reference op runs 1.3x its usual time, and the backends
    # 1.25x theirs where ``slow_backends``.
    runs = []
    for r in range(20):
        slow = 5 <= r < 10
        for case in (0, 1):
            start = r * 0.5 + case * 0.004
            runs.append((start, case, REFERENCE_OP, 1.3 if slow else 1.0))
            factor = 1.25 if slow and slow_backends else 1.0
            runs.append((start + 0.001, case, "numba", (2.0 + case) * factor))
            runs.append((start + 0.002, case, "jax", 0.5 * factor))
    return runs


def test_a_slow_machine_slows_the_backends_beside_the_reference_op():
    found = slow_stretches(_runs(slow_backends=True), REFERENCE_OP)
    assert found == SlowStretches(
        reference_runs=40, slow_runs=10, beside_slow=1.25, beside_others=1.0
    )
    assert found.together
    assert describe(vars(found)) == (
        "the reference op ran at least 1.1x its case's median in 25% of its runs; the backends "
        "timed within 0.2 s of those ran at 1.25x their medians (1.00x beside its other runs): "
        "the whole machine ran slower at those times"
    )


def test_a_slow_reference_op_alone_is_its_own():
    found = slow_stretches(_runs(slow_backends=False), REFERENCE_OP)
    assert found == SlowStretches(
        reference_runs=40, slow_runs=10, beside_slow=1.0, beside_others=1.0
    )
    assert not found.together
    assert describe(vars(found)).endswith(
        "ran at 1.00x their medians (1.00x beside its other runs): they did not slow with it"
    )


def test_runs_farther_apart_than_near_seconds_are_no_neighbours():
    runs = [(0.0, 0, REFERENCE_OP, 1.0), (_stretches.NEAR_SECONDS + 0.01, 0, "numba", 1.0)]
    found = slow_stretches(runs, REFERENCE_OP)
    assert found == SlowStretches(1, 0, None, None)
    assert describe(vars(found)) == (
        "the reference op ran at least 1.1x its case's median in 0% of its runs"
    )


def test_no_reference_runs_and_unreadable_metadata():
    assert slow_stretches([(0.0, 0, "numba", 1.0)], REFERENCE_OP) is None
    assert slow_stretches([], REFERENCE_OP) is None
    for bad in (
        {},
        {"reference_runs": 0, "slow_runs": 0, "beside_slow": None, "beside_others": None},
        {"reference_runs": "x"},
        {"slow_runs": 1},
        {"reference_runs": "x", "slow_runs": 0, "beside_slow": None, "beside_others": None},
        {"reference_runs": 2, "slow_runs": 1, "beside_slow": "a", "beside_others": 1.0},
        {"reference_runs": 2, "slow_runs": 1, "beside_slow": 1.0, "beside_others": 1.0, "x": 1},
        None,
        [1, 2],
        "slow",
    ):
        assert describe(bad) is None
