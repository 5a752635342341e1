"""How a worker's statements reach the server, in two forms that take the same text and arguments:

- prepared: PREPAREd once per session and EXECUTEd (the server keeps the plans; needs a session of
  the worker's own, so not behind a transaction pooler);
- functions: created once per run as SQL functions and called by SELECT (no session state at all,
  so any pooler may hand each transaction to another server connection).

Either way a call is plain text, so several calls and COMMIT/BEGIN go in one simple-query message.
The tool's own statement files say their function's signature on their first line:
``-- pgmq-sim: function (bigint, text) returns table (added_at timestamptz, done_at timestamptz)``.
A design's files need not: the tool declares their arguments (a file may leave out what it does not
use) and, as a function, runs them inside one that returns the rows they changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pgmq_sim.db.values import SessionPlan
from pgmq_sim.designs.design import BATCH_PARAMETER
from pgmq_sim.model.kinds import SessionMode
from pgmq_sim.sqlfiles import statement

FUNCTION_MARK = "-- pgmq-sim: function "
# $1 the worker's type; $2 the batch (how many messages at most); $3 the group it has just completed
# in the same round trip, or null (read by the affinity strategy); $4 the worker's owner token and
# $5 the lease in seconds (a design whose claim commits, `transaction = "split"`). The claim runs as
# written: what it returns is its own (msg_id, queue_type and order_id among its columns, found by
# name), and the server's clock after its locks is a statement of its own beside it (CLAIM_CLOCK),
# with the seconds since the round trip arrived (the claim's own time, less what ran before it).
CLAIM_ARGUMENTS = "(text, integer, bigint, text, float8)"
CLAIM_CLOCK = "select clock_timestamp(), extract(epoch from clock_timestamp() - statement_timestamp())"
CLAIM_COLUMNS = ("msg_id", "queue_type", "order_id")
# what the tool passes each statement of a design's folder (a file may leave out what it does not use);
# the message's id is the tool's bigint, or the type the design's enqueue returns as msg_id
COMPLETE_ARGUMENTS = "(bigint)"  # msg_id
ENQUEUE_ARGUMENTS = "(bigint, text, bigint, integer, timestamptz, bytea)"


def complete_arguments(id_type: str = "bigint", split: bool = False) -> str:
    """msg_id; split: and the owner token."""
    return f"({id_type}, text)" if split else f"({id_type})"


def fail_arguments(id_type: str = "bigint") -> str:
    """msg_id, attempt, error, retry at (null: dead)."""
    return f"({id_type}, integer, text, timestamptz)"


BODY_QUOTE = "$pgmq_sim$"
INNER_QUOTE = "$pgmq_sim_statement$"
OWNED_COMMENT = "pgmq-sim: created by pgmq-sim; replaced by its next run"

CLAIM, COMPLETE, TAKE, FAIL = "pgmq_sim_claim", "pgmq_sim_complete", "pgmq_sim_take", "pgmq_sim_fail"
ENQUEUE, FAILURE = "pgmq_sim_enqueue", "pgmq_sim_failure"  # a design's enqueue; the tool's failure row
LOGGED = "pgmq_sim_logged"  # the tool's log row of an enqueue into a design of its own folder
JOURNAL = "pgmq_sim_journal"  # the audit's row, a statement of its own in the completion's transaction
NOTIFY_FUNCTION = "msg_queue_notify"  # -wakeup notify's trigger function (notify_trigger.sql)
NAMES = (CLAIM, COMPLETE, TAKE, FAIL, ENQUEUE, FAILURE, JOURNAL, LOGGED)


class Wrapper(StrEnum):
    """How a statement becomes a function: as written (its file declares what it returns), or run
    inside one that returns the number of rows it changed (`count`), or that fails unless it
    changed exactly one (`one`: a completion whose lease may have passed must not commit)."""

    SQL = "sql"
    COUNT = "count"
    ONE = "one"


@dataclass(frozen=True)
class WorkerStatement:
    name: str  # the prepared statement's or the function's name
    text: str
    signature: str  # "(argument types) returns table (...)", or "(argument types)" for a wrapper
    wrapper: Wrapper = Wrapper.SQL

    @property
    def argument_types(self) -> str:
        return self.signature[: self.signature.index(")") + 1]

    @property
    def function_only(self) -> bool:
        """Exactly one row or an error: only a function can raise it, so even a kept session calls it."""
        return self.wrapper == Wrapper.ONE


def signature_of(text: str, name: str) -> str:
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if not first.startswith(FUNCTION_MARK):
        raise ValueError(f"statement {name} has no '{FUNCTION_MARK.strip()}' line")
    return first.removeprefix(FUNCTION_MARK).strip()


def declared(text: str) -> str | None:
    """The signature a file declares on its first line, if it does."""
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    return first.removeprefix(FUNCTION_MARK).strip() if first.startswith(FUNCTION_MARK) else None


def packaged(name: str, as_name: str) -> WorkerStatement:
    text = statement(name)
    return WorkerStatement(as_name, text, signature_of(text, name))


def design_statement(
    name: str, text: str, arguments: str, wrapper: Wrapper = Wrapper.COUNT
) -> WorkerStatement:
    """A design's file as a statement: as it declares itself, or wrapped; `one` always wraps."""
    own = declared(text)
    if own is not None and wrapper != Wrapper.ONE:
        return WorkerStatement(name, text, own)
    return WorkerStatement(name, text, arguments, wrapper)


def claim_statement(plan: SessionPlan) -> WorkerStatement:
    """The claim; as a function it returns its own columns (`claim_returns`). A team's file runs as
    written. The tool's own built-in claims have their batch ($2, fixed for the run) written in as a
    number: with LIMIT $2 PostgreSQL's plan cache finds the generic plan dearer than one planned for
    the batch given and plans the claim at every call (measured: the indexed claim's p50 1.57 ms
    against 0.99, as an application preparing it would pay); the argument stays in every call."""
    returns = f" returns table ({plan.claim_returns})" if plan.claim_returns else ""
    text = BATCH_PARAMETER.sub(str(int(plan.batch)), plan.claim_sql) if plan.builtin_claim else plan.claim_sql
    return WorkerStatement(CLAIM, text, CLAIM_ARGUMENTS + returns)


def worker_statements(plan: SessionPlan) -> list[WorkerStatement]:
    """The claim (as written), the completion, with attempts the take and the failure, and with the
    audit the journal's row."""
    mode = plan.mode
    found = [claim_statement(plan)]
    if plan.seed_table:
        if mode == SessionMode.SPLIT:
            found.append(packaged("complete_split_" + ("delete" if plan.delmsg else "mark"), COMPLETE))
        else:
            found.append(design_statement(COMPLETE, plan.complete_sql, COMPLETE_ARGUMENTS))
        if mode != SessionMode.BASIC:
            found += [packaged(f"take_{mode}", TAKE), packaged("fail_attempt", FAIL)]
        if plan.audited:
            journal = "journal_entry_split" if mode == SessionMode.SPLIT else "journal_entry"
            found.append(packaged(journal, JOURNAL))
        return found
    split = mode == SessionMode.SPLIT
    # a split design's completion after its lease passed finishes nothing: exactly once, it must not
    # commit (its journal row with it); at least once, the work was done again and is journaled
    wrapper = Wrapper.ONE if split and not plan.at_least_once else Wrapper.COUNT
    found.append(
        design_statement(COMPLETE, plan.complete_sql, complete_arguments(plan.id_type, split), wrapper)
    )
    keyed = "_keyed" if plan.keyed else ""  # the tool's rows find its own number from the design's id
    if plan.fail_sql is not None:
        found += [
            design_statement(FAIL, plan.fail_sql, fail_arguments(plan.id_type)),
            packaged("failure_entry" + keyed, FAILURE),
        ]
    if plan.audited:
        found.append(packaged("journal_entry_keyed" if plan.keyed else "journal_entry_log", JOURNAL))
    return found


def producer_statements(enqueue_sql: str, id_type: str | None = None) -> list[WorkerStatement]:
    """A folder design's enqueue and the tool's log row that goes with it, in one transaction. With
    the design's own ids (`id_type`: what its enqueue returns as msg_id) the enqueue answers with
    the id and the log row maps the tool's number to it."""
    if id_type is None:
        enqueue = design_statement(ENQUEUE, enqueue_sql, ENQUEUE_ARGUMENTS)
        return [enqueue, packaged("enqueue_logged", LOGGED)]
    returning = WorkerStatement(ENQUEUE, enqueue_sql, f"{ENQUEUE_ARGUMENTS} returns table (msg_id {id_type})")
    return [returning, packaged("enqueue_logged_keyed", LOGGED)]


def prepare(s: WorkerStatement) -> str:
    return f"prepare {s.name}{s.argument_types} as {s.text}"


def create_function(s: WorkerStatement) -> list[str]:
    if BODY_QUOTE in s.text or INNER_QUOTE in s.text:
        raise ValueError(f"{s.name}: its text holds {BODY_QUOTE} or {INNER_QUOTE}, which quote bodies")
    body = s.text.strip().rstrip(";")
    if s.wrapper == Wrapper.SQL:
        head = f"create or replace function {s.name}{s.signature} language sql volatile as"
        ddl = f"{head} {BODY_QUOTE}\n{body}\n{BODY_QUOTE}"
    else:
        count = s.argument_types.count(",") + 1
        check = _code(statement("function_exactly_one")) if s.wrapper == Wrapper.ONE else ""
        filled = {
            "NAME": s.name,
            "ARGUMENTS": s.argument_types,
            "USING": ", ".join(f"${i}" for i in range(1, count + 1)),
            "CHECK": check,
        }
        ddl = _code(statement("function_wrapper"))
        for marker, value in filled.items():
            ddl = ddl.replace(marker, value)
        ddl = ddl.replace("BODY", body)  # last: the statement's own text is not searched for markers
    # an earlier run's function of this name (the tool's: the check refused another's) may return other
    # columns (another design's claim), which CREATE OR REPLACE cannot change
    drop = f"drop function if exists {s.name}{s.argument_types}"
    return [drop, ddl, f"comment on function {s.name}{s.argument_types} is '{OWNED_COMMENT}'"]


def _code(text: str) -> str:
    """A template file without its comment lines."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def call(name: str, args: str, functions: bool) -> str:
    """One call's text: EXECUTE of the prepared statement, or SELECT from the function."""
    return f"select * from {name}({args})" if functions else f"execute {name}({args})"
