"""The run log: one line per handled message plus lifecycle events, flushed per line.

Each run starts the file afresh, so `tail -f` follows this run only; but the file
is opened only once the run will happen (a typo in a flag never empties the last
run's log). Until then events wait in memory. A write that fails (a full disk)
is reported once to whoever watches the log, and the run ends with a report.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.sqlfiles import describe_path


def stamp(moment: datetime | None = None) -> str:
    """ISO 8601 with its UTC offset (server times keep the server's zone)."""
    return (moment or datetime.now(UTC)).isoformat(timespec="microseconds")


class RunLog:
    def __init__(self, target: str) -> None:
        self._lock = threading.Lock()
        self._target = target
        self._to_stdout = target == "-"
        self._file: TextIO | None = sys.stdout if self._to_stdout else None
        self._pending: list[str] = []
        self._failed = False
        self._on_failure: Callable[[SimError], None] | None = None
        if not self._to_stdout:
            self._check()

    def _check(self) -> None:
        """Refuse a path that cannot be written, before anything else happens (nothing is opened)."""
        path = Path(self._target)
        shown = describe_path(path)
        fix = "choose a writable path with -logfile (or - for stdout)"
        if path.is_dir():
            raise UsageError(f"cannot write log file {shown}: it is a directory; {fix}")
        if path.exists():
            if not os.access(path, os.W_OK):
                raise UsageError(f"cannot write log file {shown}: permission denied; {fix}")
        elif not path.parent.is_dir() or not os.access(path.parent if str(path.parent) else ".", os.W_OK):
            raise UsageError(f"cannot write log file {shown}: its directory is missing or read-only; {fix}")

    def open(self) -> None:
        """Start the file afresh: called once the run is sure to happen."""
        if self._file is not None:
            return
        try:
            self._file = Path(self._target).open("w", encoding="utf-8", buffering=1)  # noqa: SIM115
        except OSError as exc:
            raise UsageError(
                f"cannot write log file {describe_path(Path(self._target))}: {exc.strerror};"
                " choose a writable path with -logfile (or - for stdout)"
            ) from None
        pending, self._pending = self._pending, []
        for line in pending:
            self._write(line)

    def on_failure(self, callback: Callable[[SimError], None] | None) -> None:
        self._on_failure = callback

    @property
    def failed(self) -> bool:
        return self._failed

    def event(self, text: str) -> None:
        self._write(f"{stamp()} {text}")

    def message(
        self,
        worker: str,
        queue_type: str,
        msg_id: int,
        order_id: int,
        added: datetime | None,
        claimed: datetime,
        done: datetime | None,
    ) -> None:
        self._write(
            f"{stamp(done)} handled worker={worker} type={queue_type} msg_id={msg_id}"
            f" order_id={order_id} added={stamp(added) if added else '-'}"
            f" claimed={stamp(claimed)} done={stamp(done) if done else '-'}"
        )

    def _write(self, line: str) -> None:
        error: SimError | None = None
        with self._lock:
            if self._failed:
                return
            if self._file is None:
                self._pending.append(line)
                return
            try:
                self._file.write(line + "\n")
                if self._to_stdout:
                    self._file.flush()
            except (OSError, ValueError) as exc:
                self._failed = True
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                error = SimError(
                    f"cannot write log file {describe_path(Path(self._target))}: {reason};"
                    " free space or choose another -logfile"
                )
        if error is not None and self._on_failure is not None:
            self._on_failure(error)

    def close(self) -> None:
        if self._file is not None and not self._to_stdout:
            with contextlib.suppress(OSError):  # a failed write was reported when it failed
                self._file.close()
        self._file = None if not self._to_stdout else self._file
