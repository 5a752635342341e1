"""What a worker's session sends, as text: its fixed values quoted once (quoting is the costliest
Python step per message), each statement called as PREPAREd or as a function, and the arguments of
the claim, the journal's row, a completion and a failed attempt. ClaimSession sends them and reads
the answers."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from pgmq_sim.db.connection import ADMIN_LOCK_TIMEOUT_MS, OWN_STATEMENT_TIMEOUT_MS
from pgmq_sim.db.statements import CLAIM, COMPLETE, FAIL, FAILURE, JOURNAL, TAKE, call
from pgmq_sim.db.values import Claimed, SessionPlan
from pgmq_sim.model.kinds import SessionMode


class SessionText:
    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        plan: SessionPlan,
        called: set[str],
        queue_type: str,
        worker: str,
        owner: str,
    ) -> None:
        self._conn = conn
        self._plan = plan
        self._called = called  # the statements called as functions
        self.split = plan.mode == SessionMode.SPLIT
        self.type = self.literal(queue_type)
        self.worker = self.literal(worker)
        self.owner = self.literal(owner)
        lease = f"{plan.lease_s!r}" if self.split else "null"
        self._claim_tail = f", {int(plan.batch)}, {{group}}, {self.owner if self.split else 'null'}, {lease}"
        self._claim_any = self.call(CLAIM, self.type + self._claim_tail.format(group="null"))
        self._quoted_types: dict[str, str] = {}
        self.journal_bounds = journal_bounds(plan.team_timeouts)

    def literal(self, value: object) -> str:
        return sql.Literal(value).as_string(self._conn)

    def quoted_type(self, queue_type: str) -> str:
        quoted = self._quoted_types.get(queue_type)
        if quoted is None:
            quoted = self._quoted_types[queue_type] = self.literal(queue_type)
        return quoted

    def call(self, name: str, args: str) -> str:
        return call(name, args, name in self._called)

    def claim(self, group: int | None = None) -> str:
        """The claim; after a completion, naming the group just completed (a design with affinity
        tries it first)."""
        if group is None:
            return self._claim_any
        return self.call(CLAIM, self.type + self._claim_tail.format(group=group))

    def take(self, claimed: Claimed) -> str:
        """The seed's table counts each attempt on its row (split: with the owner and the lease)."""
        if self.split:
            return self.call(TAKE, f"{claimed.msg_id}, {self.owner}, {self._plan.lease_s!r}")
        return self.call(TAKE, str(claimed.msg_id))

    def ident(self, claimed: Claimed) -> str:
        """The message's id as the design's statements take it: the tool's number, or the design's
        own id quoted (the server casts it to the statement's type)."""
        return str(claimed.msg_id) if claimed.key is None else self.literal(claimed.key)

    def journal(self, claimed: Claimed) -> str:
        """The audit's row (claimed_at is the server's own text for its timestamptz, offset included)."""
        owner = f", {self.owner}" if self.split and self._plan.seed_table else ""
        args = (
            f"{self.ident(claimed)}, {self.quoted_type(claimed.queue_type)}, {claimed.order_id},"
            f" {self.worker}, '{claimed.claimed_at}'::timestamptz, {claimed.attempt}{owner}, {free(claimed)},"
            f" {seconds(claimed.claim_s)}"
        )
        return self.call(JOURNAL, args)

    def complete(self, claimed: Claimed, owned: bool) -> str:
        ident = self.ident(claimed)
        return self.call(COMPLETE, f"{ident}, {self.owner}" if owned else ident)

    def fail_seed(self, claimed: Claimed, error: str) -> str:
        """The seed's table: the attempt recorded, a dead letter and the next try decided."""
        plan = self._plan
        owner = self.owner if self.split else "null"
        args = (
            f"{claimed.msg_id}, {self.worker}, '{claimed.claimed_at}'::timestamptz,"
            f" {self.literal(error)}, {int(plan.max_attempts)}, {plan.backoff_ms!r}, {owner}, {free(claimed)}"
        )
        return self.call(FAIL, args)

    def failure(self, claimed: Claimed, error: str) -> str:
        """A folder design: the tool's record of the attempt (its number, a dead letter, the retry's time)."""
        plan = self._plan
        args = (
            f"{self.ident(claimed)}, {self.quoted_type(claimed.queue_type)}, {claimed.order_id},"
            f" {self.worker}, '{claimed.claimed_at}'::timestamptz, {self.literal(error)},"
            f" {int(plan.max_attempts)}, {plan.backoff_ms!r}, {free(claimed)}"
        )
        return self.call(FAILURE, args)

    def fail_design(self, claimed: Claimed, attempt: int, error: str, retry_at: bytes | None) -> str:
        """A folder design's fail.sql: $1 msg_id, $2 attempt, $3 error, $4 retry_at."""
        at = "null" if retry_at is None else f"'{retry_at.decode()}'::timestamptz"
        return self.call(FAIL, f"{self.ident(claimed)}, {attempt}, {self.literal(error)}, {at}")


def journal_bounds(team: tuple[tuple[str, int], ...]) -> tuple[str, str] | None:
    """Where the role sets a statement or lock timeout: the statements before and after the journal's
    row that put it under the tool's bounds and give the team's statements theirs back (one each:
    set_config, local to the transaction). None where the role sets neither: nothing is sent."""
    if not team:
        return None
    own = {"statement_timeout": OWN_STATEMENT_TIMEOUT_MS, "lock_timeout": ADMIN_LOCK_TIMEOUT_MS}

    def setting(values: dict[str, int]) -> str:
        return "select " + ", ".join(f"set_config('{name}', '{ms}', true)" for name, ms in values.items())

    return setting({name: own[name] for name, _ in team}), setting(dict(team))


def free(claimed: Claimed) -> str:
    """How long the worker was free before it claimed this message, as an argument ('null': not)."""
    return seconds(claimed.free_s)


def seconds(value: float | None) -> str:
    """Seconds as an argument, to the microsecond ('null': not measured)."""
    return "null" if value is None else f"{value:.6f}"
