"""What hid messages from free workers: the hidden part of a cohort's latency account, explained from
what was measured while the run went, or called unexplained.

Each cause explains an amount of the cohort's hidden time, with its evidence:
- a cause seen at a time (a session outside the run holding locks a claim skips or waits on, in the
  lock census; an outage) explains the hidden time that fell in the seconds it was seen;
- a cause of the whole run explains up to what it can cost each message: the run's own claims
  locking more rows (or advisory locks) than they return, which other workers' claims skip; an idle
  worker's sleep between polls; a notified wake-up (a few round trips); a message falling due with
  nobody told (notify's fallback); a lease that had to pass before a message came back.
What no cause explains is unexplained, with the numbers and what was looked at."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.kinds import WakeupMode
from pgmq_sim.model.quantities import count_text, ms_text, seconds_text
from pgmq_sim.result.holders import HolderSeen
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.cause import (
    SEED_CLAIM_FIX,
    SEEN_MARGIN_S,
    MeasuredCause,
    Resource,
    foreign_holder_fix,
)
from pgmq_sim.verdicts.lock_holders import held_text, holder_text

EXCESS = 1.5  # a worker holding this many rows (or advisory locks) per message it may hold locks more
WAKE_TRIPS = 3  # a notified wake-up: the enqueue's commit, the notification, the claim
MISSED_POLLS = 1.5  # hidden this many poll intervals and more: the polls' claims missed the message


@dataclass(frozen=True)
class HiddenAccount:
    """The run's slowest 1%'s hidden time and its causes."""

    hidden_ms: float  # per message of the cohort
    total_ms: float  # the cohort's mean end-to-end time
    causes: tuple[MeasuredCause, ...]  # each with its share of the cohort's hidden time, the largest first
    looked_at: str
    by_type: tuple[tuple[str, float], ...] = ()  # each type's slowest 1%, hidden ms per message, most first

    @staticmethod
    def share(cause: MeasuredCause) -> float:
        return cause.share or 0.0

    @property
    def unexplained(self) -> float:
        return max(0.0, 1.0 - sum(self.share(c) for c in self.causes))

    def types_text(self) -> str:
        """e.g. 'type1's slowest 1% 3410 ms each, type2's 2.1 ms, type3's 1.9 ms'."""
        said = [f"{t}'s {ms_text(ms)}" for t, ms in self.by_type]
        if said:
            said[0] = said[0].replace("'s ", "'s slowest 1% ", 1) + " each"
        return ", ".join(said)

    def as_json(self) -> dict[str, Any]:
        return {
            "hidden_ms": round(self.hidden_ms, 3),
            "share_of_slowest": round(self.hidden_ms / self.total_ms, 3) if self.total_ms > 0 else 0.0,
            "causes": [c.as_json() for c in self.causes],
            "unexplained_share": round(self.unexplained, 3),
            "looked_at": self.looked_at,
            "hidden_ms_by_type": {t: round(ms, 3) for t, ms in self.by_type},
        }


def hidden_account(r: RunResult) -> HiddenAccount | None:
    """The run's slowest 1%'s hidden time, explained; the type whose slowest were hidden most is the
    one whose empty claims are counted."""
    slowest = r.latency.p99 if r.latency is not None else None
    if r.latency is None or slowest is None or slowest.hidden_ms <= 0:
        return None
    by_type = sorted(
        ((t, c["p99"].hidden_ms) for t, c in r.latency.per_type.items() if "p99" in c), key=lambda tc: -tc[1]
    )
    starved = by_type[0][0] if by_type else None
    hidden_s = dict(slowest.hidden_by_second)
    total = sum(hidden_s.values())
    causes: list[MeasuredCause] = []
    left = 1.0
    pervasive = _pervasive(r, slowest.hidden_ms, starved, slowest.messages)
    for cause in _seen(r, hidden_s, total, starved) + pervasive:
        share = min(HiddenAccount.share(cause), left)
        if share >= 0.005:
            causes.append(MeasuredCause(cause.resource, cause.evidence, cause.fix, share=share))
            left -= share
    causes.sort(key=lambda c: -HiddenAccount.share(c))
    looked = ["the lock census" + (f" ({count_text(r.locks.samples)} samples)" if r.locks else ": not taken")]
    outages = sum(1 for f in r.faults if f.outage_s)
    looked += [f"{count_text(outages)} outage(s)", f"the wake-up ({r.settings.wakeup})"]
    if r.settings.delay is not None:
        looked.append("due times")
    if r.settings.tx == "split" or (r.queue or {}).get("delivery") == "at-least-once":
        looked.append("leases")
    return HiddenAccount(
        slowest.hidden_ms, slowest.total_ms, tuple(causes), ", ".join(looked), tuple(by_type)
    )


def _window(hidden_s: dict[int, float], first_s: float, last_s: float) -> float:
    lo, hi = math.floor(first_s - SEEN_MARGIN_S), math.ceil(last_s + SEEN_MARGIN_S)
    return sum(v for s, v in hidden_s.items() if lo <= s < hi)


def _seen(r: RunResult, hidden_s: dict[int, float], total: float, starved: str | None) -> list[MeasuredCause]:
    """Causes seen at a time: their share is the hidden time that fell while they were seen."""
    if total <= 0:
        return []
    found = []
    for holder in r.locks.holders if r.locks else ():
        share = _window(hidden_s, holder.first_s, holder.last_s) / total
        if share > 0:
            seen = f"{holder_text(holder)} (in {count_text(holder.samples)} census samples)"
            evidence = seen + _empty_text(r, starved, "; ")
            found.append(MeasuredCause(Resource.LOCKS, evidence, _holder_fix(holder), share=share))
    for fault in r.faults:
        if not fault.outage_s:
            continue
        share = _window(hidden_s, fault.at_s, fault.at_s + fault.outage_s) / total
        if share > 0:
            found.append(
                MeasuredCause(
                    Resource.OUTAGE,
                    f"{fault.kind} at {fault.at_s:.1f} s, out {seconds_text(fault.outage_s)}"
                    f" ({fault.detail}): the workers were free but could not claim",
                    "judge the queue from a run without the outage, and the outage by its recovery",
                    share=share,
                )
            )
    return sorted(found, key=lambda c: -HiddenAccount.share(c))


def _holder_fix(holder: HolderSeen) -> str:
    return foreign_holder_fix(
        holder.pid, holder.application, held_text(holder), "the claims skip or wait for what it holds"
    )


def _empty_text(r: RunResult, queue_type: str | None, lead: str) -> str:
    """e.g. '; type1's claims came back empty 2,480 times in the run' ('' for none)."""
    empty = sum(w.empty_claims for w in r.workers if queue_type is None or w.queue_type == queue_type)
    whose = f"{queue_type}'s claims" if queue_type else "the workers' claims"
    return f"{lead}{whose} came back empty {count_text(empty)} times in the run" if empty else ""


def _pervasive(r: RunResult, per_msg: float, starved: str | None, messages: int) -> list[MeasuredCause]:
    """Causes of the whole run, each explaining up to what it can cost a message (the fallback's
    finds, up to an interval for each message they took)."""
    if per_msg <= 0:
        return []
    found = []
    own = _own_claims(r, starved)
    if own is not None:
        found.append(own)
    s = r.settings
    claim_p99 = r.claim_ms.get("p99") or 0.0
    complete_p99 = r.complete_ms.get("p99") or 0.0
    if s.wakeup == WakeupMode.POLL:
        bound = s.poll_interval * 1000 + claim_p99
        found.append(
            MeasuredCause(
                Resource.POLLING,
                f"idle workers poll every {s.poll_interval:g} s after an empty claim: a message that"
                f" arrives meanwhile waits for the next poll (up to {ms_text(bound)} with the claim's p99)",
                "-wakeup notify, so an idle worker is woken when a message arrives",
                share=min(1.0, bound / per_msg),
            )
        )
    else:
        if s.delay is not None:
            bound = s.poll_interval * 1000 + claim_p99
            found.append(
                MeasuredCause(
                    Resource.WAKEUP,
                    f"a message falling due is announced to no one: the fallback claims once per"
                    f" {s.poll_interval:g} s for each type (-delay {s.delay})",
                    f"a shorter -poll-interval than {s.poll_interval:g} s, if due messages must start sooner",
                    share=min(1.0, bound / per_msg),
                )
            )
        finds = sum(w.fallback_finds for w in r.workers if starved is None or w.queue_type == starved)
        if finds:
            bound = s.poll_interval * 1000 + claim_p99
            whose = f"{starved}'s" if starved else "a type's"
            found.append(
                MeasuredCause(
                    Resource.WAKEUP,
                    f"{whose} fallback claim (once per {s.poll_interval:g} s) found messages"
                    f" {count_text(finds)} times that no notification had woken a worker for (announced by no"
                    " insert, or claimable only later: a group freed, a retry or a lease due)",
                    share=min(1.0, bound / per_msg, finds * bound / (per_msg * max(1, messages))),
                )
            )
        bound = WAKE_TRIPS * max(claim_p99, complete_p99)
        found.append(
            MeasuredCause(
                Resource.WAKEUP,
                f"a notified wake-up takes about {WAKE_TRIPS} round trips (the enqueue's commit, the"
                f" notification, the claim): up to {ms_text(bound)} at this run's round-trip p99",
                share=min(1.0, bound / per_msg),
            )
        )
    retries = r.retries
    if retries is not None and (retries.recovered or retries.lost_ownership or retries.crashes):
        found.append(
            MeasuredCause(
                Resource.LEASE,
                f"{count_text(retries.recovered)} message(s) came back only once their lease ({s.lease:g} s)"
                f" passed or their owner stopped ({count_text(retries.crashes)} worker crash(es),"
                f" {count_text(retries.lost_ownership)} completion(s) too late)",
                share=min(1.0, s.lease * 1000 / per_msg),
            )
        )
    missed = _missed_by_claims(r, per_msg, starved)
    if missed is not None:
        found.append(missed)
    return found


def _missed_by_claims(r: RunResult, per_msg: float, starved: str | None) -> MeasuredCause | None:
    """Polling, the slowest waited hidden for several polls: each poll's claim came back empty while
    they could be taken. The claim did not see them (its plan: SKIP LOCKED over rows it only passes,
    a LIMIT before the rows it could take)."""
    poll_ms = r.settings.poll_interval * 1000
    empty = sum(w.empty_claims for w in r.workers if starved is None or w.queue_type == starved)
    if r.settings.wakeup != WakeupMode.POLL or not empty or per_msg < MISSED_POLLS * poll_ms:
        return None
    whose = f"{starved}'s claims" if starved else "the claims"
    blocks = r.server_cost.blocks_per_msg if r.server_cost is not None else None
    read = f" (the server read {blocks:.0f} buffers per message)" if blocks is not None else ""
    fix = (
        SEED_CLAIM_FIX
        if r.strategy == "seed"
        else "check the claim with EXPLAIN: it must find a free group's head whatever other workers hold"
        " (SKIP LOCKED on the rows it returns, not on rows its scan only passes)"
    )
    return MeasuredCause(
        Resource.CLAIM_PLAN,
        f"the slowest waited {per_msg / poll_ms:.1f} poll intervals each: {whose} came back empty"
        f" {count_text(empty)} times while messages they could take waited{read}",
        fix,
        share=1.0,
    )


def _own_claims(r: RunResult, starved: str | None) -> MeasuredCause | None:
    """The run's own claims holding more than they return: the other workers' claims skip it."""
    census = r.locks
    batch = max(1, r.settings.batch)
    if census is None or not census.worker_holdings:
        return None
    rows, advisory = census.rows_per_worker, census.advisory_per_worker
    if rows >= EXCESS * batch and rows >= 2:
        what = f"{rows:.1f} rows of the queue (up to {count_text(census.worker_rows_max)})"
    elif advisory >= EXCESS * batch and advisory >= 2:
        what = f"{advisory:.1f} advisory locks"
    else:
        return None
    evidence = (
        f"a worker holding a message held {what} on average in {count_text(census.worker_holdings)}"
        f" census samples, for {count_text(batch)} message(s) a claim may return: each claim locks more than"
        " it returns, and the other workers' claims skip what it holds" + _empty_text(r, starved, "; ")
    )
    functions = (r.queue or {}).get("claim_reads_from") or []
    if functions:  # its locks are the function's: the claim's own text has none to change
        fix = (
            f"the claim reads from {', '.join(functions)}, which locks more rows than it returns: change"
            " that function to lock only what it returns, or choose a claim that does"
        )
    else:
        fix = (
            "lock only the rows the claim returns: pick them with LIMIT $2 in the query that has FOR UPDATE"
            " SKIP LOCKED (a row lock or try-lock taken in a scan over more rows stays held to the commit)"
        )
    return MeasuredCause(Resource.CLAIM_LOCKS, evidence, fix, share=1.0)
