"""The run log: one line per handled message plus lifecycle events, flushed per line.

Each run starts the file afresh, so `tail -f` follows this run only.
"""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from pgmq_sim.errors import UsageError


def stamp(moment: datetime | None = None) -> str:
    """ISO 8601 with its UTC offset (server times keep the server's zone)."""
    return (moment or datetime.now(UTC)).isoformat(timespec="microseconds")


class RunLog:
    def __init__(self, target: str) -> None:
        self._lock = threading.Lock()
        self._owned = target != "-"
        if not self._owned:
            self._file: TextIO = sys.stdout
            return
        try:
            self._file = Path(target).open("w", encoding="utf-8", buffering=1)  # noqa: SIM115 (closed by close())
        except OSError as exc:
            raise UsageError(
                f"cannot write log file {target}: {exc.strerror};"
                " choose a writable path with -logfile (or - for stdout)"
            ) from None

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
        done: datetime,
    ) -> None:
        self._write(
            f"{stamp(done)} handled worker={worker} type={queue_type} msg_id={msg_id}"
            f" order_id={order_id} added={stamp(added) if added else '-'}"
            f" claimed={stamp(claimed)} done={stamp(done)}"
        )

    def _write(self, line: str) -> None:
        with self._lock:
            self._file.write(line + "\n")
            if not self._owned:
                self._file.flush()

    def close(self) -> None:
        if self._owned:
            self._file.close()
