"""Output files: checked before the run, written so a reader never sees half of one.

A regular file (or a new one) is written to a temporary file and renamed over it; a
symlink is followed, so the link stays a link; a device or pipe (/dev/stdout, a FIFO)
is written directly, never replaced. "-" means standard output.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.paths import describe_path
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.advice import advice
from pgmq_sim.verdicts.limits import run_limit, time_split

STDOUT = Path("-")


def check_output_path(path: Path, flag: str) -> None:
    """Refuse before the run, not after it, a result file that cannot be written."""
    if path == STDOUT:
        return
    shown = describe_path(path)
    target = path.resolve() if path.is_symlink() else path
    if target.exists() and not (target.is_file() or _is_stream(target)):
        raise UsageError(f"cannot write {flag} file {shown}: it is a directory; choose a file path")
    folder = target.parent if str(target.parent) else Path(".")
    if not target.exists() and (not folder.is_dir() or not os.access(folder, os.W_OK)):
        raise UsageError(f"cannot write {flag} file {shown}; choose a path in a writable directory")
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"cannot write {flag} file {shown}: permission denied; choose another path")


def _is_stream(path: Path) -> bool:
    mode = path.stat().st_mode
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def write_text(path: Path, text: str, flag: str) -> None:
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = path.resolve() if path.is_symlink() else path
    try:
        if target.exists() and _is_stream(target):
            with target.open("w", encoding="utf-8") as stream:
                stream.write(text)
            return
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise SimError(
            f"cannot write {flag} file {describe_path(path)}: {exc.strerror or exc}; free space or choose"
            f" another {flag} path"
        ) from None


def write_json(path: Path, document: dict[str, Any]) -> None:
    write_text(path, json.dumps(document, indent=2, default=str) + "\n", "-json")


def result_document(result: RunResult) -> dict[str, Any]:
    """A result's JSON document: the result, its limit, and the advice its figures call for."""
    limit = run_limit(result)
    return result.as_json() | {
        "limit": limit.as_json(),
        "time_split": time_split(result),
        "advice": advice(result, limit),
    }
