"""The check phase: everything that can refuse the run, read before anything is changed (the
path and its pooler, the server's settings and timeouts, the connection budget, a folder design
tried in a transaction rolled back, the foreign objects), so a refusal leaves the server as it
was."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import psycopg

from pgmq_sim.actors.worker import session_plan
from pgmq_sim.db.path import probe
from pgmq_sim.db.pooler import PoolerConsole
from pgmq_sim.db.statements import NOTIFY_FUNCTION
from pgmq_sim.db.trial import DesignTexts, try_design
from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import NotAnswering, call_bounded
from pgmq_sim.engine.judging import judged_live
from pgmq_sim.engine.owners import refuse_foreign_owners
from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.preflight import Preflight
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.ticker import find_ticker
from pgmq_sim.errors import FaultRefused, UsageError
from pgmq_sim.model.kinds import FaultKind, PoolerMode, TxMode, WakeupMode
from pgmq_sim.model.quantities import count_text
from pgmq_sim.model.timeouts import ServerTimeouts
from pgmq_sim.result.serverpath import RunPath
from pgmq_sim.verdicts.policies import conflicts, run_shape

OWN_CONNECTIONS = 2  # the tool's own: each phase's work, and the housekeeper's


def check(state: RunState, parts: RunParts) -> Preflight:
    """Everything that can fail before the database is changed; what it established, returned whole
    once every check passed (a refusal leaves no half-made record, and closes the console it reached)."""
    settings, signals, db, views = state.settings, state.signals, state.db, state.views
    # the first connections say, in one line, why there are none (never the password)
    path = choose_path(state)
    spare_connections, pool_server_room = check_connections(state, parts, path)
    timeouts = check_timeouts(state)
    if any(f.kind == FaultKind.RESTART_SERVER for f in state.chaos) and state.server.restart is None:
        if not settings.chaos_allow_restart:
            raise FaultRefused(
                "-chaos restart-server on a -dsn server restarts every session on it;"
                " allow it with -chaos-allow-restart (the embedded server needs no flag)"
            )
        if not call_bounded(views.may_run_programs, 30, signals, "privilege check", True):
            raise FaultRefused(
                "-chaos restart-server on a -dsn server needs a superuser (or pg_execute_server_program):"
                " it crash-restarts the server by killing a backend from COPY TO PROGRAM"
            )
    with contextlib.ExitStack() as refused:
        pooler = reach_pooler(state, path)
        if pooler is not None:  # kept by the run once every check passed (the halt closes it)
            refused.callback(pooler.close)
        tables = call_bounded(db.tables, 30, signals, "table check", True)
        functions = call_bounded(db.functions, 30, signals, "function check", True)
        tables |= {
            name: found
            for name, found in functions.items()
            if (settings.wakeup == WakeupMode.NOTIFY if name == NOTIFY_FUNCTION else path.transaction_pooled)
        }
        if not state.design.seed_table:  # a folder design's tables are its own: tried below
            tables.pop("msg_queue", None)
        foreign = [name for name, (exists, ours) in tables.items() if exists and not ours]
        trial = try_folder_design(state) if not state.design.seed_table else None
        if trial is not None:
            foreign += trial.dropped
        ticker, pgqd = find_ticker(state) if state.design.requires == "pgq" else (None, None)
        owned = [name for name, (exists, ours) in tables.items() if exists and ours]
        refuse_foreign_owners(state, owned, timeouts.role)
        if foreign and not settings.replace_tables:
            raise UsageError(
                f"table(s) or function(s) {', '.join(foreign)} exist and were not created by pgmq-sim; a"
                " run drops and recreates them: use another database, or pass -replace-tables to replace"
                " them"
            )
        if (
            state.design.seed_table
            and settings.payload is not None
            and not call_bounded(
                lambda: db.seed_schema_has_payload(state.design), 60, signals, "schema check", True
            )
        ):
            raise UsageError(
                f"-payload-bytes needs a payload column in msg_queue, and schema file {state.design.schema}"
                " has none; add one (payload bytea) or drop -payload-bytes"
            )
        previous = (
            call_bounded(db.previous_run, 30, signals, "previous run check", True)
            if tables["pgmq_sim_run"][0]
            else None
        )
        if previous is not None and not previous.finished:
            of = f" of {count_text(previous.target)}" if previous.target is not None else ""
            state.note(
                f"replacing the data of an unfinished run (started {previous.started_at:%Y-%m-%d %H:%M:%S},"
                f" {count_text(previous.produced)}{of} messages produced);"
                " `pgmq-sim audit` checks such a queue before a new run replaces it"
            )
        capped = settings.groups_cap() if state.design.ordered else None
        if capped is not None:  # said once every check has passed: before the run, never beside a refusal
            state.note(capped)
        parts.carrier.open(state)
        id_type = trial.id_type if trial is not None else None
        preflight = Preflight(
            path=path,
            timeouts=timeouts,
            session=session_plan(
                settings, state.design, path.transaction_pooled, path.pooled, id_type, team_timeouts(timeouts)
            ),
            spare_connections=spare_connections,
            pool_server_room=pool_server_room,
            pooler=pooler,
            id_type=id_type,
            product=trial.product if trial is not None else None,
            ticker=ticker,
            pgqd=pgqd,
        )
        refused.pop_all()
    return preflight


def team_timeouts(timeouts: ServerTimeouts) -> tuple[tuple[str, int], ...]:
    """The role's statement and lock timeouts that are on (name, ms): the workers' sessions keep
    their bookkeeping under them."""
    on = timeouts.settings
    return tuple((t.name, t.ms) for t in on if t.on and t.name in ("statement_timeout", "lock_timeout"))


def check_connections(state: RunState, parts: RunParts, path: RunPath) -> tuple[int | None, int | None]:
    """The connection budget: a run (or its faults' sessions) that needs more than the server and the
    role allow is refused, naming who holds the slots. Returned: the slots spare beyond the run's own,
    and, pooled, the room left the pooler."""
    settings, signals, db = state.settings, state.signals, state.db
    budget: int | None
    budget, role_left = call_bounded(db.connection_budget, 30, signals, "connection check", True)
    pool_server_room = None
    if path.pooled:  # the pooler's pool bounds what the server sees, not the workers
        pool_server_room = min(left for left in (budget, role_left) if left is not None)
        budget = role_left = None
    faults = sum(f.kind.sessions(f.count) for f in state.chaos)  # the faults' own sessions
    own = OWN_CONNECTIONS + (1 if judged_live(settings, db.shape) else 0)  # + the live audit's
    needed = (
        own
        + (1 if settings.bystander else 0)
        + parts.carrier.connections(state)
        + parts.feed.connections(state)
        + faults
    )
    lefts = [left for left in (budget, role_left) if left is not None]
    spare_connections = min(lefts) - needed if lefts else None
    for left, whose, own_role in (
        (budget, "the server", False),
        (role_left, "this role's CONNECTION LIMIT", True),
    ):
        if left is not None and needed > left >= needed - faults:  # the run fits, its faults do not
            kinds = ", ".join(sorted({str(f.kind) for f in state.chaos if f.kind.sessions(f.count)}))
            raise FaultRefused(
                f"{kinds} needs {count_text(faults)} session(s) of its own beside the run's"
                f" {count_text(needed - faults)}, but {whose} allows {count_text(left)} more now"
                f" ({slot_holders(state, own_role)}); ask for fewer, or raise the limit"
            )
        if left is not None and needed > left:
            raise UsageError(
                f"-workers {settings.workers} needs {count_text(needed)} connections (workers, producer,"
                f" listener, fault sessions and the tool's own {own}) but {whose} allows {count_text(left)}"
                " more now"
                f" ({slot_holders(state, own_role)}); use fewer workers or raise max_connections"
            )
    return spare_connections, pool_server_room


def check_timeouts(state: RunState) -> ServerTimeouts:
    """The server's timeouts as the run's role has them, and where each is set: one that would end
    every message's session refuses the run; one that would end some is said, and the run goes on."""
    timeouts = call_bounded(state.views.timeouts, 30, state.signals, "timeouts check", True)
    for conflict in conflicts(timeouts, run_shape(state.settings, state.design.skips_locked)):
        if conflict.refuse:
            raise UsageError(conflict.line)
        state.note(conflict.line)
    return timeouts


@dataclass(frozen=True)
class FolderTrial:
    """What a folder design's trial established: tables of others its schema would drop, the type of
    the ids its enqueue returns (None: it returns none of its own), the product it runs."""

    dropped: list[str]
    id_type: str | None
    product: dict[str, str] | None


def try_folder_design(state: RunState) -> FolderTrial:
    """A folder design runs once in a transaction rolled back: its statements, every file of it, must
    work together, and touch only tables its schema creates. The trial says whether the design
    returns its own ids, and their type."""
    design = state.design
    texts = DesignTexts(
        folder=str(design.folder),
        schema=design.schema.text,
        enqueue=design.enqueue.text,
        claim=design.claim.text,
        completions=tuple((form.path.name, form.text) for form in design.completions),
        fail=design.fail.text if design.fail is not None else None,
        split=design.transaction == TxMode.SPLIT,
        pending=design.pending.text if design.pending is not None else None,
        notify=design.notify.text if design.notify is not None else None,
        recover=design.recover.text if design.recover is not None else None,
        requires=design.requires,
        types=state.settings.queue_types,
    )
    trial = call_bounded(
        lambda: try_design(state.db.sessions, texts), 60, state.signals, "design trial", True
    )
    if trial.foreign_used:
        file, table = trial.foreign_used[0]
        raise UsageError(
            f"{file} of {design.folder} uses table {table}, which its schema.sql does not create; a run"
            " changes only tables it created: create it in schema.sql (drop it first, with -replace-tables"
            " if it is not pgmq-sim's)"
        )
    product = None
    if design.product is not None:
        product = design.product.as_json()
        state.note(design.product.line)
    elif trial.required is not None and design.requires is not None:
        product = {"name": design.requires, "version": trial.required_version or "unknown"}
        state.note(trial.required)
    state.db.shape = dataclasses.replace(state.db.shape, keyed=trial.id_type is not None)
    return FolderTrial(list(trial.dropped_foreign), trial.id_type, product)


def reach_pooler(state: RunState, path: RunPath) -> PoolerConsole | None:
    """The pooler's console, when given: it must answer and know the run's database. Without it, a
    pooled run says that the pooler's side went unobserved."""
    settings = state.settings
    if settings.pooler_admin is None:
        kinds = sorted({str(f.kind) for f in state.chaos if f.kind.pooler})
        if kinds:
            raise FaultRefused(
                f"-chaos {', '.join(kinds)} needs the pooler's admin console: pass -pooler-admin URL"
                " (database pgbouncer, a user in its admin_users)"
            )
        if path.pooled:
            state.note(
                f"the {path.pooler} pooler's side was not observed (its waiting clients, its server"
                " connections): pass -pooler-admin URL to read its pools each second",
                screen=False,
            )
        return None
    if not path.pooled:
        raise UsageError(
            f"-pooler-admin was given but the connection is not pooled ({path.facts.evidence});"
            " connect -dsn through the pooler, or leave -pooler-admin out"
        )
    console = PoolerConsole(settings.pooler_admin, path.facts.database)
    try:
        pulse = call_bounded(console.pulse, 30, state.signals, "pooler console", True)
    except psycopg.Error as exc:
        raise UsageError(
            f"-pooler-admin: the pooler's console did not serve SHOW POOLS: {reason(exc, *state.dsns)};"
            " give the console's URL (database pgbouncer, a user in admin_users or stats_users)"
        ) from None
    if pulse is None:
        raise UsageError(
            f"-pooler-admin: that pooler has no pool for database {path.facts.database!r}, which -dsn"
            " connects to; give the console of the pooler -dsn goes through"
        )
    return console


def choose_path(state: RunState) -> RunPath:
    """Probe the path (the first connections: a refusal is one line at once) and decide the mode."""
    settings = state.settings
    facts = call_bounded(lambda: probe(state.server.dsn), 30, state.signals, "connecting", True)
    mode, detected = settings.pooler, settings.pooler == PoolerMode.AUTO
    if detected:
        mode = facts.pooler
    elif facts.pooler == PoolerMode.TRANSACTION and mode != PoolerMode.TRANSACTION:
        raise UsageError(
            f"-pooler {mode} but the connection is pooled per transaction ({facts.evidence});"
            " give -pooler transaction, or connect through a session pool"
        )
    changes: list[str] = []
    if mode == PoolerMode.TRANSACTION:
        changes.append("no session state: statements run as server functions, not PREPAREd per session")
        changes.append(
            "two round trips per message: the next claim is not sent with the commit (it would keep"
            " the server connection)"
        )
        if settings.wakeup == WakeupMode.NOTIFY:
            if settings.listen_dsn is None:
                raise UsageError(
                    "-wakeup notify needs a session of its own for LISTEN, and a transaction pooler gives"
                    f" none ({facts.evidence}); pass -listen-dsn URL (a direct connection to the server)"
                    " or use -wakeup poll"
                )
            changes.append("LISTEN on -listen-dsn (a direct connection)")
        if settings.tx == TxMode.SPLIT:
            changes.append(
                "split mode owns messages by worker token and heartbeat (a server connection serves many)"
            )
    if mode == PoolerMode.SESSION:
        changes.append(
            "the pool's size caps how many workers are connected at once; the rest wait for a server"
            " connection"
        )
    if mode != PoolerMode.NONE:
        if mode == PoolerMode.TRANSACTION:
            changes.append(
                "the pool's size caps how many workers hold a transaction at once; claim latency includes"
                " the wait"
            )
        changes.append("connection budget not checked against the server (the pooler's pool bounds it)")
    if not facts.sees_all_sessions:  # in the report, not on screen: a failed check stays one line
        line = (
            "this role cannot see other roles' sessions (no pg_read_all_stats): a stall caused by another"
            " role's session is named by pid only, and the oldest snapshot is looked for among this role's"
        )
        state.note(line, screen=False)
    return RunPath(mode, detected, tuple(changes), facts)


def slot_holders(state: RunState, own_role: bool) -> str:
    """Who holds the server's connection slots (the role's own sessions, for its CONNECTION LIMIT)."""
    try:
        slots = call_bounded(state.views.slots, 30, state.signals, "connection slots", True)
    except (psycopg.Error, NotAnswering) as exc:
        return f"who holds them not read: {reason(exc, *state.dsns)}"
    return slots.said(slots.role if own_role else None)
