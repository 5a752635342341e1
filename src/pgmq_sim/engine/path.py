"""The path to the server, decided before anything changes: which pooler mode the run works in (the
flag, or what the probe found), what that mode changes, what the role may not do, and the TLS in use."""

from __future__ import annotations

from pgmq_sim.db.path import probe
from pgmq_sim.engine.bounded import call_bounded
from pgmq_sim.engine.state import RunState
from pgmq_sim.errors import UsageError
from pgmq_sim.model.kinds import PoolerMode, TxMode, WakeupMode
from pgmq_sim.result.serverpath import RunPath


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
