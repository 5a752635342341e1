"""SQL files: the tool's own statements, read once at import, and the user's files.

The user-facing files (schema.sql, next_msg.sql, strategies/NAME/*.sql) are
looked up first in the current directory, then in the package, so an installed
tool works from anywhere and a local copy wins. They are read once, before the
server is touched; a reinstall during a run cannot pull a file from under it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from pgmq_sim.errors import UsageError
from pgmq_sim.paths import describe_path

PACKAGE_SQL = Path(__file__).with_name("sql")
UNORDERED_MARK = "-- pgmq-sim: unordered"
MAX_SQL_BYTES = 1_000_000  # a schema or claim is a few KiB; /dev/zero is not a schema


def _load_statements() -> Mapping[str, str]:
    return MappingProxyType(
        {path.stem: path.read_text(encoding="utf-8") for path in sorted(PACKAGE_SQL.glob("*.sql"))}
    )


STATEMENTS = _load_statements()


def statement(name: str) -> str:
    """A packaged statement the tool runs itself (not user-replaceable), from memory."""
    return STATEMENTS[name]


def read_sql(path: Path, what: str, fix: str) -> str:
    """Read a SQL file the user may have named, with a one-line error if that fails."""
    shown = describe_path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SQL_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{what} file {shown} does not exist; {fix}") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"cannot read {what} file {shown}: {reason}; {fix}") from None
    if len(data) > MAX_SQL_BYTES:
        raise UsageError(f"{what} file {shown} is larger than {MAX_SQL_BYTES // 1000} kB; {fix}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} file {shown} is not UTF-8 text; {fix}") from None
    if not text.strip() or "\x00" in text:
        raise UsageError(f"{what} file {shown} is {'empty' if not text.strip() else 'binary'}; {fix}")
    return text


@dataclass(frozen=True)
class SqlSource:
    """A user-replaceable SQL file as it was read, and where it came from."""

    path: Path
    origin: str  # flag | current directory | packaged
    text: str

    def as_json(self) -> dict[str, str]:
        return {"path": describe_path(self.path), "origin": self.origin}

    def __str__(self) -> str:
        return f"{describe_path(self.path)} ({self.origin})"


def user_file(name: str, given: Path | None, flag: str) -> SqlSource:
    """The file named by flag, else ./name, else the packaged copy."""
    fix = f"pass an existing, readable file with {flag}"
    if given is not None:
        return SqlSource(given, f"given by {flag}", read_sql(given, name.removesuffix(".sql"), fix))
    local = Path.cwd() / name
    if local.exists():
        return SqlSource(local, "current directory", read_sql(local, name.removesuffix(".sql"), fix))
    return SqlSource(PACKAGE_SQL / name, "packaged", read_sql(PACKAGE_SQL / name, name, fix))


def strategy_dirs() -> list[tuple[Path, str]]:
    return [(Path.cwd() / "strategies", "current directory"), (PACKAGE_SQL / "strategies", "packaged")]


def known_strategies() -> list[str]:
    names = {"seed"}
    for base, _ in strategy_dirs():
        if base.is_dir():
            names.update(p.parent.name for p in base.glob("*/claim.sql"))
    return sorted(names)


@dataclass(frozen=True)
class ClaimStrategy:
    """How workers claim: the claim statement and the schema it needs, and their form for
    leases and retries (`claim_split.sql`), where in-progress messages block their group."""

    name: str
    claim: SqlSource
    schema: SqlSource | None
    ordered: bool
    split_claim: SqlSource | None = None
    split_schema: SqlSource | None = None

    def for_retries(self) -> ClaimStrategy:
        """The form to use with -tx split or -fail-rate; a claim without one is used as it is
        (and the audit judges whether it keeps order)."""
        return replace(
            self,
            claim=self.split_claim or self.claim,
            schema=self.split_schema or self.schema,
            split_claim=None,
            split_schema=None,
        )

    @property
    def has_split_form(self) -> bool:
        return self.split_claim is not None

    @property
    def wrapped_claim_sql(self) -> str:
        """The claim plus the server clock taken after it locked its row (the audit's claimed_at)."""
        body = self.claim.text.strip().rstrip(";").strip()
        return (
            f"with claimed as (\n{body}\n)\n"
            "select claimed.msg_id::bigint, claimed.queue_type::text, claimed.order_id::bigint,"
            " clock_timestamp() from claimed"
        )

    @property
    def skips_locked(self) -> bool:
        """Whether the claim passes over rows and groups another worker holds instead of waiting
        (SKIP LOCKED, or a try-lock on an advisory lock) rather than queueing behind them."""
        code = re.sub(r"--[^\n]*|/\*.*?\*/", " ", self.claim.text, flags=re.DOTALL)  # not its comments
        text = " ".join(code.lower().split())
        return "skip locked" in text or "pg_try_advisory" in text

    @property
    def label(self) -> str:
        """The name, or says that -next-msg replaced the strategy's claim."""
        return self.name if self.claim.origin != "given by -next-msg" else f"{self.name}+next-msg"


def load_strategy(name: str, next_msg: Path | None) -> ClaimStrategy:
    """Resolve a strategy by name; -next-msg replaces its claim statement (in every form)."""
    known = known_strategies()
    if name not in known:
        raise UsageError(f"unknown claim strategy '{name}'; use one of: {', '.join(known)}")
    fix = "pass an existing, readable file with -next-msg"
    schema = split_claim = split_schema = None
    if name == "seed":
        claim = user_file("next_msg.sql", next_msg, "-next-msg")
        if next_msg is None:
            split_claim = user_file("next_msg_split.sql", None, "-next-msg")
    else:
        base, origin = next((b / name, o) for b, o in strategy_dirs() if (b / name / "claim.sql").exists())
        # a strategy that varies another's claim names it in `extends`; its other files are that one's
        extended = base / "extends"
        parent = extended.read_text(encoding="utf-8").strip() if extended.exists() else None
        places = [(base, origin)] + [(b / parent, o) for b, o in strategy_dirs() if parent]

        def optional(file: str, what: str) -> SqlSource | None:
            found = next(((p / file, o) for p, o in places if (p / file).exists()), None)
            return None if found is None else SqlSource(found[0], found[1], read_sql(found[0], what, fix))

        if next_msg is not None:
            claim = SqlSource(next_msg, "given by -next-msg", read_sql(next_msg, "claim query", fix))
        else:
            claim = SqlSource(base / "claim.sql", origin, read_sql(base / "claim.sql", "claim query", fix))
            split_claim = optional("claim_split.sql", "split claim query")
        schema = optional("schema.sql", f"strategy '{name}' schema")
        split_schema = optional("schema_split.sql", f"strategy '{name}' split schema")
    first_line = next((line.strip() for line in claim.text.splitlines() if line.strip()), "")
    return ClaimStrategy(
        name,
        claim,
        schema,
        ordered=first_line != UNORDERED_MARK,
        split_claim=split_claim,
        split_schema=split_schema,
    )
