"""The vmap pieces the bridges share: one leading batch axis, and the XLA loop."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core.bridge import batch_call, batch_to_front, leading_batch, scan_batch
from jax import core as jax_core


def _rows(shape: tuple[int, ...], offset: float = 0.0) -> jax.Array:
    return jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape) + offset


def _aval(*shape: int) -> jax_core.ShapedArray:
    return jax_core.ShapedArray(shape, np.dtype(np.float32))


@pytest.mark.parametrize(("dim", "shape"), [(0, (3, 4, 2)), (1, (4, 3, 2)), (2, (4, 2, 3))])
def test_batch_to_front_moves(dim: int, shape: tuple[int, ...]) -> None:
    x = _rows(shape)
    moved = batch_to_front(x, dim, 3)
    np.testing.assert_array_equal(moved, jnp.moveaxis(x, dim, 0))


def test_batch_to_front_broadcasts_unbatched() -> None:
    x = _rows((4,))
    np.testing.assert_array_equal(batch_to_front(x, None, 3), jnp.stack([x, x, x]))


@pytest.mark.parametrize("unroll", [False, True])
def test_scan_batch_matches_a_loop(unroll: bool) -> None:
    x, y = _rows((4, 3)), _rows((4,), 100.0)
    calls = []

    def fn(a: jax.Array, b: jax.Array) -> list[jax.Array]:
        calls.append((a.shape, b.shape))
        return [a + b, a * 2]

    total, double = scan_batch(fn, [x, y], [1, None], unroll=unroll)
    assert calls == [((4,), (4,))]  # traced once, on one element
    np.testing.assert_array_equal(total, x.T + y)
    np.testing.assert_array_equal(double, x.T * 2)


def test_leading_batch_plain_call() -> None:
    # No earlier vmap: batched inputs move their axis first, others stay as they are.
    x, y = _rows((4, 3)), _rows((4,), 100.0)
    args, flags, avals, unbatch = leading_batch([x, y], [1, None], 3, None, (), [_aval(4)])
    assert flags == (True, False)
    np.testing.assert_array_equal(args[0], x.T)
    assert args[1] is y
    assert avals == (_aval(3, 4),)
    outs = [_rows((3, 4))]
    assert unbatch(outs) == outs


def test_leading_batch_broadcasts_aliased_inputs() -> None:
    # An aliased input's buffer becomes a batched output: it needs its own row per element.
    x, y = _rows((3, 4)), _rows((4,), 100.0)
    args, flags, avals, _ = leading_batch([x, y], [0, None], 3, None, {1}, [_aval(4)])
    assert flags == (True, True)
    np.testing.assert_array_equal(args[0], x)
    np.testing.assert_array_equal(args[1], jnp.stack([y] * 3))
    assert avals == (_aval(3, 4),)


@pytest.mark.parametrize(
    ("dims", "batched", "aliased", "flags"),
    [
        ((0, 0), (True, True), (), (True, True)),
        ((0, None), (True, False), (), (True, False)),
        ((None, 0), (True, False), (), (True, True)),
        ((0, None), (False, False), (), (True, False)),
        ((0, None), (False, False), (1,), (True, True)),
        ((1, None), (True, True), (), (True, True)),
    ],
    ids=[
        "both-batched-twice",
        "outer-on-batched",
        "outer-on-unbatched",
        "outer-only",
        "aliased",
        "axis-1",
    ],
)
def test_leading_batch_folds_an_earlier_vmap(
    dims: tuple[int | None, int | None],
    batched: tuple[bool, bool],
    aliased: tuple[int, ...],
    flags: tuple[bool, bool],
) -> None:
    # Under an earlier vmap of 5 the outputs are (5, 4); a new vmap of 3 folds
    # both into one axis of 15, element (k, m) at row k * 5 + m.
    size, inner = 3, 5
    shapes = []
    for d, was in zip(dims, batched, strict=True):
        shape = [inner, 4] if was else [4]
        if d is not None:
            shape.insert(d, size)
        shapes.append(tuple(shape))
    xs = [_rows(shape, 100.0 * k) for k, shape in enumerate(shapes)]
    args, new_flags, avals, unbatch = leading_batch(
        xs, dims, size, batched, aliased, [_aval(inner, 4), _aval(inner)]
    )
    assert new_flags == flags
    assert avals == (_aval(size * inner, 4), _aval(size * inner))
    for x, d, was, arg, now in zip(xs, dims, batched, args, new_flags, strict=True):
        if not now:
            assert arg is x
            continue
        assert arg.shape == (size * inner, 4)
        for k in range(size):
            element = x if d is None else jnp.take(x, k, axis=d)  # (inner, 4) or (4,)
            for m in range(inner):
                expected = element[m] if was else element
                np.testing.assert_array_equal(arg[k * inner + m], expected)
    outs = unbatch([_rows((size * inner, 4)), _rows((size * inner,))])
    np.testing.assert_array_equal(outs[0], _rows((size, inner, 4)))
    np.testing.assert_array_equal(outs[1], _rows((size, inner)))


def test_leading_batch_under_jit() -> None:
    @jax.jit
    def fold(x: jax.Array, y: jax.Array) -> list[jax.Array]:
        args, _, _, _ = leading_batch([x, y], [0, None], 2, (True, False), (), [_aval(3, 4)])
        return args

    x, y = _rows((2, 3, 4)), _rows((4,))
    folded, same = fold(x, y)
    np.testing.assert_array_equal(folded, x.reshape(6, 4))
    np.testing.assert_array_equal(same, y)


def _row_sums_bind(seen):
    """A stand-in for a primitive's bind: each output row is its input row's sum
    plus the second input, computed per leading row as a handler would."""

    def bind(x, y, *, out_avals, batched):
        seen.append((tuple(x.shape), tuple(y.shape), batched, tuple(a.shape for a in out_avals)))
        if batched is None:
            return [jnp.full(out_avals[0].shape, x.sum()) + y]
        if batched[1]:
            return [x.sum(axis=tuple(range(1, x.ndim)))[:, None] + y]
        return [x.sum(axis=tuple(range(1, x.ndim)))[:, None] + y[None]]

    return bind


def test_batch_call_refuses_a_method_it_does_not_know() -> None:
    # A bridge checks vmap_method when a kernel is wrapped; one rewritten into
    # a traced call afterwards (check_kernel's vmap rows do) is checked here.
    with pytest.raises(ValueError, match="`vmap_method` must be one of None, 'sequential'"):
        batch_call(
            _row_sums_bind([]),
            [jnp.ones((3, 4)), jnp.ones(2)],
            [0, None],
            out_avals=[jax_core.ShapedArray((2,), jnp.float32)],
            batched=None,
            vmap_method="bogus",
            aliased=(),
        )


@pytest.mark.parametrize("method", [None, "sequential", "sequential_unrolled", "expand_dims"])
def test_batch_call_modes(method: str | None) -> None:
    x = jnp.arange(12.0).reshape(3, 4)
    y = jnp.ones(2)
    out = [jax_core.ShapedArray((2,), jnp.float32)]
    seen: list = []
    outs, dims = batch_call(
        _row_sums_bind(seen),
        [x, y],
        [0, None],
        out_avals=out,
        batched=None,
        vmap_method=method,
        aliased=(),
    )
    assert dims == [0]
    if method == "expand_dims":
        # the kernel gets the batched arrays: x of (3, 4) with y expanded to (1, 2)
        assert seen == [((3, 4), (1, 2), None, ((3, 2),))]
        return
    np.testing.assert_allclose(outs[0], np.asarray(x).sum(1)[:, None] + np.ones((1, 2)))
    if method is None:  # one call over a leading batch axis; y not batched
        assert seen == [((3, 4), (2,), (True, False), ((3, 2),))]
    else:  # one call per row
        assert all(s[0] == (4,) and s[2] is None for s in seen)
