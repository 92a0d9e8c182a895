"""Autotune decisions as records, and the check of one read back.

A decision read from the cache on disk or received from process 0 is not
trusted: :func:`parse_decision` checks it field by field (types, ranges, that
it is the decision of the call asked about, that its backend is one
registered for it) before it is used. A backend name is only ever compared
with the registered names, never imported or called.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from .._config import BACKEND_PLATFORMS
from .._console import render
from .._record import TIE
from ._location import where as cache_where

#: A decision whose winner's rounds spread more than this (interquartile range
#: over median) was measured while the machine was busy (``Decision.busy``).
BUSY_NOISE = 0.2
SOURCES = ("measured", "disk", "process 0", "only backend", "fallback")
STATUSES = ("ok", "failed", "disagrees")
# Bounds on what is read back: a text from process 0, the strings and lists
# in a decision.
_MAX_TEXT_BYTES = 1 << 20
_MAX_NAME = 200
_MAX_TEXT = 100_000
_MAX_ITEMS = 10_000
_KEY = re.compile(r"[0-9a-f]{32}")


class AutotuneWarning(UserWarning):
    """A backend was left out of a decision (it failed, or its results
    disagreed), or a stored decision was ignored (a bad cache file or entry, a
    bad message from process 0)."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One backend in a decision.

    Attributes:
        backend: its name.
        status: ``"ok"`` (timed), ``"failed"`` (raised) or ``"disagrees"``
            (results differ from the reference backend's).
        us_per_call: the median of ``times_us`` (the statistic the suite's
            verdict uses too); None unless timed.
        times_us: microseconds per call of each timed round.
        detail: why it failed or how it disagrees.
    """

    backend: str
    status: str
    us_per_call: float | None = None
    times_us: tuple[float, ...] = ()
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Decision:
    """Which backend an operation uses for one call signature, and why.

    Attributes:
        op: the operation's name.
        platform: ``"cpu"``, ``"gpu"`` or ``"tpu"``.
        signature: the call signature in words (inputs, static keywords, batch).
        key: the digest the decision is stored under.
        backend: the backend chosen.
        candidates: every backend considered, in registration order.
        calls_per_run: calls chained in each timed run, per backend.
        source: ``"measured"``, ``"disk"``, ``"process 0"``, ``"only backend"``
            or ``"fallback"`` (nothing could be measured: the fixed default).
        reason: for ``"fallback"``, why.
        margin: how much faster the choice was than the runner-up: the
            runner-up's median time per call over the winner's (>= 1);
            ``math.inf`` where one candidate was timed; None where nothing
            was measured (only backend, fallback).
        noise: the relative spread of the winner's rounds (interquartile
            range over median); None where nothing was measured.
        busy: whether the machine was loaded while it was measured: ``load``
            above ``BUSY_LOAD``, or where the load is unknown, ``noise``
            above :data:`BUSY_NOISE`.
        unavailable: the backends registered for the call that were not
            candidates because their bridge package is not installed, each
            with why; the call site's, not stored (every process reads it
            from its own installation).
        load: the share of the machine's CPU time (0 to 1) that other
            processes used while it was measured (``kernel_bench._load``);
            None where unknown (no ``/proc/stat``, nothing measured, or a
            decision stored before it was recorded).
    """

    op: str
    platform: str
    signature: str
    key: str
    backend: str
    candidates: tuple[Candidate, ...] = ()
    calls_per_run: Mapping[str, int] = dataclasses.field(default_factory=dict)
    source: str = "measured"
    reason: str = ""
    margin: float | None = None
    noise: float | None = None
    busy: bool = False
    unavailable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    load: float | None = None

    @property
    def settled(self) -> bool:
        """Whether the decision may be reused as it is in a later process: it
        was not measured while the machine was busy, and its margin exceeds its
        noise and a tie (``margin > 1 + max(noise, TIE)``). One that is not is
        measured again when a later process reads it from the disk (once per
        process)."""
        if self.busy:
            return False
        if self.margin is None or self.noise is None:
            return True
        return self.margin > 1 + max(self.noise, TIE)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        del d["unavailable"]
        d["calls_per_run"] = dict(self.calls_per_run)
        # JSON has no infinity: a margin over a single candidate is written "inf".
        if self.margin is not None and math.isinf(self.margin):
            d["margin"] = "inf"
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str | None = None) -> Decision:
        """The decision ``d`` (as :meth:`to_dict` writes it) describes, checked
        field by field; ``source`` replaces the one written. Raises ValueError
        naming the first field that is wrong."""
        return parse_decision(d, source=source)

    def describe(self) -> str:
        """The decision as a table: each candidate's time or why it was left out."""
        head = f"{self.op} on {self.platform}: {self.signature}"
        where = {
            "measured": "measured in this process",
            "disk": f"read from the autotune cache ({cache_where()})",
            "process 0": "decided by process 0",
            "only backend": "the only backend available"
            if self.unavailable
            else "the only backend registered",
            "fallback": f"the fixed default: {self.reason}",
        }.get(self.source, self.source)
        missing = "".join(f"\nnot a candidate: {b} ({why})" for b, why in self.unavailable.items())
        if not self.candidates:
            return f"{head}{missing}\nchoice: {self.backend} ({where})"
        where += self._trust()
        rows = []
        for c in self.candidates:
            time_cell = "-" if c.us_per_call is None else f"{c.us_per_call:.4g}"
            mark = " *" if c.backend == self.backend else "  "
            status = c.status if not c.detail else f"{c.status}: {c.detail}"
            calls = self.calls_per_run.get(c.backend)
            rows.append(
                [c.backend, time_cell + mark, "-" if calls is None else str(calls), status[:100]]
            )
        table = render(
            ["backend", "us/call", "calls/run", "status"], rows, [False, True, True, False]
        )
        return f"{head}\n{table}{missing}\nchoice: {self.backend} ({where})"

    def _trust(self) -> str:
        # Margin, noise and busy, in words, after the choice.
        if self.margin is None or self.noise is None:
            return ""
        margin = "only candidate timed" if math.isinf(self.margin) else f"margin {self.margin:.2f}x"
        machine = "busy" if self.busy else "quiet"
        if self.load is not None:
            machine += f" (other processes {self.load:.0%} of the CPUs)"
        text = f"; {margin}, noise {self.noise:.1%}, machine {machine}"
        if not self.settled:
            text += "; measured again in the next process"
        return text


# ------------------------------------------------------------------ checking a record


class InvalidDecision(ValueError):
    """A stored decision, cache file or message that is not what this module writes."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, int | float) else "a value")


def _text(value: Any, what: str, limit: int = _MAX_TEXT, *, empty: bool = True) -> str:
    if not isinstance(value, str) or len(value) > limit or (not empty and not value):
        size = "" if empty else "non-empty "
        raise InvalidDecision(
            f"{what} must be a {size}string of at most {limit} characters, got {_short(value)}"
        )
    return value


def _time(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidDecision(f"{what} must be a number, got {_short(value)}")
    if isinstance(value, int) and not 0 <= value < 2**64:
        raise InvalidDecision(f"{what} must be a finite number >= 0, got {_short(value)}")
    if not (math.isfinite(value) and value >= 0):
        raise InvalidDecision(f"{what} must be a finite number >= 0, got {_short(value)}")
    return float(value)


def _fields(record: Any, names: tuple[str, ...], what: str) -> Mapping[str, Any]:
    if not isinstance(record, dict):
        raise InvalidDecision(f"{what} must be an object, got {_kind(record)}")
    missing = [n for n in names if n not in record]
    unknown = sorted(str(n) for n in record if n not in names)
    if missing:
        raise InvalidDecision(f"{what} lacks the field(s) {', '.join(map(repr, missing))}")
    if unknown:
        raise InvalidDecision(f"{what} has unknown field(s) {', '.join(map(_short, unknown[:5]))}")
    return record


# What to_dict writes: every field but the call site's unavailable backends.
_DECISION_FIELDS = tuple(f.name for f in dataclasses.fields(Decision) if f.name != "unavailable")
# Fields that records written before them lack: read with these values.
_LATER_FIELDS = {"margin": None, "noise": None, "busy": False, "load": None}
_CANDIDATE_FIELDS = tuple(f.name for f in dataclasses.fields(Candidate))


def _candidate(record: Any, i: int) -> Candidate:
    what = f"candidate {i}"
    c = _fields(record, _CANDIDATE_FIELDS, what)
    backend = _text(c["backend"], f"the backend of {what}", _MAX_NAME, empty=False)
    if c["status"] not in STATUSES:
        raise InvalidDecision(
            f"the status of {what} must be one of {', '.join(map(repr, STATUSES))}, "
            f"got {_short(c['status'])}"
        )
    times = c["times_us"]
    if not isinstance(times, list | tuple) or len(times) > _MAX_ITEMS:
        raise InvalidDecision(
            f"the times of {what} must be a list of at most {_MAX_ITEMS} numbers, got {_kind(times)}"
        )
    times_us = tuple(_time(t, f"each time of {what}") for t in times)
    us = None if c["us_per_call"] is None else _time(c["us_per_call"], f"the time of {what}")
    if (us is None) != (c["status"] != "ok"):
        raise InvalidDecision(f"{what} must have a time if and only if its status is 'ok'")
    detail = _text(c["detail"], f"the detail of {what}")
    return Candidate(backend, c["status"], us, times_us, detail)


def parse_decision(
    record: Any,
    *,
    key: str | None = None,
    op: str | None = None,
    platform: str | None = None,
    backends: tuple[str, ...] | None = None,
    source: str | None = None,
) -> Decision:
    """The :class:`Decision` a stored ``record`` describes, every field checked.

    Args:
        record: what :meth:`Decision.to_dict` wrote, read back from JSON.
        key, op, platform: where given, what the decision must be of.
        backends: where given, the backends registered for the call: the
            chosen backend and every candidate must be among them.
        source: replaces the source written.

    Raises:
        InvalidDecision: (a ValueError) naming the first field that is wrong.
    """
    if isinstance(record, dict):
        record = {**_LATER_FIELDS, **record}
    d = _fields(record, _DECISION_FIELDS, "a decision")
    name = _text(d["op"], "the operation", _MAX_NAME * 5, empty=False)
    if d["platform"] not in BACKEND_PLATFORMS:
        raise InvalidDecision(
            f"the platform must be one of {', '.join(map(repr, BACKEND_PLATFORMS))}, "
            f"got {_short(d['platform'])}"
        )
    if not isinstance(d["key"], str) or not _KEY.fullmatch(d["key"]):
        raise InvalidDecision(f"the key must be 32 hexadecimal digits, got {_short(d['key'])}")
    backend = _text(d["backend"], "the backend", _MAX_NAME, empty=False)
    if not isinstance(d["candidates"], list | tuple) or len(d["candidates"]) > _MAX_ITEMS:
        raise InvalidDecision(f"the candidates must be a list, got {_kind(d['candidates'])}")
    candidates = tuple(_candidate(c, i) for i, c in enumerate(d["candidates"]))
    names = [c.backend for c in candidates]
    if len(set(names)) != len(names):
        raise InvalidDecision(f"the candidates name a backend twice: {_short(names)}")
    counts = d["calls_per_run"]
    if not isinstance(counts, dict) or any(
        b not in names or isinstance(n, bool) or not isinstance(n, int) or not 1 <= n < 2**53
        for b, n in counts.items()
    ):
        raise InvalidDecision(
            f"the calls per run must map candidates to positive integers, got {_short(counts)}"
        )
    if d["source"] not in SOURCES:
        raise InvalidDecision(
            f"the source must be one of {', '.join(map(repr, SOURCES))}, got {_short(d['source'])}"
        )
    if candidates and not any(c.backend == backend and c.status == "ok" for c in candidates):
        raise InvalidDecision(f"the backend {_short(backend)} is not a timed candidate")
    for field, want in (("key", key), ("op", op), ("platform", platform)):
        if want is not None and d[field] != want:
            raise InvalidDecision(f"it is a decision of {field} {_short(d[field])}, not {want!r}")
    if backends is not None:
        for b in [backend, *names]:
            if b not in backends:
                raise InvalidDecision(
                    f"it names backend {_short(b)}, which is not registered "
                    f"(registered: {', '.join(map(repr, backends))})"
                )
    return Decision(
        name,
        d["platform"],
        _text(d["signature"], "the signature"),
        d["key"],
        backend,
        candidates,
        dict(counts),
        d["source"] if source is None else source,
        _text(d["reason"], "the reason"),
        _margin(d["margin"]),
        None if d["noise"] is None else _time(d["noise"], "the noise"),
        _flag(d["busy"], "busy"),
        load=_load(d["load"]),
    )


def _margin(value: Any) -> float | None:
    if value is None:
        return None
    if value == "inf":
        return math.inf
    margin = _time(value, "the margin")
    if margin < 1:
        raise InvalidDecision(
            f'the margin must be a number >= 1, "inf" or null, got {_short(value)}'
        )
    return margin


def _load(value: Any) -> float | None:
    if value is None:
        return None
    load = _time(value, "the load")
    if load > 1:
        raise InvalidDecision(f"the load must be a number from 0 to 1 or null, got {_short(value)}")
    return load


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidDecision(f"{what} must be a boolean, got {_short(value)}")
    return value


def parse_message(text: Any, **expected: Any) -> Decision:
    """The decision process 0 published as ``text`` (JSON), checked as
    :func:`parse_decision` checks one (``expected`` as its keywords)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or len(text) > _MAX_TEXT_BYTES:
        raise InvalidDecision(
            f"it must be a JSON text of at most {_MAX_TEXT_BYTES} characters, got {_short(text)}"
        )
    return parse_decision(_json(text, "a decision"), **expected)


def _json(text: str | bytes, what: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidDecision(f"it is nested too deeply to be {what}") from None
    except UnicodeDecodeError:
        raise InvalidDecision("it is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InvalidDecision(f"it is not JSON (line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # an integer too long to convert
        raise InvalidDecision(f"it is not JSON this module writes ({exc})") from None
