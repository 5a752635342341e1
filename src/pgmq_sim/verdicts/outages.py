"""What each fault did to the run, from the timeline: how long no message completed (the outage),
how long from the path's return until the rate before the fault was back (the recovery), how many
worker connections were lost, and what the pooler's console showed meanwhile. An outage that no
injected fault explains (a server restarted by somebody else, a pooler's own restart) is reported as
a fault the run met: a pause in completions with a worker connection lost in it, or one of a second
or more while work waited and the producer wrote nothing or the pooler held clients waiting. A pause
that lasts until the run's end is an outage too, not recovered by the end of the run.

A met outage names what the server said of the connections lost in it (model/reasons), and the
met outages of one cause are one row: how many, the first and the last, the seconds down in all.
A session the server's own policy ended (its idle-in-transaction or idle-session timeout) is no
sign of an outage: the policies met, and the statements the server ended, are rows of their own
(`reason_faults`), one per cause."""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from collections.abc import Sequence

from pgmq_sim.model.events import Fault
from pgmq_sim.model.quantities import count_text
from pgmq_sim.model.reasons import LABELS, Cause, ReasonCount
from pgmq_sim.model.timeouts import ServerTimeouts
from pgmq_sim.result.holders import HolderSeen
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.verdicts.cause import SEEN_MARGIN_S
from pgmq_sim.verdicts.lock_holders import holder_text

MET = "outage"  # the kind of a fault the run met rather than injected
HELD = "lock held"  # a pause the run met while a session outside it held a lock of the queue's
POLICY = "server-policy"  # a server policy met: one row per cause
SERVER_ERROR = "server-error"  # statements (or reconnects) the server ended for another reason
BEFORE_S = 5  # the rate before a fault: the median of the whole seconds before it
BACK_SHARE = 0.9  # back to the rate: a whole second at 90% of it or more
HABIT = 3  # pauses in the seconds before a fault that make a habit of pausing
HABIT_MARGIN = 1.25  # a pause up to this much longer than the habit's median is the habit
NEAR_S = 1.0  # a pause in completions that began this soon after a fault's end is the fault's
MET_MIN_S = 1.0  # a pause without a lost connection is met as an outage from this long


def fault_effects(
    faults: Sequence[Fault],
    gaps: Sequence[tuple[float, float]],
    losses: Sequence[float],
    samples: Sequence[SecondSample],
    end_s: float | None = None,
    causes: Sequence[tuple[float, Cause]] = (),
) -> list[Fault]:
    """The faults with their effects, in time order, the met outages among them. `gaps` may end with
    the pause from the last completion to the run's end (`end_s`): it counts only while work waited.
    `causes`: why connections were lost, when (a met outage's cause; the outages of one are one row)."""
    gaps = [(a, b) for a, b in gaps if not _open(b, end_s) or _waiting(samples, a, b)]
    out: list[Fault] = []
    explained: list[tuple[float, float]] = []
    for index, fault in enumerate(faults):
        if fault.kind.endswith(" end"):
            out.append(fault)
            continue
        ends = [f.at_s for f in faults[index + 1 :] if f.kind == fault.kind + " end"]
        until = ends[0] if ends else fault.at_s
        pause = max(
            ((a, b) for a, b in gaps if b > fault.at_s and a <= until + NEAR_S),
            key=lambda g: g[1] - max(g[0], fault.at_s),
            default=None,
        )
        began = fault.at_s
        # workers that sleep when idle pause completions again and again: a pause no longer than
        # those before it is not the fault's (a one-off stall before it is no such habit)
        habit = [b - a for a, b in gaps if began - BEFORE_S <= a < began]
        usual = statistics.median(habit) if len(habit) >= HABIT else 0.0
        if pause is not None and pause[1] - max(pause[0], began) <= HABIT_MARGIN * usual:
            pause = None
        back = pause[1] if pause else until
        explained.append((began - NEAR_S, max(back, until) + NEAR_S))
        out.append(_measured(fault, began, back, until, losses, samples, pause is not None, end_s))
    met: dict[str, list[tuple[Fault, int]]] = {}  # by cause: each pause met, and the losses in it
    for a, b in gaps:
        if any(lo <= a <= hi or lo <= b <= hi for lo, hi in explained):
            continue
        lost = [t for t in losses if a <= t <= b]
        why = Counter(cause for t, cause in causes if a <= t <= b).most_common(1)
        cause = f" to {LABELS[why[0][0]]}" if why else ""
        said = [f"{count_text(len(lost))} worker connection(s) lost{cause}"] if lost else []
        key = [f"worker connections lost{cause}"] if lost else []  # what the outages of one row share
        if b - a >= MET_MIN_S and _waiting(samples, a, b):
            stalled = _stalled_s(samples, a, b)
            if stalled:
                said.append(f"the producer wrote nothing for {stalled} s while messages were due")
                key.append("the producer wrote nothing while messages were due")
            waiting = _pooler(samples, a, b)[0]
            if waiting:
                said.append(
                    f"the pooler held up to {count_text(waiting)} client(s) waiting for a server connection"
                )
                key.append("the pooler held clients waiting for a server connection")
        if said:
            fault = Fault(a, MET, "not injected: " + "; ".join(said))
            measured = _measured(fault, a, b, b, losses, samples, True, end_s)
            met.setdefault("; ".join(key), []).append((measured, len(lost)))
    out += [_one_row(key, group) for key, group in met.items()]
    return sorted(out, key=lambda f: f.at_s)


def _one_row(key: str, pauses: list[tuple[Fault, int]]) -> Fault:
    """The met outages of one cause as one row: the first's time, how many, the last's, the seconds
    down and the connections lost in them, in all."""
    group = [fault for fault, _ in pauses]
    if len(group) == 1:
        return group[0]
    first, last = group[0], group[-1]
    return dataclasses.replace(
        first,
        detail=f"not injected: {key}",
        outage_s=round(sum(f.outage_s or 0.0 for f in group), 3),
        recovery_s=last.recovery_s,
        connections_lost=sum(lost for _, lost in pauses),
        open_at_end=last.open_at_end,
        pooler_waiting=max((f.pooler_waiting or 0 for f in group), default=0) or None,
        pooler_wait_ms=max((f.pooler_wait_ms or 0.0 for f in group), default=0.0) or None,
        count=len(group),
        last_s=last.at_s,
    )


def reason_faults(reasons: Sequence[ReasonCount], timeouts: ServerTimeouts | None) -> list[Fault]:
    """One row per server policy met (the setting, where it is set, what the server said) and per
    other reason the server ended statements for; lost connections of other causes are the met
    outages' (or an injected fault's)."""
    rows = []
    for r in reasons:
        said = r.reason
        who = r.who()
        if said.policy:
            s = timeouts.get(said.setting or "") if timeouts is not None else None
            setting = timeouts.said(s) if timeouts is not None and s is not None else said.setting
            ended = "ended sessions" if r.lost else "canceled statements"
            detail = f"{setting}: the server {ended} of {who}: {said.text()}"
            rows.append(Fault(r.first_s, POLICY, detail, count=r.count, last_s=r.last_s, sessions=r.sessions))
        elif r.lost < r.count:
            what = "refused connections" if said.cause == Cause.TOO_MANY_CONNECTIONS else "ended statements"
            label = _cancel_label(timeouts) if said.cause == Cause.CANCELED else said.label
            detail = f"{label}: the server {what} of {who}: {said.text()}"
            count = r.count - r.lost
            rows.append(
                Fault(r.first_s, SERVER_ERROR, detail, count=count, last_s=r.last_s, sessions=r.sessions)
            )
    return rows


def _cancel_label(timeouts: ServerTimeouts | None) -> str:
    """A cancel 'by user request' the run met. The run's own cancels (a statement it gave up on past
    its bound, or at its end) are never counted here; with the role's statement_timeout on,
    PostgreSQL says 'user request' for that timeout when it fires as one statement of a round trip
    ends and the next begins (the next statement resets the timeout's flag, not the pending cancel)."""
    s = timeouts.get("statement_timeout") if timeouts is not None else None
    if s is None or timeouts is None or not s.on:
        return "a cancel request the run did not send (another session's pg_cancel_backend)"
    return (
        f"a cancel the run did not send: most likely the server's {timeouts.said(s)} firing between"
        " two statements of one round trip (PostgreSQL then says 'user request'), else another"
        " session's pg_cancel_backend"
    )


def _open(b: float, end_s: float | None) -> bool:
    """A pause that lasted until the run ended."""
    return end_s is not None and b >= end_s - 1e-6


def _within(samples: Sequence[SecondSample], a: float, b: float) -> list[SecondSample]:
    """The seconds a pause overlaps."""
    return [s for s in samples if s.second + 1 > a and s.second < b]


def _waiting(samples: Sequence[SecondSample], a: float, b: float) -> bool:
    """Work waited through the pause: a backlog, or messages due that the producer had not written."""
    return any(s.backlog > 0 or (s.offered or 0) > s.arrived for s in _within(samples, a, b))


def _stalled_s(samples: Sequence[SecondSample], a: float, b: float) -> int:
    """Whole seconds inside the pause in which messages were due and none was written."""
    return sum(
        1 for s in samples if a <= s.second and s.second + 1 <= b and (s.offered or 0) > 0 == s.arrived
    )


def _pooler(samples: Sequence[SecondSample], a: float, b: float) -> tuple[int | None, float | None]:
    """The most clients the pooler's console showed waiting in these seconds, and the longest wait."""
    seen = [s for s in _within(samples, a, b) if s.pooler_waiting is not None]
    if not seen:
        return None, None
    return max(s.pooler_waiting or 0 for s in seen), max(s.pooler_wait_ms or 0.0 for s in seen)


def _measured(
    fault: Fault,
    began: float,
    back: float,
    until: float,
    losses: Sequence[float],
    samples: Sequence[SecondSample],
    paused: bool,
    end_s: float | None,
) -> Fault:
    processed = [s.processed for s in samples]
    lost = sum(1 for t in losses if began - 0.1 <= t <= max(back, until) + 1)
    before = processed[max(1, int(began) - BEFORE_S) : int(began)]
    rate = statistics.median(before) if before else None
    open_at_end = paused and _open(back, end_s)
    recovery = None
    if rate and not open_at_end:
        for second in range(int(back), len(processed) - 1):  # the last second may be partial
            if processed[second] >= BACK_SHARE * rate:
                recovery = max(0.0, second + 1 - back)
                break
    waiting, wait_ms = _pooler(samples, began, max(back, until))
    return dataclasses.replace(
        fault,
        outage_s=round(back - max(began, 0.0), 3) if paused else 0.0,
        recovery_s=None if recovery is None else round(recovery, 1),
        rate_before=rate,
        connections_lost=lost,
        open_at_end=open_at_end,
        pooler_waiting=waiting,
        pooler_wait_ms=wait_ms,
    )


def held_pauses(faults: Sequence[Fault], holders: Sequence[HolderSeen]) -> list[Fault]:
    """A pause the run met with no connection lost, while the lock census saw a session outside the
    run holding a lock on the queue (around it: SEEN_MARGIN_S): a lock held, not an outage."""
    out = []
    for fault in faults:
        if fault.kind == MET and not fault.connections_lost and fault.outage_s:
            end = max(fault.at_s + fault.outage_s, fault.last_s or 0.0)  # one cause's pauses: their span
            holder = next((h for h in holders if seen_around(h, fault.at_s, end)), None)
            if holder is not None:
                fault = dataclasses.replace(fault, kind=HELD, detail=f"not injected: {holder_text(holder)}")
        out.append(fault)
    return out


def seen_around(holder: HolderSeen, a: float, b: float) -> bool:
    """The census saw the holder within SEEN_MARGIN_S of [a, b] (seconds on the run's clock)."""
    return holder.first_s - SEEN_MARGIN_S <= b and holder.last_s + SEEN_MARGIN_S >= a
