"""The enqueue side judged: what made its slowest 1% slow, read from the enqueue account (the
client's parts, measured per enqueue; the server's round trip, split by what the producer's sessions
were seen doing, and who blocked them). The largest part is the cause; a part the samples cannot
split (none taken) is unexplained, never `none`."""

from __future__ import annotations

import math

from pgmq_sim.model.facts import NOTIFY_QUEUE
from pgmq_sim.model.quantities import count_text, ms_text
from pgmq_sim.result.enqueues import EnqueueAccount
from pgmq_sim.result.waits import BlockerSeen
from pgmq_sim.verdicts.cause import MeasuredCause, Resource, foreign_holder_fix, notify_fix
from pgmq_sim.verdicts.lock_holders import blocker_text
from pgmq_sim.verdicts.server_waits import lock_text, other_text

HELD_SHARE = 0.5  # the producer's samples on a lock from which more sessions would only queue on it
BUSY_TARGET = 0.7  # a pool sized so its sessions are this busy at the offered rate keeps bursts short


def enqueue_cause(
    a: EnqueueAccount, offered_per_s: float | None, groups: int | None, run_notifies: bool = True
) -> MeasuredCause:
    """What the slowest 1% of enqueues waited for most, with its evidence and its one fix
    (`run_notifies`: the run's wake-up notifies, so its own notifications are one fix's business)."""
    split = a.split(a.slowest_parts_s)
    name, share = max(split.items(), key=lambda kv: kv[1])
    mean_ms = a.mean_ms(a.slowest_parts_s, a.slowest_count)
    p99 = a.latency_ms["p99"] or 0.0
    head = f"the slowest 1% of enqueues took {ms_text(mean_ms)} from due time to commit (p99 {ms_text(p99)}),"
    head += f" {share:.0%} {a.part_text(name)}"
    round_trip_ms = a.round_trip_ms["p50"] or 0.0  # an episode's waits do not make the pool small
    capacity = a.sessions * 1000 / round_trip_ms if round_trip_ms else None
    locked = (a.server_shares or {}).get("locks", 0.0) >= HELD_SHARE  # more sessions queue on the lock
    if (
        name == "session"
        and a.server_shares
        and (locked or not (offered_per_s and capacity and offered_per_s >= capacity))
    ):  # sessions enough for the rate at their usual round trip (all busy in an episode), or their round
        # trips held by a lock: the cause is what their round trips waited for
        busy_with, busy_share = max(a.server_shares.items(), key=lambda kv: kv[1])
        all_busy = f"all {count_text(a.sessions)} were busy, their"
        who = "its one session was busy, its" if a.sessions == 1 else all_busy
        head += f" while {who} round trips {busy_share:.0%} {a.part_text('server:' + busy_with)}"
        name = "server:" + busy_with
    if name == "session":
        evidence = (
            f"{head}: {_sessions(a.sessions)} busy, an enqueue's round trip {ms_text(round_trip_ms)} (p50)"
        )
        if capacity is not None:
            evidence += f", so they carry at most about {capacity:.0f}/s"
        fix = "more producer sessions (-producers: the application's pool)"
        if offered_per_s and round_trip_ms:
            want = max(a.sessions + 1, math.ceil(offered_per_s * round_trip_ms / 1000 / BUSY_TARGET))
            fix = (
                f"-producers {want}: at {offered_per_s:g}/s and {ms_text(round_trip_ms)} a round trip,"
                f" {count_text(want)} sessions are {BUSY_TARGET:.0%} busy"
            )
        return MeasuredCause(Resource.PRODUCER, evidence, fix, share)
    if name == "group":
        said = f" over {count_text(groups)} groups" if groups else ""
        return MeasuredCause(
            Resource.ORDERING,
            f"{head}: an enqueue of a key waits for the key's last one to commit, as an application that"
            f" keeps a key's order must{said}",
            "spread the keys (more -orders), or send a key's messages in one transaction (-enqueue-batch)",
            share,
        )
    if name == "server":
        return MeasuredCause(
            Resource.UNEXPLAINED,
            f"{head}: the producer's sessions were not sampled (-wait-sample-hz 0), so the server's part"
            " is not split",
            None,
            share,
        )
    kind = name.removeprefix("server:")
    waits = a.waits
    if kind == "locks" and waits is not None:
        return _locks(head, share, lock_text(waits), waits.blockers, run_notifies)
    if kind == "wal-flush":
        return MeasuredCause(
            Resource.WAL_FLUSH,
            f"{head}: each enqueue's commit waits for its WAL to reach the disk",
            "synchronous_commit = off for the producer's role (ALTER ROLE ... SET synchronous_commit = off:"
            " a crash may lose the last enqueues), or batch them (-enqueue-batch), or faster WAL storage",
            share,
        )
    if kind == "cpu":
        return MeasuredCause(
            Resource.SERVER_CPU,
            f"{head}: the enqueue's statement ran on the server's CPU (its triggers and index updates with"
            " it)",
            "look at what the enqueue runs: its triggers and indexes (pg_stat_user_functions, with"
            " track_functions = pl)",
            share,
        )
    return MeasuredCause(
        Resource.SERVER_WAITS,
        f"{head}" + (f" ({other_text(waits)})" if waits is not None and kind == "other" else ""),
        None,
        share,
    )


def _sessions(count: int) -> str:
    return "the one producer session was" if count == 1 else f"all {count_text(count)} producer sessions were"


def _locks(
    head: str, share: float, events: str, blockers: tuple[BlockerSeen, ...], run_notifies: bool
) -> MeasuredCause:
    """The lock the producer's sessions waited for, named with its holder and the holder's database."""
    if not blockers:
        return MeasuredCause(
            Resource.LOCKS, f"{head} [{events}]: the blockers were not caught in a sample", None, share
        )
    foreign = [b for b in blockers if not b.ours]
    top = (foreign or list(blockers))[0]
    evidence = f"{head} [{events}]: {blocker_text(top)}"
    if top.target == NOTIFY_QUEUE:
        holders = len({b.pid for b in blockers if b.target == NOTIFY_QUEUE})
        evidence += f"; {count_text(holders)} session(s) seen holding or ahead for it"
        return MeasuredCause(Resource.LOCKS, evidence, notify_fix(run_notifies), share)
    if not top.ours:
        fix = foreign_holder_fix(top.pid, top.application, f"{top.mode or 'a lock'} on {top.target}",
                                 "the producer's inserts wait for it")  # fmt: skip
        return MeasuredCause(Resource.LOCKS, evidence, fix, share)
    return MeasuredCause(
        Resource.LOCKS,
        evidence + ": the producer's sessions wait for each other",
        "look at what concurrent enqueues share: a unique index, a counter row, a parent row a foreign"
        " key points to",
        share,
    )
