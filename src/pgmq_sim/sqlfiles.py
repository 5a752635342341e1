"""SQL files: the tool's own statements, read once at import, and the user's files.

The seed's user-facing files (schema.sql, next_msg.sql) are looked up first in the current
directory, then in the package, so an installed tool works from anywhere and a local copy wins
(designs/ reads a queue design's folder the same way). They are read once, before the server is
touched; a reinstall during a run cannot pull a file from under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from pgmq_sim.errors import UsageError
from pgmq_sim.paths import describe_path

PACKAGE_SQL = Path(__file__).with_name("sql")
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
