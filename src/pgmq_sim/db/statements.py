"""How a worker's statements reach the server, in two forms that take the same text and arguments:

- prepared: PREPAREd once per session and EXECUTEd (the server keeps the plans; needs a session of
  the worker's own, so not behind a transaction pooler);
- functions: created once per run as SQL functions and called by SELECT (no session state at all,
  so any pooler may hand each transaction to another server connection).

Either way a call is plain text, so several calls and COMMIT/BEGIN go in one simple-query message.
A worker statement's file says its function's signature on its first line:
``-- pgmq-sim: function (bigint, text) returns table (added_at timestamptz, done_at timestamptz)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgmq_sim.model.kinds import SessionMode
from pgmq_sim.sqlfiles import statement

FUNCTION_MARK = "-- pgmq-sim: function "
# $1 the worker's type; $2 the group it has just completed in the same round trip, or null (read by
# the affinity strategy, unused by the others)
CLAIM_SIGNATURE = (
    "(text, bigint) returns table (msg_id bigint, queue_type text, order_id bigint, claimed_at timestamptz)"
)
BODY_QUOTE = "$pgmq_sim$"
OWNED_COMMENT = "pgmq-sim: created by pgmq-sim; replaced by its next run"

CLAIM, COMPLETE, TAKE, FAIL = "pgmq_sim_claim", "pgmq_sim_complete", "pgmq_sim_take", "pgmq_sim_fail"
JOURNAL = "pgmq_sim_journal"  # the audit's row, a statement of its own in the completion's transaction
NOTIFY_FUNCTION = "msg_queue_notify"  # -wakeup notify's trigger function (notify_trigger.sql)


@dataclass(frozen=True)
class WorkerStatement:
    name: str  # the prepared statement's or the function's name
    text: str
    signature: str  # "(argument types) returns table (...)"

    @property
    def argument_types(self) -> str:
        return self.signature[: self.signature.index(")") + 1]


def signature_of(text: str, name: str) -> str:
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if not first.startswith(FUNCTION_MARK):
        raise ValueError(f"statement {name} has no '{FUNCTION_MARK.strip()}' line")
    return first.removeprefix(FUNCTION_MARK).strip()


def packaged(name: str, as_name: str) -> WorkerStatement:
    text = statement(name)
    return WorkerStatement(as_name, text, signature_of(text, name))


def complete_name(mode: SessionMode, delmsg: bool) -> str:
    kind = "complete_split_" if mode == SessionMode.SPLIT else "complete_"
    return kind + ("delete" if delmsg else "mark")


def worker_statements(
    claim_sql: str, mode: SessionMode, delmsg: bool, audited: bool
) -> list[WorkerStatement]:
    """The claim (wrapped, see ClaimStrategy.wrapped_claim_sql), the completion, with attempts the
    take and the failure, and with the audit the journal's row."""
    found = [
        WorkerStatement(CLAIM, claim_sql, CLAIM_SIGNATURE),
        packaged(complete_name(mode, delmsg), COMPLETE),
    ]
    if mode != SessionMode.BASIC:
        found += [packaged(f"take_{mode}", TAKE), packaged("fail_attempt", FAIL)]
    if audited:
        journal = "journal_entry_split" if mode == SessionMode.SPLIT else "journal_entry"
        found.append(packaged(journal, JOURNAL))
    return found


def prepare(s: WorkerStatement) -> str:
    return f"prepare {s.name}{s.argument_types} as {s.text}"


def create_function(s: WorkerStatement) -> list[str]:
    if BODY_QUOTE in s.text:
        raise ValueError(f"{s.name}: its text holds {BODY_QUOTE}, which quotes function bodies")
    return [
        f"create or replace function {s.name}{s.signature} language sql volatile as"
        f" {BODY_QUOTE}\n{s.text.strip().rstrip(';')}\n{BODY_QUOTE}",
        f"comment on function {s.name}{s.argument_types} is '{OWNED_COMMENT}'",
    ]


def call(name: str, args: str, functions: bool) -> str:
    """One call's text: EXECUTE of the prepared statement, or SELECT from the function."""
    return f"select * from {name}({args})" if functions else f"execute {name}({args})"
