"""Faults and failing work; the server and the path to it; CI gates and baselines."""

from __future__ import annotations

from pgmq_sim.actors.chaos import parse_chaos
from pgmq_sim.cli.option import (
    NOT_NEGATIVE,
    POSITIVE,
    SEED_DSN,
    Option,
    Output,
    Range,
    dsn_check,
)
from pgmq_sim.cli.outputs import (
    junit_file,
)
from pgmq_sim.model.checks import Check
from pgmq_sim.model.kinds import PoolerMode
from pgmq_sim.settings import (
    MAX_ATTEMPTS,
    MAX_SAMPLE_HZ,
    parse_listen_address,
)
from pgmq_sim.verdicts.checks import parse_checks


def _checks(text: str) -> tuple[Check, ...]:
    return parse_checks(text)


def _listen(text: str) -> tuple[str | None, int]:
    return parse_listen_address(text, "-metrics-port")


MORE_OPTIONS = (
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
        "the live audit: every S seconds the messages behind the watermark (all finished) are judged"
        " as one window, kept on the server and shown live, so the end judges only the last one (0:"
        " the whole audit at the end); see [The live audit](docs/audit.md#the-live-audit)",
        "faults",
        default=10.0,
        metavar="S",
        range=NOT_NEGATIVE,
        example=("-audit-window", "30"),
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
        choices=PoolerMode,
        example=("-pooler", "none"),
    ),
    Option(
        "listen-dsn",
        "text",
        "with `-wakeup notify`: where the listening connection goes (a direct connection; needed"
        " behind a transaction pooler)",
        "path",
        metavar="URL",
        validate=dsn_check("-listen-dsn"),
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
        validate=dsn_check("-pooler-admin"),
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
        " `pgmq_sim_bystander`, `pgmq_sim_windows`, `pgmq_sim_marks` (and, behind a transaction pooler,"
        " the `pgmq_sim_*` functions) even if"
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
        fallback=lambda _: (),
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
        output=Output("JUnit", junit_file, rank=3, documents=False),
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
        conflicts=(
            ("compare", "-baseline diffs one run; drop -compare, or diff a cell's JSON with pgmq-sim diff"),
        ),
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
        setting=("metrics_host", "metrics_port"),
        parse=_listen,
        numbers=True,
        example=("-metrics-port", "127.0.0.1:0"),
    ),
)
