"""ffi_core.export / serialize / deserialize: recipes recorded with targets,
written beside JAX's bytes, and run again to register the targets.

Targets here are made by a test rebuilder registering a Python handler, so
the whole path runs in one process; the bridges' own rebuilders are tested
across processes in tests-integration/test_export.py.
"""

from __future__ import annotations

import importlib.metadata
import re

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core import ExportError, MissingKernelError
from ffi_core.abi import CallFrame
from ffi_core.export import (
    KernelCatalog,
    Unexportable,
    custom_call_targets,
    recipe_context,
    record_recipe,
    register_kernel_acceptor,
    register_rebuilder,
)
from ffi_core.export._export import MAGIC, from_json, to_json
from ffi_core.testing import whole_message

X = np.arange(4, dtype=np.float32)
KEY = b"ffi-core tests: a key of 32 byte"


def _double(frame: CallFrame) -> None:
    (x,), (out,) = frame.args, frame.rets
    out.as_numpy()[...] = x.as_numpy() * 2


def _calls(target: str):
    return lambda x: jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _fresh_target(request: pytest.FixtureRequest) -> str:
    # The registry is process-wide: a name of this test's own.
    return ffi_core.bridge.target_name("ffi_core_tests.export", request.node.nodeid)


def _rebuilder(made: list[dict]):
    def rebuild(step):
        made.append(dict(step))
        if step.get("missing"):
            raise MissingKernelError(f"kernel {step['kernel']!r} is not here")
        name = step["target"]
        handler = ffi_core.abi.python_handler(_double, name=name)
        ffi_core.bridge.register_target(name, handler, content="double")

    return rebuild


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        2.5,
        float("inf"),
        "s",
        (1, (2.0, "a")),
        [1, (2,)],
        {"a": (1,)},
        np.dtype("float32"),
        np.float32(1.5),
        np.int64(-3),
    ],
    ids=repr,
)
def test_json_round_trip(value):
    back = from_json(to_json(value))
    assert back == value and type(back) is type(value)


def test_json_refuses_other_values():
    with pytest.raises(TypeError, match=re.escape("object value <object object at")):
        to_json(object())


def test_custom_call_targets_reads_quoted_symbols():
    # MLIR quotes a symbol that is not an identifier, with \\XX escapes.
    name = ffi_core.bridge.target_name("ffi_core_tests.dobl\u00e9", 1)
    text = jax.jit(_calls(name)).lower(X).as_text()
    assert '@"ffi_core_tests.dobl\\C3\\A9_' in text
    assert custom_call_targets(text) == [name]
    quoted = 'stablehlo.custom_call @"a\\22b\\5Cc\\n d"(%arg0)'
    assert custom_call_targets(quoted) == ['a"b\\c\n d']


def test_a_target_with_a_non_ascii_name_round_trips():
    target = ffi_core.bridge.target_name("ffi_core_tests.dobl\u00e9", "round trip")
    made: list[dict] = []
    register_rebuilder("ffi_core_tests.double", _rebuilder(made))
    record_recipe(target, {"kind": "ffi_core_tests.double", "target": target})
    blob = ffi_core.serialize(ffi_core.export(_calls(target))(X), key=KEY)
    np.testing.assert_array_equal(ffi_core.deserialize(blob, key=KEY).call(X), 2 * X)
    assert made == [{"kind": "ffi_core_tests.double", "target": target}]


def test_custom_call_targets_of_text_and_exported(request):
    target = _fresh_target(request)
    text = jax.jit(_calls(target)).lower(X).as_text()
    assert custom_call_targets(text) == [target]
    assert custom_call_targets(jax.export.export(jax.jit(jnp.sin))(X)) == []


def test_round_trip_runs_the_recipe(request):
    target = _fresh_target(request)
    made: list[dict] = []
    register_rebuilder("ffi_core_tests.double", _rebuilder(made))
    step = {"kind": "ffi_core_tests.double", "target": target, "shape": (4,)}
    with recipe_context({"kind": "ffi_core_tests.outer", "note": object()}):
        record_recipe(target, step)  # the outer step cannot be written
    exported = ffi_core.export(_calls(target))(X)
    blob = ffi_core.serialize(exported, key=KEY)
    assert blob.startswith(MAGIC)
    assert made == []
    restored = ffi_core.deserialize(blob, key=KEY)
    assert made == [step]  # only the writable suffix ran, values as recorded
    np.testing.assert_array_equal(restored.call(X), 2 * X)
    ffi_core.deserialize(blob, key=KEY)  # registered now: the recipe does not run again
    assert len(made) == 1


def test_export_needs_no_disabled_checks_for_our_targets(request):
    target = _fresh_target(request)
    with pytest.raises(ValueError, match="Cannot serialize code with custom calls"):
        ffi_core.export(_calls(target))(X)  # no recipe: not ours
    record_recipe(target, {"kind": "ffi_core_tests.double", "target": target})
    assert custom_call_targets(ffi_core.export(_calls(target))(X)) == [target]
    assert custom_call_targets(ffi_core.export(jax.jit(_calls(target)))(X)) == [target]


def test_export_finds_the_targets_of_the_platform_it_exports_for(request, monkeypatch):
    # A GPU machine under jax.default_device(cpu): jit lowers for the CPU,
    # jax.export exports for the default backend. Simulated on the CPU by
    # making "cuda" the export default; each branch calls a target of its own.
    cpu, cuda = _fresh_target(request) + "_cpu", _fresh_target(request) + "_cuda"
    for target in (cpu, cuda):
        record_recipe(target, {"kind": "ffi_core_tests.double", "target": target})

    def f(x):
        return jax.lax.platform_dependent(x, cpu=_calls(cpu), cuda=_calls(cuda))

    from jax._src.export import _export as jax_export

    monkeypatch.setattr(jax_export, "default_export_platform", lambda: "cuda")
    monkeypatch.setattr(jax.export, "default_export_platform", lambda: "cuda")
    exported = ffi_core.export(f)(X)
    assert exported.platforms == ("cuda",)
    assert custom_call_targets(exported) == [cuda]
    exported = ffi_core.export(f, platforms=["cpu", "cuda"])(X)
    assert custom_call_targets(exported) == sorted([cpu, cuda])


def test_plain_jax_export_gives_the_message_the_docs_quote(request):
    # The README's Export section and ffi_core.export's docstring quote JAX's
    # message, which names the target, as what to replace by ffi_core.export.
    target = _fresh_target(request)
    record_recipe(target, {"kind": "ffi_core_tests.double", "target": target})
    # (The link between the two parts differs between jax releases.)
    quoted = (
        re.escape(
            "Cannot serialize code with custom calls whose targets have no compatibility "
            "guarantees. See https://docs.jax.dev/"
        )
        + r"\S+"
        + re.escape(
            "#compatibility-guarantees-for-custom-calls. Examples are:\n"
            f"%0 = stablehlo.custom_call @{target}("
        )
    )
    with pytest.raises(ValueError, match=quoted):
        jax.export.export(jax.jit(_calls(target)))(X)
    assert custom_call_targets(ffi_core.export(_calls(target))(X)) == [target]


def test_missing_kernel_names_every_recipe_tried(request):
    target = _fresh_target(request)
    made: list[dict] = []
    register_rebuilder("ffi_core_tests.double", _rebuilder(made))
    for kernel in ("pkg.first", "pkg.second"):
        record_recipe(
            target,
            {"kind": "ffi_core_tests.double", "target": target, "missing": True, "kernel": kernel},
        )
    blob = ffi_core.serialize(ffi_core.export(_calls(target))(X), key=KEY)
    with pytest.raises(
        MissingKernelError,
        match=re.escape(
            f"the exported function calls FFI target {target!r}, which this process cannot "
            "make: kernel 'pkg.first' is not here Or: kernel 'pkg.second' is not here"
        ),
    ):
        ffi_core.deserialize(blob, key=KEY)


def test_an_unknown_kind_is_refused_and_names_how_to_declare_one(request):
    target = _fresh_target(request)
    step = {"kind": "ffi_core_tests.absent", "module": "ffi_core_tests_no_such_bridge"}
    record_recipe(target, step)
    blob = ffi_core.serialize(ffi_core.export(_calls(target))(X), key=KEY)
    with pytest.raises(MissingKernelError) as info:
        ffi_core.deserialize(blob, key=KEY)
    message = str(info.value)
    assert message.startswith(
        f"the exported function calls FFI target {target!r}, which this process cannot make: "
        "no rebuilder for recipe steps of kind 'ffi_core_tests.absent': install the package "
        "that provides kind 'ffi_core_tests.absent' (this process knows ["
    )
    assert message.endswith(
        "]); a package adds one with ffi_core.export.register_rebuilder, or declares it as an "
        "entry point named 'ffi_core_tests.absent' in the group 'ffi_core.rebuilders'"
    )
    # The kinds it knows: those registered here and those declared as entry
    # points (the installed bridges'; none where ffi-core is installed alone).
    from ffi_core.export import _rebuilders

    assert f"(this process knows {_rebuilders._known_kinds()});" in message
    declared = {ep.name for ep in importlib.metadata.entry_points(group="ffi_core.rebuilders")}
    assert all(repr(kind) in message for kind in declared)


def test_a_step_carries_its_rebuilder_s_distribution(request):
    from ffi_core.export import _blob

    target = _fresh_target(request)
    made: list[dict] = []
    register_rebuilder("ffi_core_tests.made_by", _rebuilder(made), distribution="toy-ffi")
    record_recipe(target, {"kind": "ffi_core_tests.made_by", "target": target})
    blob = ffi_core.serialize(ffi_core.export(_calls(target))(X), key=KEY)
    steps = _blob.unpack(blob, KEY).targets[target]
    assert steps == [
        [{"kind": "ffi_core_tests.made_by", "target": target, "distribution": "toy-ffi"}]
    ]
    np.testing.assert_array_equal(ffi_core.deserialize(blob, key=KEY).call(X), 2 * X)
    assert made == [steps[0][0]]


def test_a_kind_whose_distribution_is_absent_says_to_install_it(request, monkeypatch):
    from ffi_core.export import _rebuilders

    target = _fresh_target(request)
    register_rebuilder("ffi_core_tests.gone", _rebuilder([]), distribution="toy-ffi")
    record_recipe(target, {"kind": "ffi_core_tests.gone", "target": target})
    blob = ffi_core.serialize(ffi_core.export(_calls(target))(X), key=KEY)
    # A process without the distribution: nothing registers or declares the kind.
    monkeypatch.delitem(_rebuilders._rebuilders, "ffi_core_tests.gone")
    with pytest.raises(
        MissingKernelError,
        match=whole_message(
            f"the exported function calls FFI target {target!r}, which this process cannot "
            "make: its kernel was made by the distribution 'toy-ffi', which provides no "
            "rebuilder here (no entry point 'ffi_core_tests.gone' of the group "
            "'ffi_core.rebuilders' is declared); install it with `pip install \"toy-ffi\"` "
            "(from wheels built from the repository: `pip install --find-links DIR "
            '"toy-ffi"`; in a uv project: `uv add "toy-ffi"`)'
        ),
    ):
        ffi_core.deserialize(blob, key=KEY)


def test_a_bad_distribution_is_refused():
    with pytest.raises(
        ValueError,
        match=whole_message(
            "`distribution` must be None or a distribution name (ASCII letters and digits, "
            "with '.', '_' or '-' inside; at most 100), got 'toy ffi; rm -rf'"
        ),
    ):
        register_rebuilder("ffi_core_tests.x", print, distribution="toy ffi; rm -rf")


def test_a_declared_entry_point_is_loaded_by_kind(request, monkeypatch):
    from importlib.metadata import EntryPoint

    from ffi_core.export import _rebuilders

    target = _fresh_target(request)
    made: list[dict] = []
    loaded: list[str] = []

    class Point(EntryPoint):
        def load(self):
            loaded.append(self.value)
            register_rebuilder("ffi_core_tests.declared", _rebuilder(made))

    point = Point(
        "ffi_core_tests.declared", "ffi_core_tests_plugin", _rebuilders.REBUILDER_ENTRY_POINTS
    )
    monkeypatch.setattr(
        _rebuilders, "_declared", lambda kind: [point] if kind == point.name else []
    )
    step = {"kind": "ffi_core_tests.declared", "target": target}
    record_recipe(target, step)
    blob = ffi_core.serialize(ffi_core.export(_calls(target))(X), key=KEY)
    np.testing.assert_array_equal(ffi_core.deserialize(blob, key=KEY).call(X), 2 * X)
    assert loaded == ["ffi_core_tests_plugin"] and made == [step]


def test_a_rebuilder_failure_is_an_export_error(request):
    target = _fresh_target(request)

    def rebuild(step):
        raise KeyError("rank")

    register_rebuilder("ffi_core_tests.broken", rebuild)
    record_recipe(target, {"kind": "ffi_core_tests.broken"})
    blob = ffi_core.serialize(ffi_core.export(_calls(target))(X), key=KEY)
    with pytest.raises(
        ExportError,
        match=re.escape(
            f"recipe step `targets[{target!r}][0][0]` (kind 'ffi_core_tests.broken') cannot be "
            "run: KeyError: 'rank'"
        ),
    ):
        ffi_core.deserialize(blob, key=KEY)


def test_unexportable_target_is_refused_with_the_reason(request):
    target = _fresh_target(request)
    record_recipe(target, Unexportable("kernel 'k' captures <object at 0x...>"))
    exported = ffi_core.export(_calls(target))(X)
    with pytest.raises(
        ExportError,
        match=re.escape(
            f"FFI target {target!r} cannot be made again in another process: "
            "kernel 'k' captures <object at 0x...>"
        ),
    ):
        ffi_core.serialize(exported, key=KEY)


def test_plain_jax_bytes_are_refused_and_say_what_reads_them():
    data = jax.export.export(jax.jit(jnp.cos))(X).serialize()
    magic = b"ffi-core export 3\n"
    # What jax.export's bytes start with changes between jax releases.
    with pytest.raises(
        ExportError,
        match=re.escape(
            "corrupt or truncated blob, or not one ffi_core.serialize wrote: its `magic` is not "
            f"{magic!r}, got {bytes(data[: len(magic)])!r} (bytes from jax.export's own "
            "serialize are read by jax.export.deserialize)"
        ),
    ):
        ffi_core.deserialize(data)


class _Toy:
    pass


def _toy_acceptor(obj: object) -> bool:
    return isinstance(obj, _Toy)


def test_bad_kernels_name_what_the_bridges_take(monkeypatch):
    from ffi_core.export import _export

    monkeypatch.setattr(
        _export,
        "_acceptors",
        [(_toy_acceptor, "the toy function"), (lambda obj: False, None)],
    )
    accepted = (
        "each one an imported bridge takes: the toy function; import the bridge of any other "
        "kernel first"
    )
    with pytest.raises(
        TypeError,
        match=whole_message(
            f"`kernels[1]` is not a kernel any imported bridge knows: got <class 'int'> "
            f"({accepted})"
        ),
    ):
        ffi_core.deserialize(b"", kernels=[_Toy(), 3])
    with pytest.raises(
        TypeError,
        match=whole_message(
            f"`kernels` must be an iterable of kernel objects ({accepted}), got <class 'int'>"
        ),
    ):
        ffi_core.deserialize(b"", kernels=5)
    register_kernel_acceptor(lambda obj: False, what="an other kernel")
    register_kernel_acceptor(lambda obj: False, what="the toy function")  # said once
    assert _export.kernels_accepted() == (
        "each one an imported bridge takes: the toy function, an other kernel; import the "
        "bridge of any other kernel first"
    )


def test_without_a_described_bridge_kernels_get_neutral_advice(monkeypatch):
    from ffi_core.export import _export

    monkeypatch.setattr(_export, "_acceptors", [(lambda obj: False, None)])
    with pytest.raises(
        TypeError,
        match=whole_message(
            "`kernels[0]` is not a kernel any imported bridge knows: got <class 'int'> "
            "(import the bridge of the kernel first)"
        ),
    ):
        ffi_core.deserialize(b"", kernels=[3])


def test_bad_kernel_acceptors():
    with pytest.raises(
        TypeError, match=whole_message("`accept` must be callable, got <class 'int'>")
    ):
        register_kernel_acceptor(3)
    for what in ("", 3):
        with pytest.raises(
            TypeError, match=whole_message(f"`what` must be None or a non-empty str, got {what!r}")
        ):
            register_kernel_acceptor(_toy_acceptor, what=what)


def test_bad_arguments():
    with pytest.raises(
        TypeError,
        match=re.escape("`blob` must be bytes from ffi_core.serialize, got <class 'str'>"),
    ):
        ffi_core.deserialize("x")
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`kind` must be a str of ASCII letters, digits, '_' and '.' (at most 128, not "
            "starting with a digit or '.'), got 'a/b'"
        ),
    ):
        register_rebuilder("a/b", print)
    with pytest.raises(TypeError, match=re.escape("`rebuild` must be callable, got <class 'int'>")):
        register_rebuilder("ffi_core_tests.x", 3)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`fields` must be None or a mapping of str to ffi_core.export.StepField, got {'rank': <class 'int'>}"
        ),
    ):
        register_rebuilder("ffi_core_tests.x", print, fields={"rank": int})
    with pytest.raises(
        TypeError, match=re.escape("`exported` must be a jax.export.Exported, got <class 'int'>")
    ):
        ffi_core.serialize(3)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`exported` must be a jax.export.Exported or lowered text (str), got <class 'int'>"
        ),
    ):
        custom_call_targets(3)
    with pytest.raises(TypeError, match=re.escape("`fun` must be callable, got <class 'int'>")):
        ffi_core.export(3)
    for kwargs, error, message in (
        (
            {"platforms": "cpu"},
            TypeError,
            "`platforms` must be None or a sequence of platform names such as ['cpu', 'cuda'], "
            "got 'cpu'",
        ),
        (
            {"platforms": []},
            ValueError,
            "`platforms` must be None (the default backend) or name at least one platform "
            "(str), got ()",
        ),
        (
            {"disabled_checks": 5},
            TypeError,
            "`disabled_checks` must be a sequence of jax.export.DisabledSafetyCheck, got 5",
        ),
        (
            {"disabled_checks": ["x"]},
            TypeError,
            "`disabled_checks` must be a sequence of jax.export.DisabledSafetyCheck, got ('x',)",
        ),
    ):
        with pytest.raises(error, match=whole_message(message)):
            ffi_core.export(jnp.sin, **kwargs)
    with pytest.raises(ValueError, match=re.escape("a recipe step needs a str 'kind', got {}")):
        record_recipe("t", {})


def test_kernel_catalog_finds_by_digest_and_says_what_to_import():
    import types

    catalog = KernelCatalog("toy kernel", "toy_kernel", "the @toy function", "reads")
    first = types.SimpleNamespace(digest="d1", qualname="add")
    assert catalog.remember(first) is first
    # A second info with a known digest: the first one stays.
    assert catalog.remember(types.SimpleNamespace(digest="d1", qualname="add")) is first
    assert catalog.find({"digest": "d1", "kernel": "add"}) is first
    with pytest.raises(ffi_core.MissingKernelError) as changed:
        catalog.find({"digest": "d2", "kernel": "add"})
    assert str(changed.value) == (
        "toy kernel 'add' is known here, but its code or the values it reads differ from the "
        "exported kernel's; import the version that was exported"
    )
    with pytest.raises(ffi_core.MissingKernelError) as unknown:
        catalog.find({"digest": "d3", "kernel": "mul"})
    assert str(unknown.value) == (
        "toy kernel 'mul' is not known here: import the module that wraps it with toy_kernel, "
        "or pass the @toy function in `kernels`"
    )
