"""Why a run that died ended: the error that ended it (or cut it short) goes through the same
classification as the faults (model/reasons: its SQLSTATE, the server's message; the setting and
where it is set, from the role's timeouts read before the run), and that cause is its limit. What
the run measured before it died (idle workers, polling, a rate served) is no limit of a run that
died: it is never `workers`, `polling` or `none`."""

from __future__ import annotations

from pgmq_sim.model.kinds import Outcome
from pgmq_sim.model.quantities import count_text
from pgmq_sim.model.reasons import Cause, RunEnding, ServerReason
from pgmq_sim.model.timeouts import ServerTimeouts
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.cause import MeasuredCause, Resource
from pgmq_sim.verdicts.policies import RunShape, policy_fix, remedy_value, run_shape

LOST = frozenset({Cause.CLOSED, Cause.TERMINATED, Cause.SHUTDOWN, Cause.CRASH, Cause.NOT_ACCEPTING})
SESSION_POLICIES = frozenset({Cause.IDLE_IN_TRANSACTION, Cause.TRANSACTION_TIMEOUT, Cause.IDLE_SESSION})


def ending_line(ending: RunEnding, timeouts: ServerTimeouts | None, shape: RunShape) -> str:
    """The one line a run that died prints: who met what, the cause named (a setting: its value and
    where it is set), and the fix."""
    said = ending.reason
    what = _cause(said, timeouts)
    return f"{ending.who} failed: {what}: {said.text()}; {_fix(said, timeouts, shape)}"


def _cause(said: ServerReason, timeouts: ServerTimeouts | None, many: bool = False) -> str:
    s = timeouts.get(said.setting) if timeouts is not None and said.setting else None
    if s is not None and timeouts is not None:
        ended = "session" if said.cause in SESSION_POLICIES else "statement"
        return f"the server's {timeouts.said(s)} ended " + (f"{ended}s" if many else f"its {ended}")
    return said.label


def _fix(said: ServerReason, timeouts: ServerTimeouts | None, shape: RunShape) -> str:
    s = timeouts.get(said.setting) if timeouts is not None and said.setting else None
    if said.policy and timeouts is not None and s is not None:
        value = remedy_value(shape)
        there = timeouts.set_there(s, value)
        role = timeouts.raise_it(s, value)
        if there is not None and there != role:
            return f"raise it where it is set ({there}), or for the queue's role only ({role})"
        return policy_fix(said.cause, timeouts, s, shape)
    if said.policy:
        return f"raise {said.setting} for the queue's role"
    if said.cause in LOST:
        return "check the server's log for why the session ended, and run again once it is steady"
    return "check the server and the SQL files"


def ended(r: RunResult) -> MeasuredCause | None:
    """The limit of a run that died, or cut short by a server policy that let no message pass; None
    for a run that ended as asked."""
    if r.outcome in (Outcome.COMPLETED, Outcome.INTERRUPTED):
        return None
    shape = run_shape(r.settings, r.claim_skips_locked)
    if r.outcome == Outcome.STALLED:
        return _stalled(r, shape)
    ending = r.ended_by
    if ending is None:
        resource = Resource.OUTAGE if r.outcome != Outcome.FAILED else Resource.ERROR
        return MeasuredCause(resource, f"the run died: {r.error or r.outcome}")
    said = ending.reason
    evidence = (
        f"the run died at {r.elapsed_s:.1f} s: {ending.who} met {_cause(said, r.timeouts)}: {said.text()}"
    )
    met = next((m for m in r.server_reasons if m.cause == said.cause), None)
    if met is not None and met.count > 1:
        evidence += f" ({count_text(met.count)} time(s) in the run, from {met.first_s:.1f} s)"
    if said.policy:
        return MeasuredCause(Resource.SERVER_POLICY, evidence, _fix(said, r.timeouts, shape))
    if said.cause in LOST or r.outcome != Outcome.FAILED:
        return MeasuredCause(Resource.OUTAGE, evidence, _fix(said, r.timeouts, shape))
    return MeasuredCause(Resource.ERROR, evidence, _fix(said, r.timeouts, shape))


def _stalled(r: RunResult, shape: RunShape) -> MeasuredCause | None:
    """A stall while a server policy ended every try: no message could pass."""
    since = r.elapsed_s - r.settings.stall_timeout
    met = [m for m in r.server_reasons if m.reason.policy and m.last_s >= since]
    if not met:
        return None
    top = max(met, key=lambda m: m.count)
    said = top.reason
    evidence = (
        f"no message passed in the last {r.settings.stall_timeout:g} s while {_cause(said, r.timeouts, True)}"
        f" {count_text(top.count)} time(s) ({said.text()}, {top.when()}, {top.who()})"
    )
    return MeasuredCause(Resource.SERVER_POLICY, evidence, _fix(said, r.timeouts, shape))
