"""The run log: one line per handled message plus lifecycle events.

Lines are queued without a lock or a system call (a message's line is on its worker's hot path)
and written by a flusher every 100 ms and at close: `tail -f` still follows, and a crash loses at
most the last 100 ms of lines (the journal, not the log, is the proof). Each run starts the file
afresh, but it is opened only once the run will happen (a typo in a flag never empties the last
run's log); until then lines wait in memory. A write that fails (a full disk) is reported once to
whoever watches the log, and the run ends with a report.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.paths import describe_path

FLUSH_S = 0.1
CLOSE_WAIT_S = 5.0


def stamp(moment: datetime | None = None) -> str:
    """ISO 8601 with its UTC offset."""
    return (moment or datetime.now(UTC)).isoformat(timespec="microseconds")


def server_stamp(text: str | None) -> str:
    """A server timestamp as it came (DateStyle ISO: '2026-11-23 10:00:00.123+00'), in ISO 8601
    form; the server's zone is kept."""
    return text.replace(" ", "T", 1) if text else "-"


class RunLog:
    def __init__(self, target: str) -> None:
        self._target = target
        self._to_stdout = target == "-"
        self._file: TextIO | None = None
        self._lines: deque[str] = deque()  # appended by any thread, drained by the flusher
        self._drain_lock = threading.Lock()
        self._flushed = threading.Event()  # set: the flusher stops
        self._flusher: threading.Thread | None = None
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
        if self._to_stdout:
            self._file = sys.stdout
        else:
            try:
                self._file = Path(self._target).open("w", encoding="utf-8")  # noqa: SIM115
            except OSError as exc:
                raise UsageError(
                    f"cannot write log file {describe_path(Path(self._target))}: {exc.strerror};"
                    " choose a writable path with -logfile (or - for stdout)"
                ) from None
        self._flushed.clear()
        self._flusher = threading.Thread(target=self._flush_every, name="log-flusher", daemon=True)
        self._flusher.start()

    def _flush_every(self) -> None:
        while not self._flushed.wait(FLUSH_S):
            self.flush()

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
        added: str | None,
        claimed: str,
        done: str | None,
    ) -> None:
        """A handled message; its times are the server's, as text."""
        done_at = server_stamp(done)
        self._lines.append(
            f"{done_at if done else stamp()} handled worker={worker} type={queue_type} msg_id={msg_id}"
            f" order_id={order_id} added={server_stamp(added)} claimed={server_stamp(claimed)} done={done_at}"
        )

    def _write(self, line: str) -> None:
        if not self._failed:
            self._lines.append(line)

    def flush(self) -> None:
        """Write what is queued (the flusher does, every 100 ms; close does, last)."""
        error: SimError | None = None
        with self._drain_lock:
            file = self._file
            if file is None or not self._lines:
                return
            lines, take = [], self._lines.popleft
            with contextlib.suppress(IndexError):
                while True:
                    lines.append(take())
            if self._failed:
                return
            try:
                file.write("\n".join(lines) + "\n")
                file.flush()
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
        """Stop the flusher and write the last lines."""
        flusher, self._flusher = self._flusher, None
        self._flushed.set()
        if flusher is not None:
            flusher.join(CLOSE_WAIT_S)  # a write to a hung disk must not hold the exit
        self.flush()
        if self._file is not None and not self._to_stdout:
            with contextlib.suppress(OSError):  # a failed write was reported when it failed
                self._file.close()
        self._file = None
