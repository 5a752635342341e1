"""The named phases of a run: check, prepare, produce, start, (watch), halt; collect is
engine/collecting. Each takes the run's state and its parts; none knows which carrier, feed or goal
it was given."""

from __future__ import annotations

import dataclasses
import json
import random
import time
import uuid
from collections.abc import Callable

import psycopg

from pgmq_sim.actors.bystander import BASELINE_S, Bystander
from pgmq_sim.actors.chaos import FaultActions, FaultSchedule, pick
from pgmq_sim.actors.housekeeping import Housekeeper, PoolerWatch
from pgmq_sim.actors.ownership import BEAT_S
from pgmq_sim.actors.producer import MessageSource
from pgmq_sim.actors.threads import join_all
from pgmq_sim.actors.worker import session_plan
from pgmq_sim.db.claims import install_functions, try_claim
from pgmq_sim.db.connection import is_connection_lost
from pgmq_sim.db.pooler import PAUSE_TIMEOUT_S, PoolerConsole
from pgmq_sim.db.samples import SampleSession
from pgmq_sim.db.statements import NOTIFY_FUNCTION
from pgmq_sim.db.trial import DesignTexts, try_design
from pgmq_sim.dsn import reason
from pgmq_sim.engine.bounded import call_bounded
from pgmq_sim.engine.census import read_census, slot_holders
from pgmq_sim.engine.ending import name_the_ending
from pgmq_sim.engine.judging import LiveJudge
from pgmq_sim.engine.owners import refuse_foreign_owners
from pgmq_sim.engine.parts import RunParts
from pgmq_sim.engine.path import choose_path
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.ticker import find_ticker, start_ticker
from pgmq_sim.errors import FaultRefused, SimError, UsageError
from pgmq_sim.model.keys import GroupTally
from pgmq_sim.model.kinds import FaultKind, Outcome, TxMode, WakeupMode
from pgmq_sim.model.skew import hottest_share, key_sampler
from pgmq_sim.verdicts.audit import judge_audit
from pgmq_sim.verdicts.policies import conflicts, run_shape

STOP_GRACE_S = 2.0
OWN_CONNECTIONS = 2  # the tool's own: each phase's work, and the housekeeper's
SLOTS_KEPT = 3  # pool exhaustion's *0 leaves these free: the tool's own readings, a reconnect


def check(state: RunState, parts: RunParts) -> None:
    """Everything that can fail before the database is changed."""
    settings, signals, db, views = state.settings, state.signals, state.db, state.views
    # the first connections say, in one line, why there are none (never the password)
    state.path = path = choose_path(state)
    budget: int | None
    budget, role_left = call_bounded(db.connection_budget, 30, signals, "connection check", True)
    if path.pooled:  # the pooler's pool bounds what the server sees, not the workers
        state.pool_server_room = min(left for left in (budget, role_left) if left is not None)
        budget = role_left = None
    faults = sum(f.kind.sessions(f.count) for f in state.chaos)  # the faults' own sessions
    own = OWN_CONNECTIONS + (1 if settings.audit and settings.audit_window > 0 else 0)  # + the live audit's
    needed = (
        own
        + (1 if settings.bystander else 0)
        + parts.carrier.connections(state)
        + parts.feed.connections(state)
        + faults
    )
    lefts = [left for left in (budget, role_left) if left is not None]
    state.spare_connections = min(lefts) - needed if lefts else None
    for left, whose, own_role in (
        (budget, "the server", False),
        (role_left, "this role's CONNECTION LIMIT", True),
    ):
        if left is not None and needed > left >= needed - faults:  # the run fits, its faults do not
            kinds = ", ".join(sorted({str(f.kind) for f in state.chaos if f.kind.sessions(f.count)}))
            raise FaultRefused(
                f"{kinds} needs {faults} session(s) of its own beside the run's {needed - faults}, but"
                f" {whose} allows {left} more now ({slot_holders(state, own_role)}); ask for fewer, or"
                " raise the limit"
            )
        if left is not None and needed > left:
            raise UsageError(
                f"-workers {settings.workers} needs {needed} connections (workers, producer,"
                f" listener, fault sessions and the tool's own {own}) but {whose} allows {left} more now"
                f" ({slot_holders(state, own_role)}); use fewer workers or raise max_connections"
            )
    check_timeouts(state)
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
    state.pooler = reach_pooler(state)
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
    if not state.design.seed_table:
        foreign += try_folder_design(state)
    if state.design.requires == "pgq":
        find_ticker(state)
    refuse_foreign_owners(state, [name for name, (exists, ours) in tables.items() if exists and ours])
    if foreign and not settings.replace_tables:
        raise UsageError(
            f"table(s) or function(s) {', '.join(foreign)} exist and were not created by pgmq-sim; a run"
            " drops and recreates them: use another database, or pass -replace-tables to replace them"
        )
    if (
        state.design.seed_table
        and settings.payload is not None
        and not call_bounded(
            lambda: db.seed_schema_has_payload(state.design), 60, signals, "schema check", True
        )
    ):
        raise UsageError(
            f"-payload-bytes needs a payload column in msg_queue, and schema file {state.design.schema} has"
            " none; add one (payload bytea) or drop -payload-bytes"
        )
    previous = (
        call_bounded(db.previous_run, 30, signals, "previous run check", True)
        if tables["pgmq_sim_run"][0]
        else None
    )
    if previous is not None and not previous.finished:
        state.note(
            f"replacing the data of an unfinished run (started {previous.started_at:%Y-%m-%d %H:%M:%S},"
            f" {previous.produced} of {previous.target} messages produced);"
            " `pgmq-sim audit` checks such a queue before a new run replaces it"
        )
    capped = settings.groups_cap() if state.design.ordered else None
    if capped is not None:  # said once every check has passed: before the run, never beside a refusal
        state.note(capped)
    parts.carrier.open(state)


def check_timeouts(state: RunState) -> None:
    """The server's timeouts as the run's role has them, and where each is set: one that would end
    every message's session refuses the run; one that would end some is said, and the run goes on."""
    timeouts = call_bounded(state.views.timeouts, 30, state.signals, "timeouts check", True)
    state.timeouts = timeouts
    for conflict in conflicts(timeouts, run_shape(state.settings, state.design.skips_locked)):
        if conflict.refuse:
            raise UsageError(conflict.line)
        state.note(conflict.line)


def try_folder_design(state: RunState) -> list[str]:
    """A folder design runs once in a transaction rolled back: its statements, every file of it, must
    work together, and touch only tables its schema creates. Returned: tables of others its schema
    would drop. The trial says whether the design returns its own ids, and their type."""
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
    state.id_type = trial.id_type
    if design.product is not None:
        state.product = design.product.as_json()
        state.note(design.product.line)
    elif trial.required is not None and design.requires is not None:
        state.product = {"name": design.requires, "version": trial.required_version or "unknown"}
        state.note(trial.required)
    state.db.shape = dataclasses.replace(state.db.shape, keyed=trial.id_type is not None)
    return list(trial.dropped_foreign)


def reach_pooler(state: RunState) -> PoolerConsole | None:
    """The pooler's console, when given: it must answer and know the run's database. Without it, a
    pooled run says that the pooler's side went unobserved."""
    settings, path = state.settings, state.path
    assert path is not None
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


def prepare(state: RunState, parts: RunParts) -> None:
    """Install the queue in one transaction (a failure inside it changes nothing), then open the log.
    The run's record keeps whether it must drain, so `pgmq-sim audit` judges it as the run does."""
    settings, design = state.settings, state.design
    assert state.path is not None
    on = state.timeouts.settings if state.timeouts is not None else ()
    team = tuple((t.name, t.ms) for t in on if t.on and t.name in ("statement_timeout", "lock_timeout"))
    state.session = session = session_plan(
        settings, design, state.path.transaction_pooled, state.path.pooled, state.id_type, team
    )
    for writer in state.producers:
        writer.prepared = not state.path.transaction_pooled
        writer.id_type = state.id_type
    recorded = settings.as_json() | {
        "drains": parts.goal.drains,
        "design": design.as_json() | {"claim_sql": design.claim.text},
    }
    if not design.seed_table:  # what `pgmq-sim audit` needs to judge it again
        recorded["design"] |= {
            "pending_sql": design.pending and design.pending.text,
            "keyed": state.id_type is not None,
        }
    state.run_id = uuid.uuid4().hex
    record = (state.run_id, settings.fill_db, design.ordered, settings.audit, recorded)
    state.log.open()
    state.changed = True
    try:
        tables = call_bounded(
            lambda: state.db.install(
                design,
                audited=settings.audit,
                notify=settings.wakeup == WakeupMode.NOTIFY,
                retrying=settings.retrying,
                record=record,
                try_claim=try_claim(session, settings.queue_types[0]),
                functions=install_functions(session, None if design.seed_table else design.enqueue.text),
                keyed=session.keyed,
                types=settings.queue_types,
                bystander=settings.bystander is not None,
            ),
            60,
            state.signals,
            "installing the schema",
        )
    except UsageError:
        state.changed = False
        raise
    except psycopg.Error as exc:
        if not is_connection_lost(exc):
            state.changed = False  # the install's one transaction rolled back
        raise
    state.db.shape = dataclasses.replace(state.db.shape, tables=tables)
    read_census(state, tables)
    start_ticker(state)
    if state.server.embedded:  # ours to change: count each statement's cost
        try:
            call_bounded(state.db.track_statements, 30, state.signals, "pg_stat_statements")
        except psycopg.Error as exc:
            state.note(f"per-statement cost not tracked: {reason(exc, *state.dsns)}", screen=False)
    server_now = call_bounded(state.db.server_clock, 30, state.signals, "server clock")
    state.source = MessageSource(
        settings.queue_types,
        key_sampler(settings.key_skew, settings.orders),
        state.source_rng,
        server_now,
        GroupTally(
            settings.queue_types,
            settings.orders,
            hottest_share(settings.key_skew, settings.orders, settings.types),
        ),
        settings.payload,
        settings.priority,
        settings.delay,
    )
    state.log.event("settings " + json.dumps(settings.as_json(), sort_keys=True, default=str))
    state.log.event(
        f"schema ready from {design.schema}; queue design {design.label} ({design.origin}), claim"
        f" {design.claim}; tables {', '.join(tables)}; wake-up {settings.wakeup}; seed {settings.seed}"
    )


def start(state: RunState, parts: RunParts) -> None:
    if state.settings.bystander:  # alone first: what the neighbour sees without the queue
        bystander = state.bystander = Bystander(
            state.server.dsn,
            state.settings.bystander,
            state.rng.random(),
            state.stop,
            state.errors.reporter("bystander"),
        )
        call_bounded(bystander.baseline, BASELINE_S + 30, state.signals, "bystander alone", True)
        state.threads.append(bystander)
        bystander.start()
    parts.carrier.ready(state)
    state.meters.start()
    paced = parts.feed.paced
    if not paced:  # a backlog: its clock runs from the first worker's start
        state.begin_clock()
    threads = parts.carrier.go(state)
    state.threads += threads
    state.log.event(f"starting {parts.carrier.describe(state)}{parts.feed.describe()}")
    for thread in threads:
        thread.start()
    if paced:  # a rate: its second 0 is when the workers can claim, not while they connect
        parts.carrier.connected(state)
        state.begin_clock()
        parts.feed.start(state)
    start_housekeeping(state, parts)


def start_housekeeping(state: RunState, parts: RunParts) -> None:
    """Recovery and sampling (a task on the run's loop), the pooler's watch and the fault schedule
    (threads of their own), wherever the workers run."""
    settings = state.settings
    assert state.path is not None
    housekeeper = state.housekeeper = Housekeeper(
        SampleSession(state.server.dsn, prepared=not state.path.transaction_pooled),
        state.db.shape,
        state.timeline,
        state.clock,
        state.halt,
        state.log,
        recover_every_s=min(BEAT_S, settings.lease / 4)
        if settings.tx == TxMode.SPLIT and (state.design.seed_table or state.design.recover is not None)
        else None,
        waits=(state.waits, 1 / settings.wait_sample_hz) if settings.wait_sample_hz else None,
        census=state.locks if settings.wait_sample_hz else None,
        producer_waits=state.producer_waits if settings.paced else None,
    )
    state.on_loop().start("housekeeping", housekeeper.run)
    if judged_live(state):
        state.live_judge = LiveJudge(
            state.server.dsn,
            state.db.shape,
            state.run_id,
            settings.audit_window,
            state.produced.watermark,
            lambda counts, messages: judge_audit(
                counts,
                expected=messages,
                ordered=state.design.ordered,
                claim_sql=state.design.claim.text,
                at_least_once=state.design.at_least_once,
                complete=False,
                retrying=settings.retrying,
            ),
            settings.retrying,
            not state.path.pooled,  # a pooler may hand its session to another client
            state.clock,
            state.stop,
            state.errors.reporter("live audit"),
            lambda exc: state.note(
                f"live audit: a window was not closed ({reason(exc, *state.dsns)}); it tries again"
            ),
        )
        state.threads.append(state.live_judge)
        state.live_judge.start()
    if state.pooler is not None:
        state.pooler_watch = PoolerWatch(
            state.pooler, state.timeline, state.clock, state.stop, state.errors.reporter("pooler watch")
        )
        state.threads.append(state.pooler_watch)
        state.pooler_watch.start()
    if state.chaos:
        state.schedule = FaultSchedule(
            state.chaos,
            fault_actions(state, parts),
            state.clock,
            state.stop,
            state.record_fault,
            lambda exc: reason(exc, *state.dsns),
        )
        state.schedule.start()


def judged_live(state: RunState) -> bool:
    """The live audit runs where a group's order is enqueue order (by priority, a later message may
    pass); a spread run's watermark is its processes' lowest msg_id still owed, less one."""
    settings = state.settings
    return settings.audit and settings.audit_window > 0 and not state.db.shape.by_priority


def fault_actions(state: RunState, parts: RunParts) -> FaultActions:
    rng = random.Random(state.rng.random())
    server_faults = state.server_faults

    def kill_connections(count: int) -> str:
        pids = pick(rng, state.views.worker_backends(), count)  # found on the server: any host's
        if not pids:
            raise SimError("nothing to kill: no backend of the run's workers was found on the server")
        ended = server_faults.terminate(pids)
        if not ended:
            shown = ", ".join(map(str, pids))
            raise SimError(f"nothing to kill: pid {shown} had ended or could not be ended")
        what = f"terminated {ended} worker backend(s): pid {', '.join(map(str, pids))}"
        if state.path is not None and state.path.pooled:  # the pooler's, last serving a worker
            what += (
                f"; server connections behind the {state.path.pooler} pooler: a worker notices only when"
                " it was in a transaction on one (see connections lost)"
            )
        return what

    def kill_worker(count: int) -> str:
        names = [state.stats[i].name for i in sorted(pick(rng, list(range(len(state.stats))), count))]
        parts.carrier.crash(state, names)
        return "crashed " + ", ".join(names)

    def restart_server() -> str:
        if state.server.restart is not None:
            began = time.monotonic()
            state.server.restart()
            return f"embedded server restarted in {time.monotonic() - began:.2f} s"
        server_faults.crash_restart()
        return "crash restart: a backend was SIGKILLed, the postmaster reset every session"

    def hold(kind: FaultKind, count: int, seconds: float, holding: Callable[[str], None]) -> str:
        before = state.timeline.last_dead_tuples()
        tables = state.db.shape.tables
        if kind == FaultKind.READERS:
            did = server_faults.readers(count, seconds, state.stop, tables, holding)
        elif kind == FaultKind.POOL_EXHAUSTION:
            spare = max(0, (state.spare_connections or 0) - SLOTS_KEPT)  # *0: every spare slot
            if not count and not spare:
                raise UsageError(
                    "no spare connection slot is known (behind a pooler, or none left but the tool's"
                    " own); give the count: pool-exhaustion:N"
                )
            did = server_faults.take_slots(count or spare, seconds, state.stop, holding)
        else:
            what = {FaultKind.LOCK_TABLE: "lock_queue", FaultKind.IDLE_IN_TX: "idle_in_tx"}
            did = server_faults.hold(what.get(kind, "hold_snapshot"), seconds, state.stop, tables, holding)
        after = state.timeline.last_dead_tuples()
        return f"{did}; dead tuples {before} -> {after}"

    def pooler(kind: FaultKind, seconds: float | None) -> str:
        console = state.pooler
        assert console is not None  # the check refused pooler faults without -pooler-admin
        if kind == FaultKind.RECONNECT_POOLER:
            console.command("RECONNECT")
            return "the pooler closes each server connection as it is released (RECONNECT)"
        if kind == FaultKind.KILL_POOLER:
            console.command("KILL")
            console.resume()  # KILL leaves the database paused
            return "the pooler dropped every client and server connection of the database (KILL)"
        assert seconds is not None
        began = time.monotonic()
        paused = 0.0
        try:
            console.command("PAUSE", PAUSE_TIMEOUT_S)  # answers when the transactions in flight end
            paused = time.monotonic() - began
            state.stop.wait(max(0.0, seconds - paused))
        finally:  # never left paused: not by a stop, not by a PAUSE that did not answer in time
            console.resume()
        return f"resumed (PAUSE took {paused:.2f} s to drain the transactions in flight)"

    return FaultActions(kill_connections, kill_worker, restart_server, hold, pooler)


def halt(state: RunState, parts: RunParts) -> None:
    """Stop every task and thread, within bounds; in-flight messages roll back."""
    if not state.elapsed:
        state.elapsed = state.clock()
    state.stop.set()
    loop = state.loop
    if loop is not None:
        loop.halt_now()
    parts.carrier.stop(state)
    if state.schedule is not None:
        state.schedule.join_helpers(STOP_GRACE_S)
    grace = 0.2 if state.signals.hurry.is_set() else STOP_GRACE_S
    left = loop.stop(grace) if loop is not None else []
    stuck = [t.name for t in join_all(state.threads, grace)]
    if loop is not None:
        loop.close()
    if left or stuck:
        state.note(
            f"{len(left) + len(stuck)} task(s) still waiting on the server were left behind:"
            f" {', '.join(left + stuck)}",
            screen=False,
        )
    parts.carrier.close(state)
    if state.pooler is not None:
        state.pooler.close()
    if state.pgqd is not None:
        state.pgqd.stop()
    state.log.flush()  # a write that fails now (a full disk) still ends the run as failed
    described = state.errors.describe(*state.dsns)
    if described is not None and state.outcome == Outcome.COMPLETED:
        state.outcome, state.error = described
    name_the_ending(state)
    if not state.changed:
        return
    state.log.event(f"{state.outcome}: {state.counter.count} processed in {state.elapsed:.2f} s")
    if state.error:
        state.log.event(f"error: {state.error}")
    for cause in state.causes:
        state.log.event(f"stall: {cause}")
