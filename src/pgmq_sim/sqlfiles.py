"""SQL files: the queue's schema and statements, loaded by name.

The user-facing files (schema.sql, next_msg.sql, strategies/NAME/*.sql) are
looked up first in the current directory, then in the package, so an installed
tool works from anywhere and a local copy wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgmq_sim.errors import UsageError

PACKAGE_SQL = Path(__file__).with_name("sql")
UNORDERED_MARK = "-- pgmq-sim: unordered"


def read_sql(path: Path, what: str, fix: str) -> str:
    """Read a SQL file the user may have named, with a one-line error if that fails."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what} file {path} does not exist; {fix}") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read {what} file {path}: {reason}; {fix}") from None
    if not text.strip():
        raise UsageError(f"{what} file {path} is empty; {fix}")
    return text


def statement(name: str) -> str:
    """A packaged statement the tool runs itself (not user-replaceable)."""
    return (PACKAGE_SQL / f"{name}.sql").read_text(encoding="utf-8")


def user_file(name: str, given: Path | None) -> Path:
    """The file named by flag, else ./name, else the packaged copy."""
    if given is not None:
        return given
    local = Path.cwd() / name
    return local if local.exists() else PACKAGE_SQL / name


def strategy_dirs() -> list[Path]:
    return [Path.cwd() / "strategies", PACKAGE_SQL / "strategies"]


def known_strategies() -> list[str]:
    names = {"seed"}
    for base in strategy_dirs():
        if base.is_dir():
            names.update(p.parent.name for p in base.glob("*/claim.sql"))
    return sorted(names)


@dataclass(frozen=True)
class ClaimStrategy:
    """How workers claim: the claim statement and the schema it needs."""

    name: str
    claim_sql: str
    claim_source: Path
    schema_sql: str | None
    ordered: bool

    @property
    def wrapped_claim_sql(self) -> str:
        """The claim plus the server clock taken after it locked its row (the audit's claimed_at)."""
        body = self.claim_sql.strip().rstrip(";").strip()
        return (
            f"with claimed as (\n{body}\n)\n"
            "select claimed.msg_id, claimed.queue_type, claimed.order_id, clock_timestamp()"
            " from claimed"
        )


def prepare_claim(name: str, wrapped_claim_sql: str) -> str:
    """PREPARE for a claim: its one parameter, the queue type, is declared text."""
    return f"prepare {name}(text) as {wrapped_claim_sql}"


def load_strategy(name: str, next_msg: Path | None) -> ClaimStrategy:
    """Resolve a strategy by name; -next-msg replaces its claim statement."""
    known = known_strategies()
    if name not in known:
        raise UsageError(f"unknown claim strategy '{name}'; use one of: {', '.join(known)}")
    fix = "pass an existing, readable file with -next-msg"
    schema_sql = None
    if name == "seed":
        claim_path = user_file("next_msg.sql", next_msg)
    else:
        base = next(b / name for b in strategy_dirs() if (b / name / "claim.sql").exists())
        claim_path = next_msg or base / "claim.sql"
        if (base / "schema.sql").exists():
            schema_sql = read_sql(base / "schema.sql", f"strategy '{name}' schema", fix)
    claim_sql = read_sql(claim_path, "claim query", fix)
    first_line = next((line.strip() for line in claim_sql.splitlines() if line.strip()), "")
    ordered = first_line != UNORDERED_MARK
    return ClaimStrategy(name, claim_sql, claim_path, schema_sql, ordered)
