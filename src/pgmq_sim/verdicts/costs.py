"""What inflated the run's costs, from its claim account (result/claims): a cause outside the run,
named by what was measured, as every cause is (verdicts/cause).
A run's limit can be none while its costs are not the queue's: the limit's evidence then says so."""

from __future__ import annotations

from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.claims import ClaimAccount, Sender
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.cause import MeasuredCause, Resource

OUTSIDE_SHARE = 0.25  # of the empty claims, after notifications from outside the run: a named cause
OUTSIDE_PER_MSG = 0.05  # and per message at least this many (a few empty claims are no cost to name)


def inflated(claims: ClaimAccount) -> bool:
    """A cause outside the run made a good share of the empty claims, and a cost per message worth
    naming: the costs are not the queue's."""
    empty, outside = claims.empty_claims, claims.outside_empty
    return empty > 0 and outside >= OUTSIDE_SHARE * empty and outside >= OUTSIDE_PER_MSG * claims.messages


def inflation_text(claims: ClaimAccount) -> str | None:
    """The cause outside the run, named, and the figures without it; None when there is none."""
    if not inflated(claims):
        return None
    said = (
        senders_text(claims.outside)
        + f": {count_text(claims.outside_empty)} of {count_text(claims.empty_claims)} empty claims"
        + " were theirs"
    )
    without = claims.per_msg(claims.empty_claims - claims.outside_empty)
    if without is not None:
        said += f"; without them {without:.3g} empty claims per message"
        cpu, cpu_without = claims.client_us_per_msg, claims.client_us_per_msg_without
        if cpu is not None and cpu_without is not None:
            said += (
                f" and {cpu_without:.0f} µs of client CPU per message (against {cpu:.0f}: their claims'"
                f" own time on the client, measured, {cpu - cpu_without:.0f} µs)"
            )
        server = claims.server_outside_ms
        if server is not None and claims.messages:
            per = server / claims.messages * 1000
            said += f"; their claims took {per:.0f} µs of the server's statement time per message"
    return said


def sender_name(s: Sender) -> str:
    """A session outside the run as a cause names it: its pid and its application, if it was read."""
    app = "ended before it was named" if s.application is None else f"app '{s.application}'"
    return f"pid {s.pid} ({app})"


def senders_text(outside: tuple[Sender, ...]) -> str:
    """Who outside the run notified: one session, or many (say, an application connecting per
    request): their sum, their applications, and how many ended before they were named."""
    top = outside[0]
    if len(outside) == 1:
        return (
            f"a session outside the run, {sender_name(top)}, sent {count_text(top.notifications)}"
            f" notifications ({top.per_s:,.0f}/s) on the run's channel"
            + (f", telling of {count_text(top.told)} messages" if top.told != top.notifications else "")
        )
    apps = sorted({s.application for s in outside if s.application is not None})
    gone = sum(1 for s in outside if s.application is None)
    who = [f"application(s) {', '.join(repr(a) for a in apps)}"] if apps else []
    who += [f"{count_text(gone)} ended before they were named"] if gone else []
    return (
        f"{count_text(len(outside))} sessions outside the run ({'; '.join(who)}) sent"
        f" {count_text(sum(s.notifications for s in outside))} notifications on the run's channel, the"
        f" most {count_text(top.notifications)} by {sender_name(top)}"
    )


def cost_cause(r: RunResult) -> MeasuredCause | None:
    """A session outside the run whose notifications on the run's channel woke a good share of the
    empty claims (OUTSIDE_SHARE), or None."""
    claims = r.claims
    evidence = inflation_text(claims) if claims is not None else None
    if claims is None or evidence is None:
        return None
    outside = claims.outside
    one = len(outside) == 1
    many = f"the {count_text(len(outside))} sessions outside the run"
    whom, them, own = (sender_name(outside[0]), "it", "its") if one else (many, "them", "their")
    return MeasuredCause(
        Resource.NOTIFIER,
        evidence,
        f"stop {whom} notifying channel {claims.channel}, or move {them} to a channel"
        f" of {own} own: any session of the database may notify a channel, and each notification"
        " wakes a worker to claim",
        share=claims.outside_empty / claims.empty_claims,  # of the empty claims
    )
