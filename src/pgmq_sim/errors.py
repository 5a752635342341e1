"""Errors a user can fix. Each carries the one line the CLI prints."""


class SimError(Exception):
    """A problem with the run's input or environment; exit_code tells the CLI how to end."""

    exit_code = 1


class UsageError(SimError):
    exit_code = 2


class ServerLostError(SimError):
    """The server stayed unreachable past -reconnect-timeout."""

    exit_code = 3
