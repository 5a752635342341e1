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


RETURNING = re.compile(r"\breturning (.+?)(?:;|$)")
CLAUSE_END = re.compile(
    r"(?:limit|offset|fetch|returning|for (?:no key )?(?:update|share)|window|union|except|intersect)\b"
)
DIRECTION = re.compile(r"(?: (?:asc|desc|nulls first|nulls last|using \S+))+$")
QUALIFIER = re.compile(r'(?<![\w.$])"?[a-z_][\w$]*"?\.(?=["a-z_])')
CAST = re.compile(r"::[a-z_][\w ]*?(?:\[\])?(?=$|[),])")


@dataclass(frozen=True)
class ClaimOrder:
    """What a claim's ORDER BY puts before a message's id, besides its group's own columns (an
    urgency, a due time): the ordering by which a later message of a group can overtake an earlier
    one still pending. Read from the statement, not its comments: a guess from the text, which the
    audit gives after what it measured from the rows."""

    written: str  # the ORDER BY as the claim writes it: t.priority desc, t.not_before, t.id
    ahead: tuple[str, ...]  # its keys before the id, without their tables' aliases: priority desc, not_before
    id_column: str  # the column the claim returns as msg_id
    by_id: bool = True  # the id is one of its keys

    @classmethod
    def read(cls, text: str) -> ClaimOrder | None:
        words = " ".join(COMMENTS.sub(" ", text).lower().split())
        returned = RETURNING.search(words)
        columns = dict(_named(item) for item in _top_level(returned.group(1))) if returned else {}
        id_column = columns.get("msg_id", "msg_id")
        group = {columns.get("order_id", "order_id"), columns.get("queue_type", "queue_type")}
        for clause in order_clauses(words):
            keys = [_unaliased(key) for key in _top_level(clause)]
            bare = [_bare(key) for key in keys]
            before = bare.index(id_column) if id_column in bare else len(keys)
            ahead = tuple(key for key, b in zip(keys[:before], bare, strict=False) if b not in group)
            if ahead:
                return cls(clause, ahead, id_column, id_column in bare)
        return None

    @property
    def first(self) -> str:
        """The first key ahead of the id, without its direction: priority"""
        return _bare(self.ahead[0])

    def said(self) -> str:
        """'priority desc, then not_before, before id (order by t.priority desc, t.not_before, t.id)'"""
        where = f"before {self.id_column}" if self.by_id else f"and not by {self.id_column}"
        return f"{', then '.join(self.ahead)}, {where} (order by {self.written})"


def order_clauses(words: str) -> list[str]:
    """Each ORDER BY's keys, as written, whole: a clause ends where its own parenthesis closes, at
    `;`, or at a keyword outside its parentheses (LIMIT, FOR UPDATE, ...), never inside a key's
    expression (`order by coalesce(due, now()), lower(x)`) or a literal."""
    masked = _masked(words)
    clauses = []
    for found in re.finditer(r"\border by ", masked):
        depth, start, end = 0, found.end(), len(words)
        for i in range(start, len(masked)):
            char = masked[i]
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth < 0 or (
                depth == 0 and (char == ";" or (masked[i - 1] == " " and CLAUSE_END.match(masked, i)))
            ):
                end = i
                break
        clauses.append(words[start:end].strip())
    return [clause for clause in clauses if clause]


def _masked(text: str) -> str:
    """The text with its literals' insides blanked ('a,(b' -> 'xxxx'), the same length."""
    return re.sub(r"'(?:[^']|'')*'", lambda m: "'" + "x" * (len(m.group(0)) - 2) + "'", text)


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
    for i, char in enumerate(_masked(text)):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    return [*items, text[start:].strip()]


def _unaliased(expression: str) -> str:
    """t.priority desc -> priority desc; (o.data->>'customer') -> (data->>'customer')"""
    return QUALIFIER.sub("", expression.strip()).replace('"', "")


def _bare(expression: str) -> str:
    """An expression as a group's or an id's key compares: without aliases, direction, casts and the
    parentheses around it. (o.data->>'customer')::bigint desc -> data->>'customer'"""
    bare = DIRECTION.sub("", _unaliased(expression)).strip()
    while True:
        before = bare
        bare = CAST.sub("", bare).strip()
        if bare.startswith("(") and bare.endswith(")") and _balanced(bare[1:-1]):
            bare = bare[1:-1].strip()
        if bare == before:
            return bare


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _named(item: str) -> tuple[str, str]:
    """A returned item as (its name, its column): 'o.customer as order_id' -> (order_id, customer)."""
    expression, _, alias = item.rpartition(" as ")
    if not expression or not re.fullmatch(r'"?[a-z_][\w$]*"?', alias.strip()):  # cast(x as bigint)
        expression, alias = item, ""
    column = _bare(expression)
    return (alias.strip().replace('"', "") or column), column
