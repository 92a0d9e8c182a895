"""Every GPU check of the project in one command, with a pass/fail table.

On a machine with an NVIDIA GPU, from the repository root:

    uv sync --group gpu              # once: JAX's CUDA 13 plugin next to the workspace
    uv run python tools/gpu_check.py

It runs each ``tools/gpu_check_*.py`` in a subprocess of this interpreter,
collects the ``CHECK`` lines each prints (one JSON object per check: name,
status ``pass``/``FAIL``/``MISS``/``info``, detail) and prints them as one
table. ``MISS`` is a performance goal not met: reported, not a failure.
``--log FILE`` also writes every script's whole output to FILE.

Exits 0 when every check passed, 1 when one failed or a script broke, 2 when
no script found a GPU.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import textwrap

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
NO_GPU = 2


# --- what every check script shares: the CHECK lines this runner parses ---------------


def check(name: str, ok: bool | None, detail: str, *, goal: bool = False) -> bool:
    """Print one result line; ``ok`` None is information, not a pass or fail. A
    performance ``goal`` that is not met is a ``MISS``, not a failure."""
    status = "info" if ok is None else ("pass" if ok else ("MISS" if goal else "FAIL"))
    print("CHECK " + json.dumps({"name": name, "status": status, "detail": detail}), flush=True)
    return ok is not False or goal


def subprocess_env() -> dict[str, str]:
    """The environment of a check's subprocess: this process's JAX may hold most
    of the GPU's memory already."""
    return {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def run_tests(paths: list[str], timeout: float | None = None) -> bool:
    """Run pytest on ``paths`` (from the repository root) in a subprocess; one
    ``GPU tests`` check line, and pytest's output when it failed."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    lines = proc.stdout.strip().splitlines() or ["no output"]
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    ok = check("GPU tests", proc.returncode == 0, "; ".join([lines[-1], *failed]))
    if proc.returncode != 0:
        print(proc.stdout[-20000:])
    return ok


def repeat(step, x, rest, n: int):
    """``x`` through ``step(x, *rest)`` ``n`` times: a chain of launches to time."""
    for _ in range(n):
        x = step(x, *rest)
    return x


# --- the runner --------------------------------------------------------------------


def scripts() -> list[str]:
    """The check scripts beside this one, in name order."""
    return sorted(glob.glob(os.path.join(TOOLS, "gpu_check_*.py")))


def parse(output: str) -> list[dict[str, str]]:
    """The checks reported in a script's output."""
    rows = []
    for line in output.splitlines():
        if line.startswith("CHECK "):
            try:
                rows.append(json.loads(line[len("CHECK ") :]))
            except json.JSONDecodeError:
                rows.append({"name": "(unreadable CHECK line)", "status": "FAIL", "detail": line})
    return rows


def table(results: list[tuple[str, dict[str, str]]], width: int = 100) -> str:
    """The results as a text table: script, check, status, detail."""
    lines = [f"{'script':<14} {'check':<40} {'status':<6} detail", "-" * width]
    for script, row in results:
        detail = textwrap.wrap(str(row.get("detail", "")), width - 63) or [""]
        lines.append(f"{script:<14} {row['name'][:40]:<40} {row['status']:<6} {detail[0]}")
        lines += [" " * 63 + more for more in detail[1:]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", help="write every script's whole output to this file")
    args = parser.parse_args(argv)
    results: list[tuple[str, dict[str, str]]] = []
    logs = []
    failed = False
    found_gpu = False
    for path in scripts():
        short = os.path.basename(path)[len("gpu_check_") : -len(".py")]
        print(f"running {os.path.relpath(path, ROOT)} ...", flush=True)
        proc = subprocess.run(
            [sys.executable, path], cwd=ROOT, capture_output=True, text=True, check=False
        )
        output = proc.stdout + proc.stderr
        logs.append(f"===== {os.path.basename(path)} (exit {proc.returncode})\n{output}")
        rows = parse(proc.stdout)
        found_gpu |= proc.returncode != NO_GPU
        if proc.returncode not in (0, NO_GPU) and not any(r["status"] == "FAIL" for r in rows):
            tail = output.strip().splitlines()[-15:]
            rows.append({"name": "script", "status": "FAIL", "detail": " | ".join(tail)})
        failed |= any(r["status"] == "FAIL" for r in rows)
        results += [(short, row) for row in rows]
    print(table(results))
    if args.log:
        with open(args.log, "w") as f:
            f.write("\n".join(logs))
    missed = [row["name"] for _, row in results if row["status"] == "MISS"]
    if failed:
        print("summary: FAILED")
        return 1
    if missed:
        print(f"summary: every check passed; performance goal(s) missed: {', '.join(missed)}")
        return 0
    if not found_gpu:
        print("summary: no GPU found by any check (nothing verified)")
        return NO_GPU
    print("summary: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
