"""function_digest: equal for the same code and captured values, different
when anything a compiled kernel would freeze differs."""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
from ffi_core.bridge import address_bound_values, function_digest


def _factory(value):
    def kernel(x):
        return value * x

    return kernel


def test_closures_differ_by_value():
    assert function_digest(_factory(2)) == function_digest(_factory(2))
    assert function_digest(_factory(2)) != function_digest(_factory(3))
    assert function_digest(_factory(2)) != function_digest(_factory(2.0))


def test_closed_over_arrays_count_by_content():
    a, b = np.arange(4.0), np.arange(4.0)
    assert function_digest(_factory(a)) == function_digest(_factory(b))
    b[0] = 9
    assert function_digest(_factory(a)) != function_digest(_factory(b))
    assert function_digest(_factory(a)) != function_digest(_factory(a.astype(np.float32)))


def _module_with(source: str) -> types.ModuleType:
    module = types.ModuleType("kernels")
    exec(source, module.__dict__)
    return module


def test_globals_the_code_reads_count():
    # A kernel redefined after a global changed compiles to other code.
    source = (
        "def kernel(x):\n    return SCALE * helper(x)\n\ndef helper(x):\n    return x + OFFSET\n"
    )
    first = _module_with("SCALE = 2\nOFFSET = 1\n" + source)
    same = _module_with("SCALE = 2\nOFFSET = 1\n" + source)
    scale = _module_with("SCALE = 3\nOFFSET = 1\n" + source)
    offset = _module_with("SCALE = 2\nOFFSET = 5\n" + source)  # through the called function
    digests = [function_digest(m.kernel) for m in (first, same, scale, offset)]
    assert digests[0] == digests[1]
    assert len({digests[0], digests[2], digests[3]}) == 3


def test_dispatchers_are_followed_into_their_python_function():
    class Dispatcher:  # what Numba's dispatchers expose
        def __init__(self, py_func):
            self.py_func = py_func

    source = "def kernel(x):\n    return inner(x)\n"
    one = _module_with(source)
    two = _module_with(source)
    one.inner = Dispatcher(_factory(1))
    two.inner = Dispatcher(_factory(2))
    assert function_digest(one.kernel) != function_digest(two.kernel)
    two.inner = Dispatcher(_factory(1))
    assert function_digest(one.kernel) == function_digest(two.kernel)


def test_code_and_names_count():
    def add(x):
        return x + 1

    def sub(x):
        return x - 1

    assert function_digest(add) != function_digest(sub)


def test_recursion_terminates():
    module = _module_with("def f(n):\n    return 1 if n == 0 else f(n - 1)\n")
    assert function_digest(module.f) == function_digest(module.f)


def test_empty_cell():
    def outer():
        def inner():
            return later

        digest = function_digest(inner)
        later = 1
        return digest, function_digest(inner)

    before, after = outer()
    assert before != after


_IN_A_PROCESS = """
import numpy as np
from ffi_core.bridge import address_bound_values, function_digest

TABLE = np.arange(3)

def kernel(x):
    return np.sum(TABLE) * x

print(function_digest(kernel))
"""


def test_same_in_every_process():
    runs = {
        subprocess.run(
            [sys.executable, "-c", _IN_A_PROCESS], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(runs) == 1


class _Opaque:
    """An object whose repr holds its address (object's default repr)."""


def test_address_bound_values_name_the_capture():
    marker = _Opaque()
    assert address_bound_values(_factory(2)) == []
    assert address_bound_values(_factory(np.arange(3))) == []
    found = address_bound_values(_factory(marker))
    assert found == [
        f"closure value read by '_factory.<locals>.kernel' = <{__name__}._Opaque object at 0x...>"
    ]


def test_address_bound_values_follow_globals():
    module = _module_with("import ctypes\nLIB = object()\ndef kernel(x):\n    return LIB\n")
    assert address_bound_values(module.kernel) == [
        "global 'LIB' read by 'kernel' = <object object at 0x...>"
    ]


def test_address_bound_values_still_tell_objects_apart():
    # Within a process two such objects must never share a digest.
    assert function_digest(_factory(_Opaque())) != function_digest(_factory(_Opaque()))
