"""The run's options of --help's section on the server and the path to it: the pooler, the
listener's own connection, what the tool samples there, and the tables it may replace."""

from __future__ import annotations

from pgmq_sim.cli.option import SEED_DSN, Option, Range, dsn_check
from pgmq_sim.model.kinds import PoolerMode
from pgmq_sim.settings import MAX_SAMPLE_HZ

PATH_OPTIONS = (
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
)
