"""What inflated the run's costs, from its claim account (result/claims): a cause outside the run,
named by what was measured, as every cause is (verdicts/cause).
A run's limit can be none while its costs are not the queue's: the limit's evidence then says so."""

from __future__ import annotations

from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.cause import MeasuredCause, Resource


def cost_cause(r: RunResult) -> MeasuredCause | None:
    """A session outside the run whose notifications on the run's channel woke a good share of the
    empty claims (result/claims OUTSIDE_SHARE), or None."""
    claims = r.claims
    evidence = claims.inflation_text() if claims is not None else None
    if claims is None or evidence is None:
        return None
    outside = claims.outside
    one = len(outside) == 1
    many = f"the {len(outside)} sessions outside the run"
    whom, them, own = (outside[0].name(), "it", "its") if one else (many, "them", "their")
    return MeasuredCause(
        Resource.NOTIFIER,
        evidence,
        f"stop {whom} notifying channel {claims.channel}, or move {them} to a channel"
        f" of {own} own: any session of the database may notify a channel, and each notification"
        " wakes a worker to claim",
        share=claims.outside_empty / claims.empty_claims,  # of the empty claims
    )
