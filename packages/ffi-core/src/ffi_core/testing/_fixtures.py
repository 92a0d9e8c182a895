"""Fixtures that keep a test run's caches out of the user's."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["cache_dir_fixture"]


def cache_dir_fixture(
    *env_vars: str,
    scope: Literal["session", "package", "module", "class", "function"] = "session",
    autouse: bool = True,
    name: str = "cache_dirs",
) -> Any:
    """A pytest fixture pointing each environment variable in ``env_vars``
    at a fresh temporary folder of its own for the fixture's ``scope``.

    Assign it to a name in a ``conftest.py``; handlers and decisions that the
    tests compile or record then go there, never to the user's cache. The
    fixture's value maps each variable to its folder. Pass
    ``"XDG_CACHE_HOME"`` to move everything under :func:`ffi_core.cache_root`.

    Example:
        ``conftest.py`` of a package whose handlers compile at lowering::

            from ffi_core.testing import cache_dir_fixture

            _cache_dirs = cache_dir_fixture("NUMBA_CPU_FFI_CACHE_DIR")

    Args:
        env_vars: the variables naming cache folders.
        scope: the pytest scope; ``"session"`` shares one folder per run,
            ``"function"`` gives each test its own.
        autouse: whether every test gets it without asking.
        name: the fixture's name, for tests that want the folders.

    Raises:
        ValueError: no variable is given.
    """
    import pytest  # a test dependency: imported only when a conftest asks for it

    if not env_vars:
        raise ValueError("`env_vars` must name at least one environment variable, got none")

    def cache_dirs(tmp_path_factory: pytest.TempPathFactory) -> Any:
        with pytest.MonkeyPatch.context() as patch:
            folders = {}
            for var in env_vars:
                folders[var] = tmp_path_factory.mktemp(var.lower().replace("_", "-"))
                patch.setenv(var, str(folders[var]))
            yield folders

    return pytest.fixture(scope=scope, autouse=autouse, name=name)(cache_dirs)
