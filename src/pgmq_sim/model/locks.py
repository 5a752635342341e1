"""What a claim's text says about the locks it takes: read from the statement, not its comments, by
the audit (a failed audit's cause) and by the limit (a fix that would repeat the run's claim)."""

from __future__ import annotations

import re
from dataclasses import dataclass

COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)


@dataclass(frozen=True)
class ClaimLocks:
    """What a claim's text says about the locks it takes."""

    row_lock: bool  # FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE
    skip_locked: bool
    advisory: bool
    try_lock: bool = False  # an advisory lock tried, not waited for

    @classmethod
    def read(cls, text: str) -> ClaimLocks:
        words = " ".join(COMMENTS.sub(" ", text).lower().split())  # not what its comments say
        return cls(
            row_lock=bool(re.search(r"\bfor (no key )?(update|share)\b", words)),
            skip_locked="skip locked" in words,
            advisory="advisory_xact_lock" in words or "advisory_lock" in words,
            try_lock="pg_try_advisory" in words,
        )

    @property
    def skips_locked(self) -> bool:
        """The claim passes over rows and groups another worker holds instead of queueing behind them."""
        return self.skip_locked or self.try_lock

    def said(self) -> str:
        found = [
            name
            for name, present in (
                ("FOR UPDATE", self.row_lock),
                ("SKIP LOCKED", self.skip_locked),
                ("an advisory lock", self.advisory),
            )
            if present
        ]
        return ", ".join(found) if found else "no row lock (no FOR UPDATE, no advisory lock)"


ORDER_BY = re.compile(
    r"\border by (.+?)(?= limit\b| for (?:no key )?(?:update|share)\b| offset\b| fetch\b|\)|;|$)"
)
RETURNING = re.compile(r"\breturning (.+?)(?:;|$)")


@dataclass(frozen=True)
class ClaimOrder:
    """What a claim's ORDER BY puts before a message's id, besides its group's own columns (an
    urgency, a due time): the ordering by which a later message of a group can overtake an earlier
    one still pending. Read from the statement, not its comments."""

    written: str  # the ORDER BY as the claim writes it: t.priority desc, t.not_before, t.id
    ahead: tuple[str, ...]  # its keys before the id, without their tables' aliases: priority desc, not_before
    id_column: str  # the column the claim returns as msg_id

    @classmethod
    def read(cls, text: str) -> ClaimOrder | None:
        words = " ".join(COMMENTS.sub(" ", text).lower().split())
        returned = RETURNING.search(words)
        columns = dict(_named(item) for item in _top_level(returned.group(1))) if returned else {}
        id_column = columns.get("msg_id", "msg_id")
        group = {columns.get("order_id", "order_id"), columns.get("queue_type", "queue_type")}
        for clause in ORDER_BY.finditer(words):
            keys = [_unaliased(key) for key in _top_level(clause.group(1))]
            firsts = [key.split(" ")[0] for key in keys]
            before = firsts.index(id_column) if id_column in firsts else len(keys)
            ahead = tuple(
                key for key, first in zip(keys[:before], firsts, strict=False) if first not in group
            )
            if ahead:
                return cls(clause.group(1).strip(), ahead, id_column)
        return None

    def said(self) -> str:
        """'priority desc, then not_before, before id (order by t.priority desc, t.not_before, t.id)'"""
        return f"{', then '.join(self.ahead)}, before {self.id_column} (order by {self.written})"


NOT_FUNCTIONS = ("lateral", "unnest", "generate_series")  # a keyword, and functions of rows a claim makes
SOURCE_FUNCTION = re.compile(r"\b(?:from|join)\s+([a-z_][\w$]*(?:\.[a-z_][\w$]*)?)\s*\(")


def source_functions(text: str) -> tuple[str, ...]:
    """The functions a claim reads its rows from (`from pgmq.read_grouped(...)`): their locks are taken
    inside them, not in the claim's own text."""
    words = " ".join(COMMENTS.sub(" ", text).lower().split())
    return tuple(dict.fromkeys(name for name in SOURCE_FUNCTION.findall(words) if name not in NOT_FUNCTIONS))


def _top_level(text: str) -> list[str]:
    """A list's items, split at the commas outside parentheses."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    return [*items, text[start:].strip()]


def _unaliased(expression: str) -> str:
    """t.priority desc -> priority desc"""
    return re.sub(r'^"?\w+"?\.', "", expression.strip()).replace('"', "")


def _named(item: str) -> tuple[str, str]:
    """A returned item as (its name, its column): 'o.customer as order_id' -> (order_id, customer)."""
    expression, _, alias = item.partition(" as ")
    column = _unaliased(expression).split(" ")[0]
    return (alias.strip().replace('"', "") or column), column
