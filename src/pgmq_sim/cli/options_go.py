"""The Go tool's own options, and the queue design's (the first two sections of --help)."""

from __future__ import annotations

from typing import Any

from pgmq_sim.cli.cells import parse_compare
from pgmq_sim.cli.option import (
    DSN_DEFAULT,
    NOT_NEGATIVE,
    SEED_DSN,
    Option,
    Range,
    dsn_check,
)
from pgmq_sim.dsn import DSN_ENV
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.model.skew import INT4_MAX
from pgmq_sim.model.sweep import AUTO_WORKERS, SweepSpec
from pgmq_sim.settings import (
    MAX_BATCH,
    MAX_WORKERS,
    WorkTime,
    runs_by_time,
)

DEFAULT_FILL_DB = 1000
DEFAULT_WORKERS = 5


def _by_time(given: dict[str, Any]) -> bool:
    phased = given.get("phase") is not None or given.get("suite") is not None  # phases set the time
    return phased or runs_by_time(given["sweep"], given["rate_profile"], given["duration"], given["rate"])


def _workers(given: dict[str, Any]) -> int:
    """A workers sweep's largest step (the others wait at the gate), else 5."""
    sweep = SweepSpec.parse(given["sweep"]) if given["sweep"] is not None else None
    if sweep is not None and sweep.kind == "workers":
        return AUTO_WORKERS if sweep.adaptive else int(max(sweep.values))
    return DEFAULT_WORKERS


def _compare(text: str) -> object:
    return parse_compare(text)


GO_OPTIONS = (
    # -- the Go tool's own ----------------------------------------------------------------------
    Option(
        "delmsg",
        "switch",
        "delete a message once handled (otherwise mark it `P` and set `time_processed`)",
        "go",
        default=False,
        example=("-delmsg",),
    ),
    Option(
        "dsn",
        "text",
        'server to use; the password is never printed; in a scenario file `"$VARIABLE"` names an'
        " environment variable that holds it; see [Running where production runs](docs/production.md)",
        "go",
        metavar="URL",
        shown_default=DSN_DEFAULT,
        validate=dsn_check("-dsn"),
        secret=DSN_ENV,
        example=("-dsn", SEED_DSN),
    ),
    Option(
        "fill-db",
        "int",
        "messages to write, and to process before the run ends; a run with `-duration` and `-rate`,"
        " a `-rate-profile` or a `-sweep` has no count unless given one, and goes by time alone",
        "go",
        metavar="N",
        shown_default="1000",
        range=Range(1, INT4_MAX, why="msg_id is an integer column"),
        fallback=lambda given: None if _by_time(given) else DEFAULT_FILL_DB,
        example=("-fill-db", "250"),
    ),
    Option(
        "logfile",
        "text",
        "one line per handled message plus run events, written every 100 ms and at exit (`tail -f`"
        " works); `-` for stdout; started afresh each run",
        "go",
        default="msg_queue.log",
        metavar="FILE",
        place="out",
        example=("-logfile", "run.log"),
    ),
    Option(
        "rate",
        "float",
        "insert at R messages/s while workers run (paced without drift) instead of prefilling with"
        " COPY; the base of a `burst:` profile",
        "go",
        default=0.0,
        metavar="R",
        range=NOT_NEGATIVE,
        example=("-rate", "50"),
    ),
    Option(
        "schema",
        "path",
        "the queue table (dropped and recreated); see [Your own queue](docs/your-queue.md)",
        "go",
        metavar="FILE",
        shown_default="`./schema.sql`, else packaged",
        place="in",
        example=("-schema", "schema.sql"),
    ),
    Option(
        "workers",
        "int",
        "workers (each its own connection, all on one event loop per process) dealt round-robin over"
        " `type1..typeN`; fewer than `-types` is a usage error",
        "go",
        metavar="N",
        shown_default="5",
        range=Range(1, MAX_WORKERS),
        fallback=_workers,
        example=("-workers", "7"),
    ),
    Option(
        "next-msg",
        "path",
        "the claim query; `$1` is the worker's type; must return `msg_id, queue_type, order_id`",
        "go",
        metavar="FILE",
        shown_default="`./next_msg.sql`, else packaged",
        place="in",
        conflicts=(
            (
                "compare",
                "-compare runs each strategy's own claim, and -next-msg would replace them all;"
                " drop -next-msg, or run it alone with -claim NAME -next-msg FILE",
            ),
        ),
        example=("-next-msg", "next_msg.sql"),
    ),
    Option(
        "work-ms",
        "text",
        "simulated work per message, uniform; `0` for none",
        "go",
        default="1-10",
        metavar="MIN-MAX",
        setting="work",
        parse=WorkTime.parse,
        numbers=True,
        example=("-work-ms", "2-4"),
    ),
    Option(
        "orders",
        "int",
        "distinct `order_id`s per type, so types x K groups",
        "go",
        default=2,
        metavar="K",
        range=Range(1, INT4_MAX, why="order_id is an integer"),
        example=("-orders", "5"),
    ),
    Option(
        "poll-interval",
        "float",
        "idle wait after an empty claim (poll), or the fallback wait (notify)",
        "go",
        default=1.0,
        metavar="S",
        range=NOT_NEGATIVE,
        example=("-poll-interval", "0.5"),
    ),
    # -- the queue design -----------------------------------------------------------------------
    Option(
        "queue",
        "text",
        "the queue design: a folder of SQL (your table, enqueue, claim, completion) or a built-in;"
        " see [Your own queue](docs/your-queue.md)",
        "design",
        metavar="DIR|NAME",
        shown_default="`seed`",
        setting="claim",
        place="design",
        fallback=lambda given: given["claim"] or "seed",
        example=("-queue", "examples/jobs"),
    ),
    Option(
        "claim",
        "text",
        "a built-in claim strategy on the seed's table (the same as `-queue NAME`), see [Your own"
        " queue](docs/your-queue.md#claim-strategies)",
        "design",
        metavar="NAME",
        shown_default="`seed`",
        setting=None,  # -queue's field: one of them names the design
        place="design",
        conflicts=(("queue", "-queue {theirs} and -claim {mine} both name the queue design; give one"),),
        example=("-claim", "indexed"),
    ),
    Option(
        "batch",
        "int",
        "messages one claim may take; they are worked in order and completed in one commit",
        "design",
        default=1,
        metavar="N",
        range=Range(1, MAX_BATCH, why="messages per claim"),
        example=("-batch", "3"),
    ),
    Option(
        "archive",
        "switch",
        "complete with the design's `complete_archive.sql` (`visibility`: move the message to its"
        " archive table)",
        "design",
        default=False,
        example=("-queue", "visibility", "-archive"),
    ),
    Option(
        "wakeup",
        "text",
        "how idle workers learn of new messages",
        "design",
        default=WakeupMode.POLL.value,
        metavar="poll|notify",
        choices=WakeupMode,
        example=("-wakeup", "notify"),
    ),
    Option(
        "tx",
        "text",
        "`split`: claim with an owner and a lease and commit, work outside any transaction, complete in"
        " a second transaction; see [Faults](docs/faults.md#split-transactions)",
        "design",
        metavar="single|split",
        shown_default="`single` (a design's: its `queue.toml`)",
        choices=TxMode,
        fallback=lambda _: TxMode.SINGLE,
        example=("-tx", "split"),
    ),
    Option(
        "compare",
        "text",
        "run `DESIGN[/WAKEUP][/TX],...` or `all` (every strategy, each wake-up) on one workload (one"
        " seed for every cell) and print one table; with `-sweep`, one sweep per cell and a table of"
        " knees; in a scenario file, a table per cell: `[[compare]]` with `queue`, `wakeup`, `tx`",
        "design",
        metavar="CELLS",
        setting=None,
        form="compare",
        validate=_compare,
        example=("-compare", "seed,indexed/notify,fifo/split"),
    ),
    Option(
        "no-audit",
        "switch",
        "no journal, no audit: raw speed runs",
        "design",
        default=False,
        setting="audit",
        parse=lambda off: not off,
        example=("-no-audit",),
    ),
)
