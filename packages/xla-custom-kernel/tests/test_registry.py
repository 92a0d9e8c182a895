import re

import pytest
import xla_custom_kernel as xck
from xla_custom_kernel import XLACustomKernel


def test_kernels_are_registered_in_creation_order(name):
    a = XLACustomKernel(name + "_a")
    b = XLACustomKernel(name + "_b")
    kernels = xck.registered_kernels()
    assert kernels[name + "_a"] is a
    assert kernels[name + "_b"] is b
    names = list(kernels)
    assert names.index(name + "_a") < names.index(name + "_b")


def test_registered_kernels_is_a_copy(name):
    XLACustomKernel(name)
    kernels = xck.registered_kernels()
    del kernels[name]
    assert name in xck.registered_kernels()


def test_registered_kernels_by_tags(name):
    a = XLACustomKernel(name + "_a")
    b = XLACustomKernel(name + "_b")
    c = XLACustomKernel(name + "_c")
    a.def_tags(name + "_sparse", name + "_snn")
    b.def_tags(name + "_snn", name + "_dense", name + "_snn")  # repeated tags are kept once
    assert a.tags == (name + "_sparse", name + "_snn")
    assert b.tags == (name + "_snn", name + "_dense")
    assert c.tags == ()
    assert xck.registered_kernels(tags=name + "_sparse") == {name + "_a": a}
    assert xck.registered_kernels(tags=[name + "_snn"]) == {name + "_a": a, name + "_b": b}
    assert xck.registered_kernels(tags=(name + "_dense", name + "_sparse")) == {
        name + "_a": a,
        name + "_b": b,
    }
    assert xck.registered_kernels(tags=name + "_none") == {}
    assert xck.registered_kernels(tags=[]) == {}


def test_def_tags_replaces_the_tags_set_before(name):
    # As the seed API's def_tags does.
    k = XLACustomKernel(name)
    k.def_tags("a", "b")
    k.def_tags("c")
    assert k.tags == ("c",)
    k.def_tags()
    assert k.tags == ()


def test_def_tags_refuses_non_str(name):
    k = XLACustomKernel(name)
    with pytest.raises(TypeError, match=re.escape("tags must be str, got <class 'int'>")):
        k.def_tags("a", 1)
    assert k.tags == ()


def test_get_kernel(name):
    k = XLACustomKernel(name)
    assert xck.get_kernel(name) is k


def test_get_kernel_unknown_name(name):
    XLACustomKernel(name)
    known = ", ".join(map(repr, xck.registered_kernels()))
    with pytest.raises(
        KeyError,
        match=re.escape(f"no kernel named {name + '_missing'!r}; known kernels: {known}"),
    ):
        xck.get_kernel(name + "_missing")
