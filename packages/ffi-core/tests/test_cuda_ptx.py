"""Reading kernel entries and parameter sizes from PTX."""

import re

import pytest
from ffi_core.bridge.cuda import PtxError, ptx_entries, ptx_entry, ptx_params

PTX = (
    ".visible .entry _Z1kPf(\n\t.param .u64 _Z1kPf_param_0,\n"
    "\t.param .align 8 .b8 _Z1kPf_param_1[24],\n\t.param .u32 _Z1kPf_param_2\n)\n{ ret; }\n"
    ".visible .entry second(\n\t.param .f64 second_param_0,\n\t.param .u16 second_param_1\n)\n"
    "{ ret; }"
)


def test_entries_and_params():
    assert ptx_entries(PTX) == ("_Z1kPf", "second")
    assert ptx_params(PTX, "_Z1kPf") == (8, 24, 4)
    assert ptx_params(PTX, "second") == (8, 2)
    one = PTX[: PTX.index(".visible .entry second")]
    assert ptx_entry(one) == "_Z1kPf"
    assert ptx_params(one) == (8, 24, 4)


def test_errors():
    with pytest.raises(PtxError, match=re.escape("expected one .entry in the PTX, found 0: []")):
        ptx_entry("// nothing")
    with pytest.raises(
        PtxError, match=re.escape("expected one .entry in the PTX, found 2: ['_Z1kPf', 'second']")
    ):
        ptx_params(PTX)
    with pytest.raises(
        PtxError, match=re.escape("the PTX has no .entry 'k'; it has ['_Z1kPf', 'second']")
    ):
        ptx_params(PTX, "k")


def test_pointer_qualifiers_and_unreadable_params():
    ptx = (
        ".visible .entry add(\n\t.param .u64 .ptr .global .align 16 add_param_0,\n"
        "\t.param .u64 .ptr .global .align 1 add_param_1,\n\t.param .u32 add_param_2,\n"
        "\t.param .u8 add_param_3\n)\n{ ret; }"
    )
    assert ptx_params(ptx) == (8, 8, 4, 1)
    with pytest.raises(
        PtxError, match=re.escape("cannot read parameter '.param .weird x' of .entry 'k'")
    ):
        ptx_params(".entry k(\n.param .weird x\n)")
