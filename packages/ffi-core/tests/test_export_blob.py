"""What ffi_core.deserialize refuses: blobs that are truncated, have a flipped
byte in any region, are of another format, or hold a manifest that breaks its
schema (types, ranges, nesting, sizes). Each gives one ExportError naming the
field, before anything acts on the blob.

Crafted manifests are sealed with a valid checksum and signed with the
tests' key (``_blob.pack``), so they reach the schema checks; the rebuilder of the test kind declares fields like a
bridge's and never runs on a refused step.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import ffi_core
import ffi_core.bridge
import jax
import numpy as np
import pytest
from ffi_core import ExportError, MissingKernelError
from ffi_core.export import CALL_SIG_FIELDS, StepField, record_recipe, register_rebuilder
from ffi_core.export._blob import HEADER, MAGIC, pack

X = np.arange(4, dtype=np.float32)
KEY = b"ffi-core tests: a key of 32 byte"
TARGET = ffi_core.bridge.target_name("ffi_core_tests.blob", "never registered")
KIND = "ffi_core_tests.blob_kind"
STEP = {
    "kind": KIND,
    "kernel": "pkg.double",
    "digest": "0123456789abcdef01234567",
    **{"inputs": [["float32", 1]], "outputs": [["float32", 1]], "batched": None},
    "hint": False,
}
RAN: list[dict] = []


def _rebuild(step):
    RAN.append(dict(step))
    raise MissingKernelError("checks passed")  # never registers: TARGET stays fresh


register_rebuilder(
    KIND,
    _rebuild,
    fields={
        "kernel": StepField.text(),
        "digest": StepField.digest(),
        **CALL_SIG_FIELDS,
        "hint": StepField.flag(),
    },
)


def _payload() -> bytes:
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(X.shape, X.dtype))
    checks = [jax.export.DisabledSafetyCheck.custom_call(TARGET)]
    return bytes(jax.export.export(jax.jit(call), disabled_checks=checks)(X).serialize())


PAYLOAD = _payload()


def _manifest(step=None, **targets) -> bytes:
    data = {"targets": targets or {TARGET: [[dict(STEP if step is None else step)]]}}
    return json.dumps(data).encode()


def _sealed(manifest: bytes | str) -> bytes:
    return pack(manifest.encode() if isinstance(manifest, str) else manifest, PAYLOAD, KEY)


def _with(**fields) -> bytes:
    return _sealed(_manifest({**STEP, **fields}))


def _flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1 :]


GOOD = _sealed(_manifest())
M = len(_manifest())
CORRUPT = "corrupt or truncated blob"
SIZE = (
    f"{CORRUPT}: the header (`manifest length` {M}, `payload length` {len(PAYLOAD)}, "
    "`signature length` 32) says"
)
BODY = HEADER + 32  # where the manifest starts in a signed blob
CHECKSUM = (
    f"{CORRUPT}: its `checksum` (SHA-256 of the header, signature, manifest and payload) "
    "does not match its content"
)
WHERE = f"targets[{TARGET!r}][0][0]"
SIG = (
    "a list of at most 1024 [dtype name, rank] pairs, the dtype one of "
    + ", ".join(ffi_core.abi.SUPPORTED_DTYPES)
    + " and the rank an int in 0..64"
)

DISTRIBUTION = (
    "must be a distribution name (ASCII letters and digits, with '.', '_' or '-' inside; at "
    "most 100)"
)
CASES = {
    # the container: truncations and a flipped byte in each region
    "empty": (b"", f"{CORRUPT}, or not one ffi_core.serialize wrote: its `magic` is not"),
    "magic_only": (MAGIC, f"{CORRUPT}: {len(MAGIC)} bytes, shorter than the {HEADER}-byte header"),
    "cut_in_header": (GOOD[:40], f"{CORRUPT}: 40 bytes, shorter than the {HEADER}-byte header"),
    "cut_in_signature": (
        GOOD[: HEADER + 5],
        f"{SIZE} {len(GOOD)} bytes, the blob has {HEADER + 5}",
    ),
    "cut_in_manifest": (GOOD[: BODY + 5], f"{SIZE} {len(GOOD)} bytes, the blob has {BODY + 5}"),
    "cut_in_payload": (GOOD[:-1], f"{SIZE} {len(GOOD)} bytes, the blob has {len(GOOD) - 1}"),
    "trailing_byte": (GOOD + b"\0", f"{SIZE} {len(GOOD)} bytes, the blob has {len(GOOD) + 1}"),
    "flip_magic": (_flip(GOOD, 3), f"{CORRUPT}, or not one ffi_core.serialize wrote: its `magic`"),
    "flip_manifest_length": (
        _flip(GOOD, len(MAGIC)),
        f"{CORRUPT}: the header (`manifest length` {M ^ 1}",
    ),
    "flip_payload_length": (_flip(GOOD, len(MAGIC) + 8), f"`payload length` {len(PAYLOAD) ^ 1},"),
    "flip_signature_length": (
        _flip(GOOD, len(MAGIC) + 16),
        f"{CORRUPT}: `signature length` is 33, not 0 or 32",
    ),
    "flip_checksum": (_flip(GOOD, len(MAGIC) + 24), CHECKSUM),
    "flip_signature": (_flip(GOOD, HEADER + 7), CHECKSUM),
    "flip_manifest": (_flip(GOOD, BODY + 3), CHECKSUM),
    "flip_payload_start": (_flip(GOOD, BODY + M), CHECKSUM),
    "flip_payload_middle": (_flip(GOOD, BODY + M + len(PAYLOAD) // 2), CHECKSUM),
    "flip_payload_end": (_flip(GOOD, len(GOOD) - 1), CHECKSUM),
    "huge_manifest_length": (
        MAGIC + (2**63).to_bytes(8, "little") + bytes(16 + 32),
        f"{CORRUPT}: `manifest length` is {2**63}, more than {1 << 24}",
    ),
    "format_1": (b"ffi-core export 1\n" + GOOD[len(MAGIC) :], "ffi-core export format 1, which"),
    "format_9": (
        b"ffi-core export 9\n" + GOOD[len(MAGIC) :],
        "format 9; this ffi-core reads formats 2 and 3",
    ),
    # the manifest as a whole
    "not_utf8": (_sealed(b"\xff{}"), "`manifest` is not UTF-8: 'utf-8' codec can't decode"),
    "not_json": (_sealed("{'targets'"), "`manifest` is not JSON: Expecting property name"),
    "deep_nesting": (
        _sealed("[" * 100_000 + "]" * 100_000),
        "`manifest` is nested deeper than 64 levels",
    ),
    "huge_int": (
        _sealed("{" + '"targets": ' + "9" * 5000 + "}"),
        "`manifest` is not JSON: Exceeds",
    ),
    "not_a_dict": (
        _sealed("[1]"),
        "`manifest` must be a dict with the one key 'targets', got list",
    ),
    "extra_key": (
        _sealed('{"targets": {}, "x": 1}'),
        "with the one key 'targets', got ['targets', 'x']",
    ),
    "targets_not_dict": (
        _sealed('{"targets": []}'),
        "`targets` must be a dict of at most 4096 items, got list",
    ),
    "chains_not_list": (
        _sealed(_manifest(**{TARGET: {}})),
        f"`targets[{TARGET!r}]` must be a list of 1 to 64",
    ),
    "no_chains": (
        _sealed(_manifest(**{TARGET: []})),
        f"`targets[{TARGET!r}]` must be a list of 1 to 64 items, got 0",
    ),
    "chain_not_list": (
        _sealed(_manifest(**{TARGET: [5]})),
        f"`targets[{TARGET!r}][0]` must be a list of 1 to 16",
    ),
    "step_not_dict": (_sealed(_manifest(**{TARGET: [[5]]})), f"`{WHERE}` must be a dict, got int"),
    "too_many_steps": (
        _sealed(_manifest(**{TARGET: [[STEP] * 17]})),
        "must be a list of 1 to 16 items, got 17",
    ),
    "kind_not_str": (
        _with(kind=3),
        f"`{WHERE}.kind` must be a str of letters, digits, '_' and '.'",
    ),
    "kind_a_path": (_with(kind="../evil"), f"`{WHERE}.kind` must be a str of letters, digits"),
    "field_name": (
        _with(**{"a b": 1}),
        f"`{WHERE}` has a field name that is not an identifier: 'a b'",
    ),
    "value_deep": (
        _with(hint=json.loads('{"tuple": [' * 20 + "1" + "]}" * 20)),
        f"`{WHERE}.hint" + "[0]" * 17 + "` is nested deeper than 16 levels",
    ),
    "value_unknown_dict": (
        _with(hint={"x": 1}),
        f"`{WHERE}.hint` must be recipe data (a dict with",
    ),
    "value_bad_dtype": (
        _with(hint={"dtype": "O"}),
        f"`{WHERE}.hint.dtype` must be a NumPy dtype string",
    ),
    "value_bad_scalar": (
        _with(hint={"scalar": "|i1", "value": 1000}),
        f"`{WHERE}.hint.value` 1000 is not a int8: Python integer 1000 out of bounds for int8",
    ),
    "value_bad_pair": (
        _with(hint={"dict": [[1, 2]]}),
        f"`{WHERE}.hint[0]` must be a [str key, value] pair",
    ),
    # the fields the rebuilder declares
    "missing_field": (
        _sealed(_manifest({k: v for k, v in STEP.items() if k != "digest"})),
        f"`{WHERE}.digest` is missing",
    ),
    "extra_field": (_with(module="evil"), None),  # 'module' is tolerated, never read
    # the distribution that made the step: quoted in messages only, so checked
    "distribution": (_with(distribution="toy-ffi"), None),
    "distribution_type": (_with(distribution=5), f"`{WHERE}.distribution` {DISTRIBUTION}, got 5"),
    "distribution_command": (
        _with(distribution='x"; import os'),
        f"`{WHERE}.distribution` {DISTRIBUTION}, got 'x\"; import os'",
    ),
    "distribution_long": (
        _with(distribution="a" * 101),
        f"`{WHERE}.distribution` {DISTRIBUTION}, got '{'a' * 79}",
    ),
    "unknown_field": (
        _with(code="x"),
        f"`{WHERE}` has fields its kind '{KIND}' does not: ['code']",
    ),
    "digest_type": (_with(digest=5), f"`{WHERE}.digest` must be a hex digest, got 5"),
    "digest_text": (
        _with(digest="../../etc"),
        f"`{WHERE}.digest` must be a hex digest, got '../../etc'",
    ),
    "kernel_type": (
        _with(kernel=["x"]),
        f"`{WHERE}.kernel` must be a str of at most 4096 characters",
    ),
    "huge_rank": (_with(inputs=[["float32", 100_000]]), f"`{WHERE}.inputs` must be {SIG}, got"),
    "negative_rank": (_with(outputs=[["float32", -1]]), f"`{WHERE}.outputs` must be {SIG}, got"),
    "bool_rank": (_with(inputs=[["float32", True]]), f"`{WHERE}.inputs` must be {SIG}, got"),
    "unknown_dtype": (_with(inputs=[["float8_e4m3", 1]]), f"`{WHERE}.inputs` must be {SIG}, got"),
    "dtype_code": (_with(inputs=[[11, 1]]), f"`{WHERE}.inputs` must be {SIG}, got"),
    "sig_not_pair": (_with(inputs=[["float32"]]), f"`{WHERE}.inputs` must be {SIG}, got"),
    "many_inputs": (_with(inputs=[["float32", 1]] * 1025), f"`{WHERE}.inputs` must be {SIG}, got"),
    "batched_type": (
        _with(batched=[1]),
        f"`{WHERE}.batched` must be None or a list of one item per item of 'inputs', each a "
        "bool, got [1]",
    ),
    "batched_short": (
        _with(inputs=[["float32", 1], ["float32", 1]], batched=[True]),
        f"`{WHERE}.batched` must have one item per item of `{WHERE}.inputs` (2), got 1",
    ),
    "batched_long": (
        _with(batched=(True, False)),
        f"`{WHERE}.batched` must have one item per item of `{WHERE}.inputs` (1), got 2",
    ),
    "hint_type": (_with(hint="yes"), f"`{WHERE}.hint` must be a bool, got 'yes'"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_corrupt_or_crafted_blob_is_an_export_error_naming_the_field(case):
    blob, message = CASES[case]
    RAN.clear()
    if message is None:  # accepted: the rebuilder runs
        with pytest.raises(MissingKernelError, match=re.escape("checks passed")):
            ffi_core.deserialize(blob, key=KEY)
        assert len(RAN) == 1
        return
    with pytest.raises(ExportError, match=re.escape(message)):
        ffi_core.deserialize(blob, key=KEY)
    assert RAN == []


def test_the_good_blob_reaches_the_rebuilder_with_decoded_values():
    RAN.clear()
    with pytest.raises(MissingKernelError, match=re.escape("checks passed")):
        ffi_core.deserialize(GOOD, key=KEY)
    assert RAN == [STEP]


def test_a_crafted_payload_that_jax_refuses_is_an_export_error():
    with pytest.raises(ExportError, match=re.escape("the blob's JAX payload cannot be read: ")):
        ffi_core.deserialize(pack(_manifest(), b"\x08\0\0\0" + bytes(60), KEY), key=KEY)


FLIPPED = """
import sys, ffi_core
from ffi_core.export import _blob
blob = open(sys.argv[1], "rb").read()
header = _blob.HEADER
size = int.from_bytes(blob[len(_blob.MAGIC):len(_blob.MAGIC) + 8], "little")
start = header + size
for at in range(start, len(blob), max(1, (len(blob) - start) // 40)):
    bad = blob[:at] + bytes([blob[at] ^ 0x10]) + blob[at + 1:]
    try:
        ffi_core.deserialize(bad)
    except ffi_core.ExportError as exc:
        assert "corrupt or truncated blob" in str(exc), exc
    else:
        raise SystemExit(f"byte {at} flipped was read")
print("refused")
"""


def test_a_flipped_byte_in_the_jax_payload_is_refused_without_crashing(tmp_path):
    # jaxlib's StableHLO reader can crash the process on such bytes: the
    # checksum refuses them before it sees them. In a child process, so a
    # crash would show as its exit status.
    import jax.numpy as jnp

    blob_file = tmp_path / "blob.bin"
    blob_file.write_bytes(ffi_core.serialize(ffi_core.export(jnp.sin)(X)))
    result = subprocess.run(
        [sys.executable, "-c", FLIPPED, str(blob_file)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "refused\n"), result.stderr[-3000:]


EVIL = textwrap.dedent(
    """
    import pathlib
    pathlib.Path("evil_was_imported").write_text("yes")
    """
)

READ = """
import sys, ffi_core
for name in sys.argv[1:]:
    try:
        ffi_core.deserialize(open(name, "rb").read())
    except ffi_core.MissingKernelError as exc:
        print(exc)
print("evil" in sys.modules)
"""


def test_a_blob_never_chooses_what_is_imported(tmp_path):
    # Under `python -c` the working directory is sys.path[0]: a module there
    # named by a blob (as "module" or as the kind) would be importable.
    (tmp_path / "evil.py").write_text(EVIL)
    names = []
    for k, step in enumerate([{"kind": "x", "module": "evil"}, {"kind": "evil"}]):
        target = ffi_core.bridge.target_name("ffi_core_tests.evil", k)
        record_recipe(target, step)
        call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(X.shape, X.dtype))
        (tmp_path / f"{k}.bin").write_bytes(ffi_core.serialize(ffi_core.export(call)(X)))
        names.append(f"{k}.bin")
    result = subprocess.run(
        [sys.executable, "-c", READ, *names],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert not (tmp_path / "evil_was_imported").exists()
    assert lines[-1] == "False"
    for line, kind in zip(lines[:2], ["x", "evil"], strict=True):
        assert (
            f"which this process cannot make: no rebuilder for recipe steps of kind {kind!r}: "
            in line
        )
        assert line.endswith(
            f"declares it as an entry point named {kind!r} in the group 'ffi_core.rebuilders'"
        )
