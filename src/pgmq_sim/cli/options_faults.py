"""The run's options of --help's section on faults and failing work: what breaks, and how long
the run rides through it."""

from __future__ import annotations

from pgmq_sim.actors.chaos import parse_chaos
from pgmq_sim.cli.option import NOT_NEGATIVE, POSITIVE, Option, Range
from pgmq_sim.settings import MAX_ATTEMPTS

FAULT_OPTIONS = (
    # -- faults and failing work ----------------------------------------------------------------
    Option(
        "lease",
        "float",
        "split mode: how long a claim is owned before the housekeeper may take it back",
        "faults",
        default=30.0,
        metavar="S",
        range=POSITIVE,
        example=("-tx", "split", "-lease", "12"),
    ),
    Option(
        "fail-rate",
        "float",
        "fraction of work attempts that fail",
        "faults",
        default=0.0,
        metavar="P",
        range=Range(0, 1, high_open=True, why="a fraction"),
        example=("-fail-rate", "0.1"),
    ),
    Option(
        "max-attempts",
        "int",
        "attempts before a failing message becomes a dead letter",
        "faults",
        default=5,
        metavar="N",
        range=Range(1, MAX_ATTEMPTS),
        example=("-fail-rate", "0.1", "-max-attempts", "3"),
    ),
    Option(
        "backoff-ms",
        "float",
        "a failed attempt's next try waits BASE x 2^(attempt-1) ms",
        "faults",
        default=100.0,
        metavar="BASE",
        range=NOT_NEGATIVE,
        example=("-fail-rate", "0.1", "-backoff-ms", "50"),
    ),
    Option(
        "chaos",
        "text",
        "faults injected into the run (`kill-connection/5s,kill-worker@3s,restart-server@10s`; in a"
        " scenario file an array of them), see [Faults](docs/faults.md#injected-faults)",
        "faults",
        metavar="SPEC",
        validate=parse_chaos,
        form="list",
        example=("-chaos", "kill-worker@1s,kill-connection/5s"),
    ),
    Option(
        "chaos-allow-restart",
        "switch",
        "lets `-chaos restart-server` crash-restart a `-dsn` server (superuser)",
        "faults",
        default=False,
        example=("-chaos-allow-restart",),
    ),
    Option(
        "stall-timeout",
        "float",
        "stop with a diagnosis if nothing commits for S seconds while messages remain",
        "faults",
        default=30.0,
        metavar="S",
        example=("-stall-timeout", "45"),
    ),
    Option(
        "audit-window",
        "float",
        "the live audit: every S seconds the messages enqueued since the last window, and those"
        " pending then once they finish, are judged as one window, kept on the server and shown live,"
        " so the run's end judges only what is left, and the limit of those S seconds is judged (0: the"
        " whole audit at the end, no limit by window); see [The live audit](docs/audit.md#the-live-audit)",
        "faults",
        default=10.0,
        metavar="S",
        range=NOT_NEGATIVE,
        example=("-audit-window", "30"),
    ),
    Option(
        "account-live-from",
        "int",
        "with the live audit, once its windows have judged N journal rows the latency account is kept"
        " as the run goes, by a process of its own, so the run's end reads only what the last window"
        " left (0: from the first window); a shorter run's account is read whole at its end, which"
        " costs less CPU in all; see [Kept as the run goes](docs/report.md#where-the-time-went)",
        "faults",
        default=100_000,
        metavar="N",
        range=NOT_NEGATIVE,
        example=("-account-live-from", "0"),
    ),
    Option(
        "compact-journal",
        "switch",
        "with the latency account kept as the run goes, delete a closed window's journal rows once it"
        " passed and the account read them, so the journal holds the open windows only (a soak's); the"
        " account then splits every message, and a failed one gives none, as the journal it would read"
        " again is gone; see [The journal kept bounded](docs/audit.md#the-journal-kept-bounded)",
        "faults",
        default=False,
        example=("-compact-journal",),
    ),
    Option(
        "reconnect-timeout",
        "float",
        "how long workers, producer, listener and the tool's own session keep reconnecting to a lost server",
        "faults",
        default=60.0,
        metavar="S",
        range=NOT_NEGATIVE,
        example=("-reconnect-timeout", "20"),
    ),
)
