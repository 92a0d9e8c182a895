"""The autotune cache trusts nothing it reads back: bad files, entries and
messages from process 0 are misses with a warning naming them, never errors."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import re
import stat

import jax
import jax.numpy as jnp
import pytest
import xla_custom_kernel as xck
from ffi_core import CacheDirWarning
from kernel_bench import autotune
from kernel_bench._awake import keep_cpus_awake
from kernel_bench._cli import main
from kernel_bench.autotune import _cache as _autotune_cache
from kernel_bench.autotune import _decide as _autotune_decide
from kernel_bench.autotune import _distributed as _autotune_distributed

_names = itertools.count()


@pytest.fixture(autouse=True)
def _known_costs(autotune_costs):
    # Deterministic timing: "sum" is measured ten times faster than "twice",
    # so every decision is settled and read back from the disk as it is.
    autotune_costs.update(twice=100.0, sum=10.0)


_AGAIN = (
    ". It counts as not cached: the decision is measured again where needed and the file rewritten"
)


def _op():
    op = xck.XLACustomKernel(f"autotune_cache_test_{next(_names)}")
    op.def_kernel("twice", "cpu", lambda outs: lambda x: 2 * x)
    op.def_kernel("sum", "cpu", lambda outs: lambda x: x + x)
    return op


def _explain(op):
    x = jnp.ones(4, jnp.float32)
    return autotune.explain(op, x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


def _forget(monkeypatch):
    monkeypatch.setattr(_autotune_decide, "_memory", {})
    monkeypatch.setattr(_autotune_cache, "_disk", {})


def _cache_file():
    fingerprint = autotune.fingerprint("cpu")
    return autotune.cache_dir() / _autotune_cache._file_name(fingerprint)


def _decided(monkeypatch):
    """An operation with one decision on disk: the operation, the decision, the file."""
    op = _op()
    decision = _explain(op)
    assert decision.source == "measured"
    _forget(monkeypatch)
    return op, decision, _cache_file()


def _string_time(r):
    r["candidates"][0]["us_per_call"] = "12.5"


def _nan_time(r):
    r["candidates"][0]["us_per_call"] = float("nan")


def _negative_time(r):
    r["candidates"][1]["times_us"][0] = -1.0


def _unknown_backend(r):
    r.update(backend="os.system", candidates=[], calls_per_run={})


def _other_key(r):
    r["key"] = "0" * 32


def _bool_count(r):
    r["calls_per_run"] = {"twice": True}


def _long_detail(r):
    r["candidates"][0]["detail"] = "x" * 200_000


def _deep_candidate(r):
    r["candidates"][0] = [[[[[]]]]]


ENTRIES = {
    # name: (change to the stored record or a replacement, problem, seen by `show`)
    "string decision": ("twice", "a decision must be an object, got a string", True),
    "string time": (_string_time, "the time of candidate 0 must be a number, got '12.5'", True),
    "NaN time": (_nan_time, "the time of candidate 0 must be a finite number >= 0, got nan", True),
    "negative time": (
        _negative_time,
        "each time of candidate 1 must be a finite number >= 0, got -1.0",
        True,
    ),
    "missing field": (lambda r: r.pop("backend"), "a decision lacks the field(s) 'backend'", True),
    "unknown field": (
        lambda r: r.update(module="os"),
        "a decision has unknown field(s) 'module'",
        True,
    ),
    "unknown backend": (
        _unknown_backend,
        "it names backend 'os.system', which is not registered (registered: 'twice', 'sum')",
        False,
    ),
    "another call's key": (_other_key, "it is a decision of key '{zeros}', not '{key}'", True),
    "count not an integer": (
        _bool_count,
        "the calls per run must map candidates to positive integers, got {'twice': True}",
        True,
    ),
    "huge detail": (
        _long_detail,
        "the detail of candidate 0 must be a string of at most 100000 characters, got "
        f"{repr('x' * 200_000)[:57]}...",
        True,
    ),
    "nested candidate": (_deep_candidate, "candidate 0 must be an object, got a list", True),
}


@pytest.mark.parametrize("case", ENTRIES, ids=list(ENTRIES))
def test_a_bad_entry_is_a_miss_with_a_warning(case, monkeypatch, capsys):
    change, problem, shown = ENTRIES[case]
    op, decision, path = _decided(monkeypatch)
    content = json.loads(path.read_text())
    if callable(change):
        change(content["decisions"][decision.key])
    else:
        content["decisions"][decision.key] = change
    path.write_text(json.dumps(content))
    problem = problem.replace("{zeros}", "0" * 32).replace("{key}", decision.key)
    message = f"kernel-bench ignores the autotune decision {decision.key!r} in {path}: {problem}"

    if shown:
        with pytest.warns(autotune.AutotuneWarning, match=f"^{re.escape(message + _AGAIN)}$"):
            assert main(["autotune", "show"]) == 0
        assert capsys.readouterr().out == f"no autotune decisions in {autotune.cache_dir()}\n"
    else:  # `show` knows no registered backends and no key asked for: it shows it as stored
        assert main(["autotune", "show"]) == 0
        assert "choice: os.system" in capsys.readouterr().out
    with pytest.warns(autotune.AutotuneWarning, match=f"^{re.escape(message + _AGAIN)}$"):
        again = _explain(op)
    assert again.source == "measured"
    assert autotune.stats()["measured"] == 2

    # The entry was rewritten: the next process reads it without a warning.
    _forget(monkeypatch)
    assert _explain(op).source == "disk"
    assert main(["autotune", "show"]) == 0
    assert "(read from the autotune cache (" in capsys.readouterr().out


def _fingerprint_without_cpu():
    fingerprint = autotune.fingerprint("cpu")
    del fingerprint["cpu"]
    return json.dumps({"fingerprint": fingerprint, "decisions": {}}).encode()


def _another_machine():
    fingerprint = {**autotune.fingerprint("cpu"), "cpu": "another CPU"}
    return json.dumps({"fingerprint": fingerprint, "decisions": {}}).encode()


def _idle_of_another_kind():
    fingerprint = {**autotune.fingerprint("cpu"), "idle": "halted"}
    return json.dumps({"fingerprint": fingerprint, "decisions": {}}).encode()


def _decisions_as_list():
    return json.dumps({"fingerprint": autotune.fingerprint("cpu"), "decisions": []}).encode()


FILES = {
    # name: (the file's content, problem)
    "not JSON": (lambda: b"{not json", "it is not JSON (line 1, column 2)"),
    "not UTF-8": (lambda: b'{"\xff": 1}', "it is not UTF-8 text"),
    "empty": (lambda: b"", "it is not JSON (line 1, column 1)"),
    "list at top level": (
        lambda: b"[]",
        "it holds a list, not an object of 'fingerprint' and 'decisions'",
    ),
    "string at top level": (
        lambda: b'"decisions"',
        "it holds a string, not an object of 'fingerprint' and 'decisions'",
    ),
    "deep nesting": (
        lambda: b"[" * 200_000 + b"]" * 200_000,
        "it is nested too deeply to be a decision file",
    ),
    "integer too long": (
        lambda: b"1" * 5000,
        "it is not JSON this module writes (Exceeds the limit (4300 digits) for integer string "
        "conversion: value has 5000 digits; use sys.set_int_max_str_digits() to increase the "
        "limit)",
    ),
    "huge file of garbage": (lambda: os.urandom((1 << 20) + 1), "it is larger than 1 MiB"),
    "fingerprint without a field": (
        _fingerprint_without_cpu,
        "its fingerprint lacks the field(s) 'cpu'",
    ),
    "another machine's fingerprint": (
        _another_machine,
        "its fingerprint is not the one its name stands for",
    ),
    "decisions not an object": (_decisions_as_list, "its decisions are a list, not an object"),
    "an idle field this module does not write": (
        _idle_of_another_kind,
        "its fingerprint is not one this module writes: ",
    ),
}


@pytest.mark.parametrize("case", FILES, ids=list(FILES))
def test_a_bad_file_is_a_miss_with_a_warning_and_is_rewritten(case, monkeypatch, capsys):
    content, problem = FILES[case]
    monkeypatch.setattr(_autotune_cache, "_MAX_FILE_BYTES", 1 << 20)
    op, decision, path = _decided(monkeypatch)
    path.write_bytes(content())
    message = f"kernel-bench ignores the autotune cache file {path}: {problem}{_AGAIN}"
    if problem.endswith(": "):  # the fingerprint itself follows, shortened
        message = f"kernel-bench ignores the autotune cache file {path}: {problem}"
        message = f"{re.escape(message)}.*{re.escape(_AGAIN)}"
    else:
        message = re.escape(message)

    with pytest.warns(autotune.AutotuneWarning, match=f"^{message}$"):
        assert main(["autotune", "show"]) == 0
    assert capsys.readouterr().out == f"no autotune decisions in {autotune.cache_dir()}\n"
    with pytest.warns(autotune.AutotuneWarning, match=f"^{message}$"):
        assert _explain(op).source == "measured"

    stored = json.loads(path.read_text())
    assert stored["fingerprint"] == autotune.fingerprint("cpu")
    assert list(stored["decisions"]) == [decision.key]
    _forget(monkeypatch)
    assert _explain(op).source == "disk"


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_what_is_no_file_at_the_name_is_a_miss(kind, monkeypatch, capsys):
    # Neither a crash (a directory) nor a wait for a writer that never comes (a FIFO).
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    op, _, path = _decided(monkeypatch)
    path.unlink()
    path.mkdir() if kind == "directory" else os.mkfifo(path)
    message = re.escape(
        f"kernel-bench ignores the autotune cache file {path}: it is not a regular file{_AGAIN}"
    )
    _forget(monkeypatch)
    with pytest.warns(autotune.AutotuneWarning) as caught:
        assert _explain(op).source == "measured"
    assert re.fullmatch(message, str(caught[0].message))
    if kind == "fifo":  # replaced by the new file
        assert [str(w.message) for w in caught[1:]] == []
        assert list(json.loads(path.read_text())["decisions"]) == [_explain(op).key]
        return
    # A directory the new file cannot replace: said, the decision kept in memory.
    assert "could not write the autotune cache" in str(caught[-1].message)
    with pytest.warns(autotune.AutotuneWarning, match=f"^{message}$"):
        assert main(["autotune", "show"]) == 0
    assert capsys.readouterr().out == f"no autotune decisions in {autotune.cache_dir()}\n"
    assert autotune.clear() == 0  # the directory stays, without an error
    assert path.is_dir()


def test_decisions_measured_with_idle_cpus_kept_awake_are_filed_apart(tmp_path, monkeypatch):
    latency = tmp_path / "cpu_dma_latency"  # stands in for Linux's request file
    latency.write_bytes(b"\xff" * 4)
    op, decision, path = _decided(monkeypatch)
    plain = autotune.fingerprint("cpu")
    assert "idle" not in plain
    with keep_cpus_awake(path=str(latency)) as awake:
        assert awake.held
        kept = autotune.fingerprint("cpu")
        assert kept == {**plain, "idle": "kept awake"}
        # The decision of a process whose CPUs halt is not read for one that
        # keeps them awake: measured again, and kept in a file of its own.
        assert _explain(op).source == "measured"
        awake_file = autotune.cache_dir() / _autotune_cache._file_name(kept)
        assert awake_file != path
        assert json.loads(awake_file.read_text())["fingerprint"] == kept
        _forget(monkeypatch)
        assert _explain(op).source == "disk"
    _forget(monkeypatch)
    assert "idle" not in autotune.fingerprint("cpu")
    assert _explain(op).source == "disk"  # the first file's, untouched
    assert list(json.loads(path.read_text())["decisions"]) == [decision.key]
    assert main(["autotune", "show"]) == 0  # both files' decisions, no warning


def test_decisions_measured_on_fewer_cpus_are_filed_apart(monkeypatch):
    # A process pinned to one CPU (taskset, a container's cpuset) runs a
    # threaded backend on that CPU alone: its ranking is not the machine's.
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this system")
    op, decision, path = _decided(monkeypatch)
    everywhere = autotune.fingerprint("cpu")
    assert everywhere["cpu_count"] == len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    pinned = autotune.fingerprint("cpu")
    assert pinned == {**everywhere, "cpu_count": 1}
    _forget(monkeypatch)
    if everywhere["cpu_count"] > 1:
        assert _explain(op).source == "measured"  # not the other file's decision
        assert autotune.cache_dir() / _autotune_cache._file_name(pinned) != path
    assert list(json.loads(path.read_text())["decisions"]) == [decision.key]


def test_clear_removes_bad_files_and_keeps_good_entries(monkeypatch):
    _, decision, path = _decided(monkeypatch)
    content = json.loads(path.read_text())
    content["decisions"]["f" * 32] = "garbage"
    path.write_text(json.dumps(content))
    assert autotune.clear("some other op") == 0
    assert list(json.loads(path.read_text())["decisions"]) == [decision.key]
    other = path.with_name("cpu-" + "0" * 16 + ".json")
    other.write_text("[]")
    assert autotune.clear() == 1
    assert sorted(p.name for p in autotune.cache_dir().iterdir()) == [".lock"]


def test_clear_counts_only_what_it_removed(monkeypatch):
    # A read-only cache: the file stays with its decisions, and clear says so.
    _, _, path = _decided(monkeypatch)

    def refuse(self, missing_ok=False):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pathlib.Path, "unlink", refuse)
    message = (
        f"kernel-bench could not remove decisions from the autotune cache {path}: Permission denied"
    )
    with pytest.warns(autotune.AutotuneWarning, match=f"^{re.escape(message)}$"):
        assert autotune.clear() == 0
    assert path.is_file()


def test_forget_removes_one_decision_from_disk_and_memory(monkeypatch):
    op, decision, path = _decided(monkeypatch)
    second = _op()
    other = _explain(second)
    assert sorted(json.loads(path.read_text())["decisions"]) == sorted([decision.key, other.key])
    assert _explain(op).source == "disk"  # in memory now
    assert _autotune_decide.forget("cpu", [decision.key]) == 1
    assert list(json.loads(path.read_text())["decisions"]) == [other.key]
    assert [d.key for d in _autotune_decide._memory.values()] == [other.key]
    assert _autotune_decide.forget("cpu", [decision.key]) == 0
    # Neither memory nor the disk holds it: measured again, and written back.
    assert _explain(op).source == "measured"
    assert sorted(json.loads(path.read_text())["decisions"]) == sorted([decision.key, other.key])


def test_writes_replace_the_file_whole_and_merge_other_processes_entries(monkeypatch):
    op, decision, path = _decided(monkeypatch)
    assert stat.S_IMODE(os.stat(autotune.cache_dir()).st_mode) == 0o700
    # Another process wrote a decision after this one read the file.
    other = json.loads(json.dumps({**decision.to_dict(), "key": "e" * 32, "op": "another_op"}))
    content = json.loads(path.read_text())
    content["decisions"]["e" * 32] = other
    second = _op()
    _explain(op)  # read the file (before the other process wrote)
    path.write_text(json.dumps(content))
    _explain(second)
    stored = json.loads(path.read_text())["decisions"]
    assert len(stored) == 3 and stored["e" * 32] == other
    assert not [p for p in autotune.cache_dir().iterdir() if p.name.startswith(".tmp-")]


def test_a_refused_directory_keeps_decisions_in_memory(tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(autotune.CACHE_ENV, str(shared))
    op = _op()
    with pytest.warns(CacheDirWarning) as warned:
        assert _explain(op).source == "measured"
    assert len(warned) == 1
    assert str(warned[0].message) == (
        f"the autotune cache of kernel-bench is not kept on disk: the directory {str(shared)!r} "
        "is refused because group or others may write into it (mode 0777). Use a directory "
        "that only you own and may write (mode 0700), or remove this one so it is created anew."
    )
    assert list(shared.iterdir()) == []
    _forget(monkeypatch)
    assert _explain(op).source == "measured"  # said once per process
    assert main(["autotune", "show"]) == 0
    assert capsys.readouterr().out == f"no autotune decisions in {shared}\n"


def test_the_default_directory_is_under_the_cache_root(tmp_path, monkeypatch):
    monkeypatch.delenv(autotune.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert autotune.cache_dir() == tmp_path / "kernel-bench" / "autotune"
    _explain(_op())
    assert stat.S_IMODE(os.stat(tmp_path / "kernel-bench" / "autotune").st_mode) == 0o700


class _Store:
    """JAX's key-value store as process 1 sees it: process 0 published ``text``."""

    def __init__(self, text):
        self.text = text
        self.asked = []

    def blocking_key_value_get(self, key, timeout_ms):
        self.asked.append(key)
        return self.text

    def key_value_set(self, key, value, allow_overwrite=False):
        raise AssertionError("process 1 publishes nothing")


def _as_process_1(monkeypatch, text):
    store = _Store(text)
    monkeypatch.setattr(_autotune_distributed, "client", lambda: store)
    monkeypatch.setattr(jax, "process_index", lambda *args, **kwargs: 1)
    return store


def _published(decision, change):
    record = decision.to_dict()
    change(record)
    return json.dumps(record)


MESSAGES = {
    # name: (the text process 0 published, given the right decision; problem)
    "not JSON": (lambda d: "{", "it is not JSON (line 1, column 2)"),
    "a string": (lambda d: json.dumps(d.backend), "a decision must be an object, got a string"),
    "null": (lambda d: None, "it must be a JSON text of at most 1048576 characters, got None"),
    "deep nesting": (lambda d: "[" * 200_000, "it is nested too deeply to be a decision"),
    "too long": (
        lambda d: " " * (2 << 20),
        f"it must be a JSON text of at most 1048576 characters, got {repr(' ' * 60)[:57]}...",
    ),
    "string time": (
        lambda d: _published(d, _string_time),
        "the time of candidate 0 must be a number, got '12.5'",
    ),
    "NaN time": (
        lambda d: _published(d, _nan_time),
        "the time of candidate 0 must be a finite number >= 0, got nan",
    ),
    "unknown backend": (
        lambda d: _published(d, _unknown_backend),
        "it names backend 'os.system', which is not registered (registered: 'twice', 'sum')",
    ),
    "another call": (
        lambda d: _published(d, lambda r: r.update(op="another_op")),
        "it is a decision of op 'another_op', not '{op}'",
    ),
}


@pytest.mark.parametrize("case", MESSAGES, ids=list(MESSAGES))
def test_a_bad_message_from_process_0_gives_the_fixed_default(case, monkeypatch):
    text, problem = MESSAGES[case]
    op, decision, _ = _decided(monkeypatch)
    store = _as_process_1(monkeypatch, text(decision))
    kv_key = f"kernel_bench/autotune/{decision.key}"
    message = (
        f"process 1 ignores the autotune decision on {op.name} (float32[4]) under the key "
        f"{kv_key!r} of JAX's key-value store: {problem.replace('{op}', op.name)}. It uses the "
        "fixed default 'twice'"
    )
    with pytest.warns(autotune.AutotuneWarning, match=f"^{re.escape(message)}$"):
        got = _explain(op)
    assert (got.backend, got.source) == ("twice", "fallback")
    assert got.reason == f"process 0's decision under {kv_key!r} is not valid"
    assert store.asked == [kv_key]
    assert "fixed default" in got.describe()


def test_a_good_message_from_process_0_is_used(monkeypatch):
    op, decision, _ = _decided(monkeypatch)
    chosen = "sum" if decision.backend == "twice" else "twice"
    store = _as_process_1(monkeypatch, _published(decision, lambda r: r.update(backend=chosen)))
    got = _explain(op)
    assert (got.backend, got.source) == (chosen, "process 0")
    assert store.asked == [f"kernel_bench/autotune/{decision.key}"]
    assert autotune.stats()["process 0"] == 1


def test_from_dict_checks_every_field():
    with pytest.raises(
        ValueError, match=re.escape("the platform must be one of 'cpu', 'gpu', 'tpu', got 'xpu'")
    ):
        autotune.Decision.from_dict(
            {**autotune.Decision("op", "cpu", "s", "a" * 32, "b").to_dict(), "platform": "xpu"}
        )
    decision = autotune.Decision("op", "cpu", "s", "a" * 32, "b")
    assert autotune.Decision.from_dict(decision.to_dict()) == decision


def test_an_empty_variable_keeps_decisions_in_memory(tmp_path, monkeypatch, capsys):
    # As the other caches' variables: empty means no disk cache.
    monkeypatch.setenv(autotune.CACHE_ENV, "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert autotune.cache_dir() is None
    op = _op()
    assert _explain(op).source == "measured"
    _forget(monkeypatch)
    assert _explain(op).source == "measured"  # nothing was kept on disk
    assert not (tmp_path / "xdg").exists()
    assert main(["autotune", "show"]) == 0
    assert capsys.readouterr().out == (
        "no autotune decisions in memory only ($KERNEL_BENCH_AUTOTUNE_DIR is empty)\n"
    )
