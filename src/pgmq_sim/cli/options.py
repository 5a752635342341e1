"""Every option of every command, once: the run's (the Go tool's own first, then the queue design,
the workload, time and sweeps, faults, the path, gates, outputs and the runners), the audit's and
the diff's. The flags (-fill-db, --fill-db), the scenario file's keys (fill-db = 100), --help, the
JSON's scenario and the docs' flag tables are all read from these.

A new option is one `Option(...)` here (and, for a run, its field in Settings); see
docs/scenarios.md#adding-an-option."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from pgmq_sim.actors.chaos import parse_chaos
from pgmq_sim.cli.cells import parse_compare
from pgmq_sim.cli.option import CommandOptions, Option, Range
from pgmq_sim.dsn import DSN_ENV, check_dsn
from pgmq_sim.model.checks import Check
from pgmq_sim.model.extras import Delay, PriorityRange
from pgmq_sim.model.kinds import PoolerMode, ProgressMode, TxMode, WakeupMode
from pgmq_sim.model.pressure import SUITES, is_number, parse_phases
from pgmq_sim.model.skew import INT4_MAX, KeySkew
from pgmq_sim.model.sweep import SweepSpec, parse_duration, parse_slo
from pgmq_sim.settings import (
    MAX_ATTEMPTS,
    MAX_BATCH,
    MAX_SAMPLE_HZ,
    MAX_TYPES,
    MAX_WORKERS,
    Payload,
    WorkTime,
    parse_listen_address,
)
from pgmq_sim.verdicts.checks import parse_checks
from pgmq_sim.verdicts.diff import DEFAULT_FAIL_ON, parse_fail_on

DSN_DEFAULT = f"`${DSN_ENV}`, else embedded"
NOT_NEGATIVE = Range(0)
POSITIVE = Range(0, low_open=True)
PORT = Range(1, 65535, why="a TCP port")
SEED_DSN = "postgres://test@localhost/test"  # the examples' server, with no password
ADAPTIVE = ("-sweep", "rate=auto", "-wakeup", "notify")


def _names(kind: type[StrEnum]) -> tuple[str, ...]:
    return tuple(member.value for member in kind)


def _checks(text: str) -> tuple[Check, ...]:
    return parse_checks(text)


def _budget(text: str) -> float:
    return parse_duration(text, "-sweep-budget")


def _listen(text: str) -> object:
    return parse_listen_address(text, "-metrics-port")


def _dsn(flag: str) -> Callable[[str], None]:
    return lambda text: check_dsn(text, flag)


def _phase(text: str) -> object:
    return float(text) if is_number(text) else parse_phases(text)


def _compare(text: str) -> object:
    return parse_compare(text)


RUN_OPTIONS = (
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
        validate=_dsn("-dsn"),
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
        setting=None,
        place="design",
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
        setting=None,
        place="design",
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
        choices=_names(WakeupMode),
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
        setting=None,
        choices=_names(TxMode),
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
        setting=None,
        example=("-no-audit",),
    ),
    # -- the workload ---------------------------------------------------------------------------
    Option(
        "types",
        "int",
        "message types `type1..typeN`",
        "workload",
        default=3,
        metavar="N",
        range=Range(1, MAX_TYPES, why="queue_type is varchar(10)"),
        example=("-types", "2"),
    ),
    Option(
        "key-skew",
        "text",
        "how `order_id`s are spread over the K orders; see [Traffic shapes](docs/traffic.md)",
        "workload",
        default="uniform",
        metavar="uniform|zipf:S",
        parse=KeySkew.parse,
        example=("-key-skew", "zipf:1.1"),
    ),
    Option(
        "payload-bytes",
        "text",
        "random (incompressible) payload per message, in the schema's `payload` column",
        "workload",
        default="0",
        metavar="N|MIN-MAX",
        shown_default="none",
        setting="payload",
        parse=Payload.parse,
        numbers=True,
        example=("-payload-bytes", "100-800"),
    ),
    Option(
        "priority",
        "text",
        "a uniform integer priority per message (a design's `$4`; a larger number is served first); the"
        " report gives the end-to-end latency per level",
        "workload",
        metavar="MIN-MAX",
        parse=PriorityRange.parse,
        example=("-queue", "priority", "-priority", "1-5"),
    ),
    Option(
        "delay",
        "text",
        "that share of messages is due MIN to MAX seconds after it is enqueued (a design's `$5`); its"
        " latency counts from then, and the audit fails a message completed early",
        "workload",
        metavar="SHARE:MIN-MAX",
        parse=Delay.parse,
        example=("-queue", "priority", "-delay", "0.3:1-5"),
    ),
    Option(
        "rate-profile",
        "text",
        "arrival rate over time: `ramp:A..B/Ts`, `step:A,B,C/Ts`, `burst:R*Ds/Ts` (over `-rate`), or a"
        " CSV file of `second,rate`",
        "workload",
        metavar="PROFILE",
        place="profile",
        example=("-rate-profile", "ramp:10..50/20s", "-duration", "30"),
    ),
    Option(
        "speed",
        "float",
        "replay a CSV profile F times faster",
        "workload",
        default=1.0,
        metavar="F",
        range=POSITIVE,
        example=("-speed", "2"),
    ),
    Option(
        "seed",
        "int",
        "random seed for message types, orders, payloads and work times; the seed used is printed,"
        " logged and in the JSON, so any run can be replayed",
        "workload",
        metavar="N",
        shown_default="drawn",
        example=("-seed", "7"),
    ),
    # -- time, capacity and sweeps --------------------------------------------------------------
    Option(
        "duration",
        "float",
        "end the run after S seconds: the producer stops, work in flight finishes; see"
        " [Capacity](docs/capacity.md#runs-bounded-by-time)",
        "time",
        metavar="S",
        range=POSITIVE,
        example=("-duration", "30", "-rate", "100"),
    ),
    Option(
        "phase",
        "text",
        "a run in phases under one audit, each measured apart (`name=N duration=S [rate=R]"
        " [pressure=P]; ...`; in a scenario file a `[[phase]]` table each); with `-suite`, each"
        " phase's seconds; see [Scenarios](docs/scenarios.md#phases)",
        "time",
        metavar="PHASES|S",
        shown_default="none (`60` with `-suite`)",
        setting=None,
        form="phases",
        numbers=True,
        validate=_phase,
        example=("-phase", "name=base duration=2 rate=50; name=held duration=2 pressure=idle-in-tx"),
    ),
    Option(
        "suite",
        "text",
        "`pressure`: a run per pressure (baseline, pressure, recovery, `-phase` S each) for the design"
        " or each `-compare` cell, scored in one table; see [Faults](docs/faults.md#pressure-suite)",
        "time",
        metavar="pressure",
        choices=SUITES,
        example=("-suite", "pressure", "-rate", "50"),
    ),
    Option(
        "sweep",
        "text",
        "search for the knee (`auto`, `A..B`), or hold each rate (or number of workers) of a ladder"
        " for a step; in one run; report each step and the knee; in a scenario file, the `[sweep]`"
        " table, with `rate` or `workers` and the next six keys; see"
        " [Capacity](docs/capacity.md#sweeps)",
        "time",
        metavar="rate=auto|rate=A..B|workers=auto|rate=A,B,C|rate=A..B*F|workers=A,B,C",
        parse=SweepSpec.parse,
        form="sweep",
        example=ADAPTIVE,
    ),
    Option(
        "step",
        "float",
        "a sweep step's length (refused without `-sweep`, as are the next five)",
        "time",
        metavar="S",
        dest="step_s",
        shown_default="10",
        range=POSITIVE,
        table="sweep",
        example=("-sweep", "rate=100,200", "-step", "4"),
    ),
    Option(
        "settle",
        "float",
        "after a rate step, wait at most S seconds for its backlog to drain",
        "time",
        metavar="S",
        dest="settle_s",
        shown_default="`-step`",
        range=POSITIVE,
        table="sweep",
        example=("-sweep", "rate=100,200", "-settle", "3"),
    ),
    Option(
        "slo",
        "text",
        "the end-to-end p99 each sweep step must keep; an adaptive sweep's steps keep half its"
        " headroom over the unloaded p99, and three holds in a row confirm its knee",
        "time",
        metavar="e2e-p99=MS",
        setting="slo_p99_ms",
        parse=parse_slo,
        form="slo",
        table="sweep",
        example=(*ADAPTIVE, "-slo", "e2e-p99=250"),
    ),
    Option(
        "resolution",
        "float",
        "an adaptive sweep bisects until the first failing rate is within PCT% of the knee",
        "time",
        metavar="PCT",
        dest="resolution_pct",
        shown_default="5",
        range=Range(0.1, 50, why="a percentage"),
        table="sweep",
        example=(*ADAPTIVE, "-resolution", "10"),
    ),
    Option(
        "repeat",
        "int",
        "an adaptive sweep runs each bisection step N times; a rate passes when most runs pass",
        "time",
        metavar="N",
        shown_default="1",
        range=Range(1, 9),
        table="sweep",
        example=(*ADAPTIVE, "-repeat", "3"),
    ),
    Option(
        "sweep-budget",
        "text",
        "bound an adaptive sweep's whole search (`90s`, `15m`, `1h`); the report says the resolution reached",
        "time",
        metavar="DURATION",
        dest="sweep_budget_s",
        parse=_budget,
        numbers=True,
        table="sweep",
        example=(*ADAPTIVE, "-sweep-budget", "15m"),
    ),
    Option(
        "bystander",
        "float",
        "a small read-and-update workload beside the queue, on a table of its own, at RATE"
        " transactions/s: its latency; see [Capacity](docs/capacity.md#a-neighbours-latency)",
        "time",
        metavar="RATE",
        range=Range(0, 100_000, low_open=True, why="transactions per second"),
        example=("-bystander", "20"),
    ),
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
        "reconnect-timeout",
        "float",
        "how long workers, producer, listener and the tool's own session keep reconnecting to a lost server",
        "faults",
        default=60.0,
        metavar="S",
        range=NOT_NEGATIVE,
        example=("-reconnect-timeout", "20"),
    ),
    # -- the server and the path to it ----------------------------------------------------------
    Option(
        "pooler",
        "text",
        "the pooler between the tool and the server; `auto` detects it",
        "path",
        default=PoolerMode.AUTO.value,
        metavar="auto|none|session|transaction",
        choices=_names(PoolerMode),
        example=("-pooler", "none"),
    ),
    Option(
        "listen-dsn",
        "text",
        "with `-wakeup notify`: where the listening connection goes (a direct connection; needed"
        " behind a transaction pooler)",
        "path",
        metavar="URL",
        validate=_dsn("-listen-dsn"),
        secret="PGMQ_SIM_LISTEN_DSN",
        example=("-wakeup", "notify", "-listen-dsn", SEED_DSN),
    ),
    Option(
        "pooler-admin",
        "text",
        "PgBouncer's admin console (database `pgbouncer`): its pool read each second into the report,"
        " and the pooler's faults for `-chaos`; see [The pooler's"
        " faults](docs/faults.md#the-poolers-faults)",
        "path",
        metavar="URL",
        validate=_dsn("-pooler-admin"),
        secret="PGMQ_SIM_POOLER_ADMIN",
        example=("-pooler-admin", "postgres://u@localhost:6432/pgbouncer"),
    ),
    Option(
        "wait-sample-hz",
        "float",
        "`pg_stat_activity` samples per second for the wait profile and the limit verdict (0: none)",
        "path",
        default=20.0,
        metavar="N",
        range=Range(0, MAX_SAMPLE_HZ),
        example=("-wait-sample-hz", "10"),
    ),
    Option(
        "replace-tables",
        "switch",
        "replace `msg_queue`, `msg_journal`, `msg_failures`, `pgmq_sim_owners`, `pgmq_sim_run`,"
        " `pgmq_sim_bystander` (and, behind a transaction pooler, the `pgmq_sim_*` functions) even if"
        " pgmq-sim did not create them",
        "path",
        default=False,
        example=("-replace-tables",),
    ),
    # -- CI gates and baselines -----------------------------------------------------------------
    Option(
        "check",
        "text",
        "thresholds on reported figures (`e2e-p99<250`, `throughput>=900`, `lost==0`; in a scenario"
        " file an array of them); a breach exits 4; see [CI gates](docs/ci.md#gating-a-ci-with-checks)",
        "gates",
        metavar="EXPR[,EXPR...]",
        setting="checks",
        parse=_checks,
        form="list",
        example=("-check", "e2e-p99<250,lost==0"),
    ),
    Option(
        "junit",
        "path",
        "the checks and the audit as JUnit XML, one test case each",
        "gates",
        metavar="FILE",
        dest="junit_path",
        place="out",
        example=("-junit", "checks.xml"),
    ),
    Option(
        "check-abort",
        "switch",
        "end the run at the first breach of a check that can only get worse (`lost`), as if"
        " interrupted: the audit still runs",
        "gates",
        default=False,
        example=("-check", "lost==0", "-check-abort"),
    ),
    Option(
        "baseline",
        "path",
        "diff this run against an earlier run's JSON in the summary and the JSON; worse beyond noise"
        " exits 4; see [A baseline](docs/ci.md#a-baseline)",
        "gates",
        metavar="FILE",
        dest="baseline_path",
        place="in",
        example=("-baseline", "base.json"),
    ),
    Option(
        "drift",
        "switch",
        "judge the drift of a run shorter than ten minutes (at least 60 s); see [Long"
        " runs](docs/ci.md#long-runs-and-drift)",
        "gates",
        default=False,
        example=("-drift", "-duration", "60", "-rate", "100"),
    ),
    Option(
        "metrics-port",
        "text",
        "serve Prometheus metrics at `/metrics` on PORT (0: any free port) for as long as the run"
        " lasts, on every interface or on HOST only (`127.0.0.1:9100`, `[::1]:9100`); see [Live"
        " metrics](docs/ci.md#live-metrics)",
        "gates",
        metavar="[HOST:]PORT",
        setting=None,
        validate=_listen,
        numbers=True,
        example=("-metrics-port", "127.0.0.1:0"),
    ),
    # -- outputs --------------------------------------------------------------------------------
    Option(
        "json",
        "path",
        "the whole result as JSON, with the scenario it ran (regular files written atomically; a"
        " symlink is followed, a device written directly); `-` for stdout (the summary then goes to"
        " stderr)",
        "outputs",
        metavar="FILE",
        dest="json_path",
        place="out",
        example=("-json", "out.json"),
    ),
    Option(
        "plot",
        "path",
        "throughput, backlog and latency over time, and with `-sweep` the knee (`pip install '.[plot]'`)",
        "outputs",
        metavar="FILE.png",
        dest="plot_path",
        place="out",
        example=("-plot", "out.png"),
    ),
    Option(
        "report",
        "path",
        "one self-contained HTML page of the run (a comparison, a sweep): the answer, charts over time,"
        " the tables, the advice and the scenario; no network needed to open it (`pip install"
        " '.[plot]'`); see [Reports](docs/scenarios.md#reports)",
        "outputs",
        metavar="FILE.html",
        dest="report_path",
        place="out",
        example=("-report", "out.html"),
    ),
    Option(
        "verbose",
        "switch",
        "the summary prints every row (costs, workers, steps, checks, each fault, the latency account"
        " per type), not the answer alone",
        "outputs",
        default=False,
        short="v",
        example=("-verbose",),
    ),
    Option(
        "progress",
        "text",
        "`auto`: bars on a terminal, a plain line every 5 s otherwise; or always `bars`, always"
        " `plain`, or `off`",
        "outputs",
        default=ProgressMode.AUTO.value,
        metavar="auto|bars|plain|off",
        choices=_names(ProgressMode),
        example=("-progress", "off"),
    ),
    # -- more processes, more hosts (Locust's runners) ------------------------------------------
    Option(
        "processes",
        "int",
        "run the workers in N processes on this host (`-1`: one per core); see [More processes, more"
        " hosts](docs/processes.md)",
        "runners",
        metavar="N",
        setting=None,
        gnu=True,
        example=("--processes", "2"),
    ),
    Option(
        "master",
        "switch",
        "master of a run across hosts: worker processes join it with `--worker`",
        "runners",
        default=False,
        setting=None,
        gnu=True,
        example=("--master", "-dsn", SEED_DSN),
    ),
    Option(
        "expect-workers",
        "int",
        "the worker processes a master waits for",
        "runners",
        default=1,
        metavar="K",
        setting=None,
        range=Range(1),
        gnu=True,
        example=("--master", "-dsn", SEED_DSN, "--expect-workers", "2"),
    ),
    Option(
        "master-bind-host",
        "text",
        "where the master listens for worker processes (`*`: every interface)",
        "runners",
        default="*",
        metavar="H",
        setting=None,
        gnu=True,
        example=("--master", "-dsn", SEED_DSN, "--master-bind-host", "127.0.0.1"),
    ),
    Option(
        "master-bind-port",
        "int",
        "the port the master listens on",
        "runners",
        default=5557,
        metavar="P",
        setting=None,
        range=PORT,
        gnu=True,
        example=("--master", "-dsn", SEED_DSN, "--master-bind-port", "6557"),
    ),
    Option(
        "worker",
        "switch",
        "join a master as a worker process; every setting comes from the master",
        "runners",
        default=False,
        setting=None,
        gnu=True,
        example=("--worker", "--master-host", "master.example"),
    ),
    Option(
        "master-host",
        "text",
        "with `--worker`: the master to join",
        "runners",
        metavar="H",
        setting=None,
        gnu=True,
        example=("--worker", "--master-host", "master.example"),
    ),
    Option(
        "master-port",
        "int",
        "with `--worker`: the master's port",
        "runners",
        default=5557,
        metavar="P",
        setting=None,
        range=PORT,
        gnu=True,
        example=("--worker", "--master-host", "master.example", "--master-port", "6557"),
    ),
    Option(
        "web",
        "switch",
        "with `--processes` or `--master`: Locust's web UI showing the run live",
        "runners",
        default=False,
        setting=None,
        gnu=True,
        example=("--processes", "2", "--web"),
    ),
    Option(
        "web-port",
        "int",
        "the web UI's port",
        "runners",
        default=8089,
        metavar="P",
        setting=None,
        range=PORT,
        gnu=True,
        example=("--processes", "2", "--web", "--web-port", "8090"),
    ),
)

# every command reads a scenario and can print one
SCENARIO = (
    Option(
        "config",
        "path",
        "read the options from a scenario file (TOML; or a run's JSON, to rerun it); a flag given too"
        " wins over the file; see [Scenarios](docs/scenarios.md#scenarios)",
        "scenario",
        metavar="FILE",
        setting=None,
        in_file=False,
    ),
    Option(
        "print-config",
        "switch",
        "print the scenario of the options given (the flags and `-config`'s) as TOML, and run nothing",
        "scenario",
        default=False,
        setting=None,
        in_file=False,
    ),
)
VERSION = Option("version", "version", "the version", "scenario", setting=None, in_file=False)
RUN = CommandOptions("pgmq-sim", (*RUN_OPTIONS, *SCENARIO, VERSION))

AUDIT = CommandOptions(
    "pgmq-sim audit",
    (
        Option(
            "dsn",
            "text",
            'the server whose queue and journal to audit; in a scenario file `"$VARIABLE"` names an'
            " environment variable",
            "path",
            metavar="URL",
            shown_default=f"`${DSN_ENV}`",
            validate=_dsn("-dsn"),
            secret=DSN_ENV,
            example=("-dsn", SEED_DSN),
        ),
        Option(
            "json",
            "path",
            "the verdict as JSON; `-` for stdout",
            "outputs",
            metavar="FILE",
            dest="json_path",
            place="out",
            example=("-dsn", SEED_DSN, "-json", "audit.json"),
        ),
        Option(
            "reconnect-timeout",
            "float",
            "how long a passing refusal (a server starting up, a pooler retrying its login) is waited out",
            "faults",
            default=30.0,
            metavar="S",
            range=NOT_NEGATIVE,
            example=("-dsn", SEED_DSN, "-reconnect-timeout", "5"),
        ),
        *SCENARIO,
    ),
)

DIFF = CommandOptions(
    "pgmq-sim diff",
    (
        Option(
            "base",
            "path",
            "the earlier run's JSON",
            "diff",
            metavar="BASE.json",
            place="in",
            argument=True,
        ),
        Option(
            "new",
            "path",
            "the later run's JSON",
            "diff",
            metavar="NEW.json",
            place="in",
            argument=True,
        ),
        Option(
            "fail-on",
            "text",
            "exit 4 when one of these figures got worse beyond the noise (in a scenario file an array)",
            "gates",
            default=",".join(DEFAULT_FAIL_ON),
            metavar="FIGURES",
            validate=parse_fail_on,
            form="list",
            example=("-fail-on", "throughput"),
        ),
        Option(
            "allow-different",
            "switch",
            "diff runs whose settings differ (listed first)",
            "gates",
            default=False,
            gnu=True,
            example=("--allow-different",),
        ),
        Option(
            "json",
            "path",
            "the diff as JSON",
            "outputs",
            metavar="FILE",
            dest="json_path",
            place="out",
            example=("-json", "diff.json"),
        ),
        Option(
            "report",
            "path",
            "the diff as one self-contained HTML page: both runs, and what moved beyond the noise",
            "outputs",
            metavar="FILE.html",
            dest="report_path",
            place="out",
            example=("-report", "diff.html"),
        ),
        *SCENARIO,
    ),
)
COMMANDS = (RUN, AUDIT, DIFF)
