"""Errors a user can fix. Each carries the one line the CLI prints."""


class SimError(Exception):
    """A problem with the run's input or environment; exit_code tells the CLI how to end."""

    exit_code = 1


class UsageError(SimError):
    exit_code = 2


class FaultRefused(UsageError):
    """A fault the server, the role or the path cannot take (a restart of a -dsn server not allowed):
    a run that asks for it is refused; -suite pressure's cell for it is a row with the reason."""


class LockBusy(SimError):
    """A statement waited its bound for a lock another session holds; its transaction rolled back,
    so nothing it would have changed was."""


class ServerLostError(SimError):
    """The server stayed unreachable past -reconnect-timeout."""

    exit_code = 3
