"""Whose a server session is, the one place that decides it for every verdict that names a session
(lock blockers, the lock census's holders). A session of this database named 'pgmq-sim ...' is the
run's own (a pressure's session stands for one outside the run: not one of them); any other is
outside the run. Behind a transaction pooler a server backend belongs to the pool, not to one
client: its application_name is whichever client used it last (the run's housekeeper asking who
holds what may be handed the very backend a worker's transaction just left), so a backend named
as the run's is most likely one of the run's pool (a direct session of the run's, the listener, is
named so too: the pooler's console could tell them apart, it is not asked). It is the run's own
where what it runs now is one of the run's statements (their text names the tool's functions and
tables); otherwise whose transaction it served is not known, and it is never called a session
outside the run."""

from __future__ import annotations

from enum import StrEnum

APPLICATION = "pgmq-sim"  # every session of the tool's: this, or 'pgmq-sim <role>'
WORKER = "pgmq-sim w"  # a worker's: 'pgmq-sim w3'
STANDS_OUTSIDE = ("pgmq-sim pressure",)  # the tool's, standing for a session outside the run
RUN_TEXT = "pgmq_sim_"  # the tool's functions (pgmq_sim_claim, ...) and tables (pgmq_sim_journal, ...)


class Whose(StrEnum):
    OURS = "the run's own"
    POOL = "behind the transaction pooler, named by the last client to use it: whose transaction, not known"
    OUTSIDE = "outside the run"


def whose(
    application: str, query: str = "", same_database: bool = True, transaction_pooled: bool = False
) -> Whose:
    """Whose the session is, from its application_name, what it runs now (its query's start), its
    database and the path's pooling."""
    named_ours = application.startswith(APPLICATION) and application not in STANDS_OUTSIDE
    if not named_ours or not same_database:
        return Whose.OUTSIDE
    if not transaction_pooled or RUN_TEXT in query:
        return Whose.OURS
    return Whose.POOL


def said(application: str, who: Whose) -> str:
    """The application as a verdict names it: a pooled backend says its name is the last client's."""
    return f"{application}; {who}" if who == Whose.POOL else application
