"""The audit: exactly-once and per-group order, judged from the journal table, and when it fails,
why, from what was measured.

The journal is written by the completing transaction itself, so the verdict holds with -delmsg,
across processes and after crashes. The database layer counts (`AuditCounts`, with the evidence of
the first duplicates and order violations); this judges, and reads the claim's own text for what it
says about locks: a cause names the workers, the messages, the seconds and the statement.
"""

from __future__ import annotations

from dataclasses import fields

from pgmq_sim.model.facts import AuditCounts, OrderFacts
from pgmq_sim.model.locks import ClaimLocks, ClaimOrder
from pgmq_sim.model.quantities import count_text, ms_text
from pgmq_sim.result.audit import AuditVerdict

SHOW = 5  # offending msg_ids listed per kind


def judge_audit(
    counts: AuditCounts,
    *,
    expected: int,
    ordered: bool,
    complete: bool,
    retrying: bool = False,
    claim_sql: str | None = None,
    at_least_once: bool = False,
) -> AuditVerdict:
    """The verdict on these counts: every produced message processed exactly once (or, with
    retries, dead-lettered), none lost, none early; order among the processed ones. A partial run
    (stopped early, or bounded by time) may leave messages pending, never lose or repeat one.
    Redelivery (work started again: a retry, or a lease that passed in an at-least-once design)
    is counted, not failed."""
    values = {f.name: getattr(counts, f.name) for f in fields(AuditCounts)}
    failed = counts.duplicates or counts.missing or counts.early or (ordered and counts.order_violations)
    passed = not failed and (counts.left_behind == 0 or not complete)
    causes = [] if passed else _causes(counts, ordered, complete, claim_sql)
    return AuditVerdict(
        **values,
        expected=expected,
        ordered=ordered,
        complete=complete,
        retrying=retrying,
        passed=passed,
        problems=tuple(_problems(counts, ordered, complete, at_least_once)),
        causes=tuple(line for line, _ in causes),
        fix=causes[0][1] if causes else None,
        at_least_once=at_least_once,
    )


def _problems(counts: AuditCounts, ordered: bool, complete: bool, at_least_once: bool) -> list[str]:
    found = []
    if counts.duplicates:
        found.append(f"{count_text(counts.duplicates)} duplicate(s){_eg(counts.duplicate_ids)}")
    if counts.missing:
        found.append(f"{count_text(counts.missing)} missing{_eg(counts.missing_ids)}")
    if complete and counts.left_behind:
        found.append(f"{count_text(counts.left_behind)} left behind in the queue")
    if counts.early:
        found.append(f"{count_text(counts.early)} completed before their due time{_eg(counts.early_ids)}")
    if counts.order_violations:
        what = "order violation(s)" if ordered else "out-of-order (unordered strategy)"
        found.append(f"{count_text(counts.order_violations)} {what}{_eg(counts.order_violation_ids)}")
    if counts.priority_overtakings is not None:  # the design's group order: by priority, then enqueue
        found.append(
            "order judged by priority, then enqueue order (the design's own promise, queue.toml"
            f' order = "priority", as procrastinate\'s lock keeps it):'
            f" {count_text(counts.priority_overtakings)}"
            " message(s) overtook an earlier one of their group by a higher priority, as promised, not a"
            " violation"
        )
    if at_least_once and counts.redelivered and counts.redelivered_ids:
        found.append(
            f"{count_text(counts.redelivered)} redelivered after their lease passed (at-least-once by"
            " design),"
            f"{_eg(counts.redelivered_ids)}"
        )
    return found


def _causes(
    counts: AuditCounts, ordered: bool, complete: bool, claim_sql: str | None
) -> list[tuple[str, str]]:
    """(cause, fix) pairs, most telling first."""
    locks = ClaimLocks.read(claim_sql) if claim_sql is not None else None
    causes: list[tuple[str, str]] = []
    if counts.duplicates:
        causes.append(_duplicates(counts, locks))
    if ordered and counts.order_violations:
        order = ClaimOrder.read(claim_sql) if claim_sql is not None else None
        causes.append(_violations(counts, locks, order))
    if counts.early:
        causes.append(
            (
                f"{count_text(counts.early)} message(s) completed before their due time"
                f"{_eg(counts.early_ids)}: the claim took them before their not-before time ($5 of"
                " enqueue.sql)",
                "make the claim skip messages whose not-before time has not come (not_before <= now())",
            )
        )
    if complete and counts.left_behind and counts.duplicates:
        causes.append(
            (
                f"the run stopped at its count of completions with {count_text(counts.duplicates)} of them"
                f" second completions of a message: {count_text(counts.left_behind)} message(s) were never"
                " processed",
                "fix the duplicates first: each one stood in for a message left behind",
            )
        )
    if counts.missing:
        causes.append(
            (
                f"{count_text(counts.missing)} message(s) neither completed (no journal row), nor pending,"
                f" nor dead-lettered{_eg(counts.missing_ids)}: their state changed without a"
                " completion the journal saw",
                "change a message's state to finished only in its completion (complete.sql)",
            )
        )
    return causes


def _duplicates(counts: AuditCounts, locks: ClaimLocks | None) -> tuple[str, str]:
    shown = counts.duplicate_claims
    overlapped = [d for d in shown if d.overlapped]
    example = overlapped[0] if overlapped else (shown[0] if shown else None)
    told = ""
    if example is not None:
        first, *others = dict.fromkeys(example.workers)
        again = " and ".join(others) or first
        state = f"while {first} still held it" if example.overlapped else f"once {first} had committed"
        when = f"whose claim returned it {ms_text(example.gap_s * 1000)} after {first}'s, {state}"
        told = f"; e.g. msg_id {example.msg_id} was completed by {first} and again by {again}, {when}"
    if locks is not None and not locks.row_lock and not locks.advisory:
        return (
            f"{count_text(counts.duplicates)} duplicate completion(s){told}; claim.sql takes {locks.said()}:"
            " two transactions can select the same message, and the second updates it again once the"
            " first commits",
            "lock what the claim selects (FOR UPDATE SKIP LOCKED in its subquery) and re-check the"
            " message's state in the update",
        )
    if overlapped:
        held = locks.said() if locks is not None else "a lock"
        return (
            f"{count_text(counts.duplicates)} duplicate completion(s){told}; claim.sql takes {held}, yet two"
            " transactions held one message at once: the lock is not on the row the update takes",
            "lock the very row the claim updates, and re-check its state in the update's WHERE",
        )
    return (
        f"{count_text(counts.duplicates)} duplicate completion(s){told}; no two claims of a message"
        " overlapped: a message stayed claimable after a completion, or after a claim that waited on its"
        " lock",
        "re-check the message's state in the claim's update, and take it out of the claim's reach"
        " in complete.sql",
    )


def _violations(counts: AuditCounts, locks: ClaimLocks | None, order: ClaimOrder | None) -> tuple[str, str]:
    """Which happened: a later message claimed while its group's earlier one was in flight (claimed,
    not completed), or one that overtook the earlier message while it was still pending (claimed
    before it was), and by which ordering of the claim."""
    total = counts.order_violations
    overtook = min(counts.overtaking, total)
    if overtook * 2 > total:
        return _overtaking(counts, overtook, order)
    told = ""
    shown = [v for v in counts.violations if not v.overtook]
    if shown:
        v = shown[0]
        told = (
            f"; e.g. group ({v.queue_type}, order_id {v.order_id}): msg_id {v.msg_id} ({v.worker}) was"
            f" claimed {ms_text(v.early_s * 1000)} before msg_id {v.prev_msg_id} ({v.prev_worker}) committed"
        )
    also = f" ({count_text(overtook)} more overtook an earlier one still pending)" if overtook else ""
    skipping = (
        " claim.sql skips locked rows, so a group whose head is in flight shows its next message instead"
        if locks is not None and locks.skip_locked
        else " the claim does not leave a group alone while its head is in flight"
    )
    measured, ids_fix = _measured(counts.order_facts)
    return (
        f"{count_text(total - overtook)} message(s) claimed while an earlier one of their group was in flight"
        f" (claimed, not yet completed){also}{told};{measured}{';' if measured else ''}{skipping}",
        ids_fix
        or "claim only a group's head (the first unfinished message of its group), and skip the group"
        " when that head is locked",
    )


def _overtaking(counts: AuditCounts, overtook: int, order: ClaimOrder | None) -> tuple[str, str]:
    told = ""
    shown = [v for v in counts.violations if v.overtook]
    if shown:
        v = shown[0]
        told = (
            f"; e.g. group ({v.queue_type}, order_id {v.order_id}): msg_id {v.msg_id} ({v.worker}) was"
            f" claimed while msg_id {v.prev_msg_id} was still pending; {v.prev_worker} claimed that one"
            " after it"
        )
    rest = counts.order_violations - overtook
    also = f" ({count_text(rest)} more claimed while an earlier one was in flight)" if rest else ""
    measured, ids_fix = _measured(counts.order_facts)
    guess = "; read from claim.sql's text (a guess, not measured):" if measured else ""
    if order is not None:
        by = (
            f"{guess or ':'} claim.sql orders by {order.said()}, so a later message that ranks higher is"
            " taken first"
        )
        first = order.first
        fix = (
            f"take a group's messages in their order: rank the groups by {first} if you must, but claim only"
            f" a group's earliest unfinished message (no earlier message of the group pending or in flight),"
            f" never a later one for its {first}"
        )
    else:
        by = (
            f"{guess or ':'} claim.sql's ORDER BY puts nothing before the id, so what chose them is not in"
            " its text"
        )
        fix = (
            "claim only a group's earliest unfinished message (no earlier message of the group pending or"
            " in flight)"
        )
    return (
        f"{count_text(overtook)} message(s) overtook an earlier message of their group while it was still"
        " pending"
        f" (claimed before it was, not while it was in flight){also}{told}{measured and ';'}{measured}{by}",
        ids_fix or fix,
    )


def _measured(facts: OrderFacts | None) -> tuple[str, str | None]:
    """What the violating pairs' own rows say (ids, due times, priorities), most pairs first, and the
    fix when the design's ids explain most of them; ('', None) where the rows were not read."""
    if facts is None or not facts.pairs:
        return "", None
    pairs = facts.pairs
    found: list[tuple[int, str]] = []
    if facts.ids_inverted:
        inverted = facts.ids_inverted
        same = facts.inverted_same_ms
        if same == inverted:
            when = "all enqueued within the same millisecond"
        elif facts.inverted_apart_ms < 1:
            when = f"all enqueued less than 1 ms apart ({count_text(same)} within the same millisecond)"
        else:
            farthest = f"the farthest {ms_text(facts.inverted_apart_ms)} apart"
            when = f"{count_text(same)} of them enqueued within the same millisecond ({farthest})"
        example = ""
        if len(facts.example) == 4:
            later, later_id, earlier, earlier_id = facts.example
            example = f"; e.g. msg_id {later} has id {later_id}, below msg_id {earlier}'s {earlier_id}"
        found.append((inverted, f"the design's ids do not increase in enqueue order: {count_text(inverted)}"
                      f" of {count_text(pairs)}"
                      " pair(s) inverted (the later message's id sorts before the earlier one's),"
                      f" {when}{example}"))  # fmt: skip
    if facts.due_earlier:
        found.append((facts.due_earlier, f"in {count_text(facts.due_earlier)} of {count_text(pairs)} pair(s)"
                      " the later message was"
                      " due before the earlier one"))  # fmt: skip
    if facts.ranked_higher:
        found.append((facts.ranked_higher, f"in {count_text(facts.ranked_higher)} of {count_text(pairs)}"
                      " pair(s) the later message"
                      " had the higher priority"))  # fmt: skip
    if not found:
        ids = "ids, " if facts.keyed else ""
        return (
            f" measured from the rows: every pair's {ids}due times and priorities are in enqueue order,"
            " so what made the claim take the later one first is unexplained",
            None,
        )
    found.sort(key=lambda item: -item[0])
    fix = None
    if facts.ids_inverted and found[0][0] == facts.ids_inverted and facts.ids_inverted * 2 > pairs:
        fix = (
            "make the design's ids increase in enqueue order (a sequence, or a time part fine enough that"
            " ids made within one millisecond still sort in order), or order a group's messages by their"
            " enqueue order, not by that id"
        )
    return " measured from the rows: " + "; ".join(text for _, text in found), fix


def _eg(ids: tuple[int, ...]) -> str:
    """ ", e.g. msg_id 4, 9", or nothing where no id was kept (a compacted journal's late rows)."""
    return f", e.g. msg_id {', '.join(map(str, ids))}" if ids else ""
