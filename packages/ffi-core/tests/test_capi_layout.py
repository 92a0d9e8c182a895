"""The ctypes mirror in ffi_core.abi._capi against the c_api.h of the installed jaxlib.

A small C program, generated from the ctypes structures themselves, prints
``sizeof``/``offsetof`` of every (nested) field, the ``*_STRUCT_SIZE`` constants
and the enumerator values; the tests compare them with ctypes.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import ffi_core
import pytest
from ffi_core.abi import capi as C

STRUCTS: dict[str, type[ctypes.Structure]] = {
    name: obj
    for name in C.__all__
    if isinstance(obj := getattr(C, name), type) and issubclass(obj, ctypes.Structure)
}

# Names that newer headers changed without changing the layout (jaxlib 0.12:
# the internal extension, GetMessage -> GetDetails, ExecutionContext ->
# InvokeContext). The mirror keeps the older names; the C program uses
# whichever the installed header declares.
RENAMED = {
    "XLA_FFI_Extension_Base": "XLA_FFI_InternalExtension",
    "XLA_FFI_Extension_Type": "XLA_FFI_InternalExtension_Type",
    "XLA_FFI_Error_GetMessage_Args": "XLA_FFI_Error_GetDetails_Args",
    "XLA_FFI_Error_GetMessage": "XLA_FFI_Error_GetDetails",
    "XLA_FFI_ExecutionContext_Get": "XLA_FFI_InvokeContext_Get",
}

# Python enum -> prefix of its C enumerator names.
ENUMS: dict[type[enum.IntEnum], str] = {
    C.AttrType: "XLA_FFI_AttrType_",
    C.DataType: "XLA_FFI_DataType_",
    C.ErrorCode: "XLA_FFI_Error_Code_",
    C.ExecutionStage: "XLA_FFI_ExecutionStage_",
}
# Enumerators whose C names follow no prefix rule.
IRREGULAR_ENUMERATORS = {
    "ExtensionType.METADATA": ("XLA_FFI_Extension_Metadata", C.ExtensionType.METADATA),
    "HandlerTraits.COMMAND_BUFFER_COMPATIBLE": (
        "XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE",
        C.HandlerTraits.COMMAND_BUFFER_COMPATIBLE,
    ),
}
# C enum types, each mirrored as a C int (ffi_core.abi._capi._c_enum).
C_ENUM_TYPES = [
    "XLA_FFI_DataType",
    "XLA_FFI_Error_Code",
    "XLA_FFI_ExecutionStage",
    "XLA_FFI_Extension_Type",
    "XLA_FFI_ArgType",
    "XLA_FFI_RetType",
    "XLA_FFI_AttrType",
]


@functools.cache
def _header_text() -> str:
    header = ffi_core.abi.c_api_header()
    return "" if header is None else header.read_text()


def _c(name: str) -> str:
    """The C spelling of a mirrored identifier in the installed header."""
    text = _header_text()
    if name in RENAMED and not re.search(rf"\b{name}\b", text):
        return RENAMED[name]
    return name


def _c_path(path: str) -> str:
    return ".".join(_c(part) for part in path.split("."))


def _field_paths(struct: type[ctypes.Structure], prefix: str = "") -> Iterator[str]:
    """Every field of ``struct`` as a dotted path, nested structures included."""
    for name, ctype in struct._fields_:
        path = f"{prefix}{name}"
        yield path
        if isinstance(ctype, type) and issubclass(ctype, ctypes.Structure):
            yield from _field_paths(ctype, f"{path}.")


def _ctypes_field_size(struct: type[ctypes.Structure], path: str) -> int:
    current: type = struct
    for name in path.split("."):
        current = dict(current._fields_)[name]
    return ctypes.sizeof(current)


def _struct_traits() -> dict[str, str]:
    """``{struct: last_field}`` of the mirrored structs, from the header's
    XLA_FFI_DEFINE_STRUCT_TRAITS lines (names as the mirror spells them)."""
    back = {new: old for old, new in RENAMED.items()}
    pairs = re.findall(r"XLA_FFI_DEFINE_STRUCT_TRAITS\(\s*(\w+),\s*(\w+)\s*\);", _header_text())
    traits = {back.get(struct, struct): back.get(last, last) for struct, last in pairs}
    return {struct: last for struct, last in traits.items() if struct in STRUCTS}


def _extended_in_header(name: str) -> bool:
    """True when the header's struct ends past the mirrored prefix: its last
    field (per XLA_FFI_DEFINE_STRUCT_TRAITS) is one the mirror does not declare."""
    last = _struct_traits().get(name)
    return last is not None and last not in dict(STRUCTS[name]._fields_)


def _c_program() -> str:
    lines = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        '#include "xla/ffi/api/c_api.h"',
        "",
        "int main(void) {",
    ]
    for name, struct in STRUCTS.items():
        c_name = _c(name)
        lines.append(f'  printf("sizeof {name} %zu\\n", sizeof({c_name}));')
        for path in _field_paths(struct):
            c_path = _c_path(path)
            lines += [
                f'  printf("offsetof {name}.{path} %zu\\n", offsetof({c_name}, {c_path}));',
                f'  printf("sizeof {name}.{path} %zu\\n", sizeof((({c_name}*)0)->{c_path}));',
            ]
    for name in _struct_traits():
        lines.append(f'  printf("struct_size {name} %zu\\n", (size_t){_c(name)}_STRUCT_SIZE);')
    for py_enum, prefix in ENUMS.items():
        for member in py_enum:
            key = f"{py_enum.__name__}.{member.name}"
            lines.append(f'  printf("enum {key} %d\\n", (int){prefix}{member.name});')
    for key, (c_name, _) in IRREGULAR_ENUMERATORS.items():
        lines.append(f'  printf("enum {key} %d\\n", (int){c_name});')
    for c_type in C_ENUM_TYPES:
        lines.append(f'  printf("sizeof {c_type} %zu\\n", sizeof({_c(c_type)}));')
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def _skip_without_header() -> Path:
    header = ffi_core.abi.c_api_header()
    if header is None:
        pytest.skip("the installed jaxlib ships without xla/ffi/api/c_api.h")
    return header


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """``{"offsetof XLA_FFI_Buffer.data": 24, ...}`` as printed by the compiled program."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH to compile against c_api.h")
    include_dir = _skip_without_header().parents[3]
    work: Path = tmp_path_factory.mktemp("capi_layout")
    source = work / "layout.c"
    binary = work / "layout"
    source.write_text(_c_program())
    compiled = subprocess.run(
        [compiler, "-std=c11", "-I", str(include_dir), "-o", str(binary), str(source)],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, f"{compiler} failed on {source}:\n{compiled.stderr}"
    result = subprocess.run([str(binary)], check=True, capture_output=True, text=True)
    layout: dict[str, int] = {}
    for line in result.stdout.splitlines():
        key, value = line.rsplit(" ", 1)
        layout[key] = int(value)
    return layout


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_field_offsets_and_sizes_match_header(name: str, c_layout: dict[str, int]) -> None:
    struct = STRUCTS[name]
    paths = list(_field_paths(struct))
    expected = {
        path: (c_layout[f"offsetof {name}.{path}"], c_layout[f"sizeof {name}.{path}"])
        for path in paths
    }
    actual = {path: (C.offset_of(struct, path), _ctypes_field_size(struct, path)) for path in paths}
    assert actual == expected


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_struct_size_matches_header(name: str, c_layout: dict[str, int]) -> None:
    c_size = c_layout[f"sizeof {name}"]
    if _extended_in_header(name):
        # e.g. XLA_FFI_Api in a newer jaxlib: the mirror covers a prefix, which
        # the offsets test checks; XLA reads only struct_size bytes of it.
        assert c_size > C.struct_size(STRUCTS[name])
    else:
        assert C.struct_size(STRUCTS[name]) == c_size


def test_struct_traits_cover_the_mirrored_structs() -> None:
    _skip_without_header()
    # Every mirrored struct versioned by struct_size has its traits in the header.
    with_size = {name for name, s in STRUCTS.items() if s._fields_[0][0] == "struct_size"}
    assert with_size <= set(_struct_traits())


@pytest.mark.parametrize(("name", "last_field"), sorted(_struct_traits().items()))
def test_struct_size_macro_matches_header(
    name: str, last_field: str, c_layout: dict[str, int]
) -> None:
    # XLA_FFI_<name>_STRUCT_SIZE: what ffi_core writes into struct_size fields.
    struct = STRUCTS[name]
    if _extended_in_header(name):
        assert c_layout[f"struct_size {name}"] > C.struct_size(struct)
    else:
        assert C.struct_size(struct, last_field) == c_layout[f"struct_size {name}"]


@pytest.mark.parametrize("py_enum", list(ENUMS), ids=lambda e: e.__name__)
def test_enum_values_match_header(py_enum: type[enum.IntEnum], c_layout: dict[str, int]) -> None:
    expected = {m.name: c_layout[f"enum {py_enum.__name__}.{m.name}"] for m in py_enum}
    assert {m.name: int(m) for m in py_enum} == expected


@pytest.mark.parametrize("py_enum", list(ENUMS), ids=lambda e: e.__name__)
def test_enum_members_exist_in_header(py_enum: type[enum.IntEnum]) -> None:
    # Newer headers may add enumerators; the mirror must not invent any.
    _skip_without_header()
    in_header = set(re.findall(rf"\b{ENUMS[py_enum]}(\w+)\s*=", _header_text()))
    assert set(py_enum.__members__) <= in_header


@pytest.mark.parametrize("key", sorted(IRREGULAR_ENUMERATORS))
def test_irregular_enumerators_match_header(key: str, c_layout: dict[str, int]) -> None:
    assert int(IRREGULAR_ENUMERATORS[key][1]) == c_layout[f"enum {key}"]


@pytest.mark.parametrize("c_type", C_ENUM_TYPES)
def test_enums_are_int_sized(c_type: str, c_layout: dict[str, int]) -> None:
    assert c_layout[f"sizeof {c_type}"] == ctypes.sizeof(ctypes.c_int)


@pytest.mark.parametrize(
    ("struct", "path", "offset"),
    [
        (C.XLA_FFI_CallFrame, "args.args", 72),
        (C.XLA_FFI_CallFrame, "rets.rets", 112),
        (C.XLA_FFI_Metadata, "api_version.minor_version", 28),
        (C.XLA_FFI_Metadata_Extension, "extension_base.type", 8),
    ],
    ids=["CallFrame.args.args", "CallFrame.rets.rets", "Metadata.minor", "MetadataExt.type"],
)
def test_offset_of_nested_path(struct: type[ctypes.Structure], path: str, offset: int) -> None:
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        pytest.skip("the literal offsets are those of a 64-bit ABI")
    assert C.offset_of(struct, path) == offset


def test_struct_size_up_to_a_field() -> None:
    args = C.XLA_FFI_Error_Create_Args
    assert C.struct_size(args, "errc") == args.errc.offset + ctypes.sizeof(ctypes.c_int)
    assert C.struct_size(args) == ctypes.sizeof(args)
