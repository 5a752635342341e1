"""The run's modes and outcomes as closed sets of names (StrEnum: they print and serialise as
their text, and a typo is an error instead of a comparison that is never true)."""

from __future__ import annotations

from enum import StrEnum

CHECK_EXIT = 4  # a breached -check (or a diff's -fail-on): the run itself went through


class Outcome(StrEnum):
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    STALLED = "stalled"
    SERVER_UNRESPONSIVE = "server-unresponsive"
    SERVER_LOST = "server-lost"

    @property
    def exit_code(self) -> int:
        """0 done or stopped by request (a signal's own code is the CLI's), 1 failed, 3 the server."""
        return {
            Outcome.COMPLETED: 0,
            Outcome.INTERRUPTED: 0,
            Outcome.FAILED: 1,
        }.get(self, 3)


class TxMode(StrEnum):
    SINGLE = "single"
    SPLIT = "split"


class WakeupMode(StrEnum):
    POLL = "poll"
    NOTIFY = "notify"


class SessionMode(StrEnum):
    """What a worker's session does around the claim: nothing more (basic), count attempts in the
    claim's transaction (single, with retries), or own the message with a lease (split)."""

    BASIC = "basic"
    SINGLE = "single"
    SPLIT = "split"


class FaultKind(StrEnum):
    KILL_CONNECTION = "kill-connection"
    KILL_WORKER = "kill-worker"
    RESTART_SERVER = "restart-server"
    HOLD_XMIN = "hold-xmin"
    LOCK_TABLE = "lock-table"
    PAUSE_POOLER = "pause-pooler"
    KILL_POOLER = "kill-pooler"
    RECONNECT_POOLER = "reconnect-pooler"
    IDLE_IN_TX = "idle-in-tx"
    READERS = "readers"
    POOL_EXHAUSTION = "pool-exhaustion"

    @property
    def held(self) -> bool:
        """A fault that holds something for a while (+DURATION) rather than happening once."""
        return self in (
            FaultKind.HOLD_XMIN,
            FaultKind.LOCK_TABLE,
            FaultKind.PAUSE_POOLER,
            FaultKind.IDLE_IN_TX,
            FaultKind.READERS,
            FaultKind.POOL_EXHAUSTION,
        )

    def sessions(self, count: int) -> int:
        """Server sessions it holds (what the connection check counts; pool exhaustion takes what it
        finds, on purpose)."""
        if self == FaultKind.READERS:
            return count
        return 1 if self.held and not self.pooler and self != FaultKind.POOL_EXHAUSTION else 0

    @property
    def pooler(self) -> bool:
        """Done through the pooler's admin console (-pooler-admin)."""
        return self in (FaultKind.PAUSE_POOLER, FaultKind.KILL_POOLER, FaultKind.RECONNECT_POOLER)


class PoolerMode(StrEnum):
    """What stands between the tool and the server: nothing, or a pooler that keeps a server session
    for each client (session) or only for the length of a transaction (transaction)."""

    AUTO = "auto"  # the flag's default: detect it
    NONE = "none"
    SESSION = "session"
    TRANSACTION = "transaction"


class ProgressMode(StrEnum):
    AUTO = "auto"
    BARS = "bars"
    PLAIN = "plain"
    OFF = "off"


def choices(kind: type[StrEnum]) -> str:
    return ", ".join(member.value for member in kind)
