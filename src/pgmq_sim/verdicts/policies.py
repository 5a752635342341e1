"""The server's timeouts against the run: before it, where one would end the run's sessions or
statements (a line each, or a refusal where no message could ever pass), and after it, what the
ones met cost, with the setting, its value, where it is set, and the fix.

The choice: refuse (exit 2) only where every message must fail (the work's minimum already idles
the claim's transaction past the idle-in-transaction or transaction timeout); where only some
would, say so and run, so the verdict shows what the setting did."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.model.quantities import count_text
from pgmq_sim.model.reasons import Cause, ReasonCount
from pgmq_sim.model.timeouts import ServerSetting, ServerTimeouts, shown_ms
from pgmq_sim.settings import Settings

SHORT_STATEMENT_MS = 100  # a statement_timeout below it cancels some of any queue's statements


@dataclass(frozen=True)
class RunShape:
    """What of a run a server timeout can cut."""

    work_min_ms: float  # a claim's work: its batch's messages, one after another
    work_max_ms: float
    work_flag: str  # as given: -work-ms 1-10
    in_transaction: bool  # the work runs inside the claim's transaction (-tx single)
    idle_s: float  # the longest a waiting worker's session idles: -poll-interval, or notify's fallback
    notify: bool
    claim_waits: bool  # the claim waits for rows another worker holds (no SKIP LOCKED)


def run_shape(settings: Settings, claim_skips_locked: bool) -> RunShape:
    batch = settings.batch
    return RunShape(
        work_min_ms=settings.work.min_ms * batch,
        work_max_ms=settings.work.max_ms * batch,
        work_flag=f"-work-ms {settings.work}" + (f" x -batch {batch}" if batch > 1 else ""),
        in_transaction=settings.tx == TxMode.SINGLE,
        idle_s=settings.poll_interval,
        notify=settings.wakeup == WakeupMode.NOTIFY,
        claim_waits=not claim_skips_locked,
    )


@dataclass(frozen=True)
class Conflict:
    setting: str
    line: str
    refuse: bool  # no message could ever pass


def conflicts(t: ServerTimeouts, shape: RunShape) -> list[Conflict]:
    """Each timeout that would end the run's sessions or statements, in one line with its fix."""
    found = []
    for s in t.settings:
        if not s.on:
            continue
        if s.name in ("idle_in_transaction_session_timeout", "transaction_timeout") and shape.in_transaction:
            found += _work_in_transaction(t, s, shape)
        elif s.name == "idle_in_transaction_session_timeout" and s.ms < SHORT_STATEMENT_MS:
            found.append(
                Conflict(
                    s.name,
                    f"{t.said(s)} is shorter than a busy client may pause between two round trips of one"
                    " transaction (-tx split claims in two: the claim, then its attempt's bookkeeping): the"
                    " server will end those sessions, and the workers reconnect and claim again; to avoid"
                    f" it: {t.raise_it(s, remedy_value(shape))}",
                    refuse=False,
                )
            )
        elif s.name == "idle_session_timeout" and shape.idle_s * 1000 >= s.ms:
            waits = "the fallback an idle worker waits for a notification" if shape.notify else (
                "the sleep of an idle worker between empty claims"
            )  # fmt: skip
            found.append(
                Conflict(
                    s.name,
                    f"{t.said(s)} is shorter than {waits} (-poll-interval {shape.idle_s:g} s): the server"
                    " will end those sessions and the workers reconnect (counted by their reason, not"
                    f" as an outage); to avoid it: a -poll-interval below {s.shown}, or"
                    f" {t.raise_it(s, '0')} (off)",
                    refuse=False,
                )
            )
        elif (
            s.name in ("statement_timeout", "lock_timeout")
            and shape.claim_waits
            and shape.work_max_ms >= s.ms
        ):
            found.append(
                Conflict(
                    s.name,
                    f"{t.said(s)} is shorter than a claim may wait for a row another worker holds through"
                    f" its work ({shape.work_flag}; the claim does not skip locked rows): the server"
                    " will cancel those claims and they are tried again; to avoid it: a claim with FOR"
                    f" UPDATE SKIP LOCKED, or {t.raise_it(s, remedy_value(shape))}",
                    refuse=False,
                )
            )
        elif s.name == "statement_timeout" and s.ms < SHORT_STATEMENT_MS:
            found.append(
                Conflict(
                    s.name,
                    f"{t.said(s)} is shorter than some of the team's statements will take (a new session's"
                    " first ones, a commit waiting for the WAL, a claim scanning a backlog): the server"
                    " will cancel those claims, completions and enqueues, and they are rolled back and"
                    " tried again (the tool's own work runs under its own bounds); to avoid it:"
                    f" {t.raise_it(s, remedy_value(shape))}",
                    refuse=False,
                )
            )
    return found


def _work_in_transaction(t: ServerTimeouts, s: ServerSetting, shape: RunShape) -> list[Conflict]:
    low, high = shape.work_min_ms, shape.work_max_ms
    if high < s.ms:
        return []
    what = "idles" if s.name.startswith("idle") else "holds"
    fix = (
        f"-tx split, a -work-ms range below {s.shown}, or {t.raise_it(s, remedy_value(shape))} for the"
        " queue's role"
    )
    if low >= s.ms:
        return [
            Conflict(
                s.name,
                f"{t.said(s)} would end every worker's session: the work ({shape.work_flag}) runs inside"
                f" the claim's transaction (-tx single) and {what} it at least {low:g} ms, so no message"
                f" could be completed; use {fix}",
                refuse=True,
            )
        ]
    share = f"about {(high - s.ms) / (high - low):.0%} of the claims" if high > low else "the claims"
    return [
        Conflict(
            s.name,
            f"{t.said(s)} is shorter than the work of {share} ({shape.work_flag}, inside the claim's"
            f" transaction with -tx single): the server will end those sessions and their messages are"
            f" tried again; the run goes on, and its verdict says what the setting cost; to avoid it: {fix}",
            refuse=False,
        )
    ]


def remedy_value(shape: RunShape) -> str:
    """A value that leaves the run's work room: twice its longest, in whole seconds, at least 1 s."""
    return shown_ms(max(1000, math.ceil(2 * shape.work_max_ms / 1000) * 1000))


@dataclass(frozen=True)
class PolicyMet:
    """A server policy the run met: what it ended, the setting behind it, and the fix."""

    setting: str
    said: str  # 'idle_in_transaction_session_timeout = 5ms (ALTER ROLE queue SET)', or the name alone
    met: ReasonCount
    fix: str

    @property
    def count(self) -> int:
        return self.met.count

    def evidence(self) -> str:
        """'the server's idle_in_transaction_session_timeout = 5ms (ALTER ROLE queue SET) ended 686
        sessions of 4 workers from 0.0 s to 6.4 s (terminating connection due to ..., 25P03)'"""
        m = self.met
        what = (
            f"ended {count_text(m.lost)} session(s)"
            if m.lost
            else f"canceled {count_text(m.count)} statement(s)"
        )
        return f"the server's {self.said} {what} of {m.who()} {m.when()} ({m.message}, {m.sqlstate})"

    def as_json(self) -> dict[str, Any]:
        return {"setting": self.setting, "said": self.said, "count": self.count, "fix": self.fix}


def policies_met(
    reasons: tuple[ReasonCount, ...], timeouts: ServerTimeouts | None, shape: RunShape
) -> tuple[PolicyMet, ...]:
    """The policies among the reasons met, each with its setting as read before the run."""
    found = []
    for met in reasons:
        name = met.reason.setting
        if name is None:
            continue
        s = timeouts.get(name) if timeouts is not None else None
        said = timeouts.said(s) if s is not None and timeouts is not None else name
        found.append(PolicyMet(name, said, met, policy_fix(met.cause, timeouts, s, shape)))
    return tuple(sorted(found, key=lambda p: -p.count))


def policy_fix(cause: Cause, t: ServerTimeouts | None, s: ServerSetting | None, shape: RunShape) -> str:
    name = s.name if s is not None else str(cause)
    raised = t.raise_it(s, remedy_value(shape)) if t is not None and s is not None else f"raise {name}"
    if cause in (Cause.IDLE_IN_TRANSACTION, Cause.TRANSACTION_TIMEOUT):
        if shape.in_transaction:
            below = f", a -work-ms range below {s.shown}" if s is not None else ""
            return (
                f"the work runs inside the claim's transaction: use -tx split (the work then holds no"
                f" transaction open){below}, or {raised} for the queue's role"
            )
        return f"a transaction of the run stayed open past {name}: {raised} for the queue's role"
    if cause == Cause.IDLE_SESSION:
        return (
            f"idle workers' sessions outlived {name}: a -poll-interval below it, or"
            f" {t.raise_it(s, '0') if t is not None and s is not None else f'{name} = 0'} (off) for the"
            " queue's role"
        )
    if cause == Cause.LOCK_TIMEOUT:
        return (
            f"statements waited on locks longer than {name} and were canceled, then tried again: find who"
            f" held the locks (the server's waits, pg_locks), or {raised} for the queue's role"
        )
    return (
        f"statements ran longer than {name} and were canceled, then tried again: find what made them slow"
        f" (a lock wait, a claim that scans), or {raised} for the queue's role"
    )


def reasons_since(
    reasons: tuple[ReasonCount, ...], timeouts: ServerTimeouts | None, since_s: float
) -> list[str]:
    """The server's reasons met since a time, one line each (what a stall met meanwhile)."""
    lines = []
    for r in reasons:
        if r.last_s < since_s:
            continue
        said = r.reason
        s = timeouts.get(said.setting) if timeouts is not None and said.setting else None
        what = timeouts.said(s) if timeouts is not None and s is not None else said.label
        lines.append(
            f"the server ended the run's {'sessions' if r.lost else 'statements'} meanwhile, for {what}:"
            f" {said.text()}, {count_text(r.count)} time(s) in the run, the last at {r.last_s:.1f} s"
        )
    return lines
