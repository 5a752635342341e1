"""A queue design: the folder of SQL that is a queue, as the tool reads it before touching a server.

A design is its statements, each a file (`schema.sql`, `enqueue.sql`, `claim.sql`, `complete.sql`,
and optionally `complete_delete.sql`, `fail.sql`, `pending.sql`, `notify.sql`), with `queue.toml`
saying how they are run. The seed's table and its claim strategies are built-in designs, folders
under this package; a team's own queue is a folder of its own (`-queue DIR`). Files are read once
and checked here (present, UTF-8, a known `queue.toml`); whether they run is the server's to say,
in the check before the run changes anything.

The built-in designs on the seed's table (`table = "msg_queue"` in their queue.toml) keep the
seed's files: its schema (`-schema`, ./schema.sql, else packaged) and, for `seed`, its claim
(`-next-msg`, ./next_msg.sql, else packaged); their own `schema.sql` adds to that table (an index),
and the tool's own machinery for that table applies (COPY prefill, leases and retries on its
columns, the stall diagnosis of its groups).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from pgmq_sim.designs.products import PACKAGED, ProductSql, fill, product_sql
from pgmq_sim.errors import UsageError
from pgmq_sim.model.kinds import TxMode
from pgmq_sim.model.locks import ClaimLocks
from pgmq_sim.paths import describe_path
from pgmq_sim.sqlfiles import SqlSource, read_sql, user_file

BUILT_IN = Path(__file__).parent
REQUIRED = ("schema.sql", "enqueue.sql", "claim.sql", "complete.sql")
OPTIONAL = (
    "complete_delete.sql",
    "complete_archive.sql",
    "fail.sql",
    "pending.sql",
    "notify.sql",
    "recover.sql",
)
SEED_TABLE = "msg_queue"
TOML_KEYS = {
    "description",
    "transaction",
    "ordered",
    "order",
    "delivery",
    "table",
    "extends",
    "requires",
    "channel",
}
# what the tool installs or finds before a design's schema (db/extensions), or reads from a package
REQUIRES = ("pgmq", "pgq", *PACKAGED)
ORDERS = ("enqueue", "priority")  # within a group: enqueue order, or by priority then enqueue order
DELIVERIES = ("exactly-once", "at-least-once")
UNORDERED_MARK = "-- pgmq-sim: unordered"  # an older claim file's way to say it keeps no order
STRATEGIES = ("seed", "indexed", "affinity", "advisory", "fifo")  # -compare all: the seed table's claims

BATCH_PARAMETER = re.compile(r"\$2(?!\d)")  # a claim's batch size: how many it may take


@dataclass(frozen=True)
class QueueDesign:
    """The statements of one queue and how to run them."""

    name: str
    origin: str  # built-in | current directory | given by -queue
    folder: Path
    schema: SqlSource
    enqueue: SqlSource
    claim: SqlSource
    complete: SqlSource  # the completion this run uses (the deleting form with -delmsg)
    extra_schema: SqlSource | None = None  # on the seed's table: what the design adds to it
    fail: SqlSource | None = None
    pending: SqlSource | None = None
    notify: SqlSource | None = None
    recover: SqlSource | None = None  # a split design's: messages whose lease passed back to pending
    split_claim: SqlSource | None = None  # on the seed's table: the claim's form for leases and retries
    split_schema: SqlSource | None = None
    ordered: bool = True
    transaction: TxMode = TxMode.SINGLE
    at_least_once: bool = False  # a message whose lease passes may be delivered again, by design
    description: str = ""
    seed_table: bool = False  # the seed's msg_queue: the tool's own machinery for it applies
    deletes: bool = False  # the completion in use deletes (-delmsg, or the folder's only form)
    other_completions: tuple[SqlSource, ...] = ()  # a folder's completion forms the run does not use
    requires: str | None = None  # pgmq | pgq: made ready by the tool before the schema runs
    product: ProductSql | None = None  # procrastinate | pgqueuer: the package's SQL its schema runs
    by_priority: bool = False  # a group's order is by priority, then enqueue order (procrastinate's lock)
    channel: str | None = None  # its own notification channel, {type} for the type: one message each

    @property
    def completions(self) -> tuple[SqlSource, ...]:
        """Every completion form of the folder, the one the run uses first (each is tried)."""
        return (self.complete, *self.other_completions)

    def for_retries(self) -> QueueDesign:
        """On the seed's table, the form to use with -tx split or -fail-rate; a claim without one is
        used as it is (and the audit judges whether it keeps order)."""
        return replace(
            self,
            claim=self.split_claim or self.claim,
            extra_schema=self.split_schema or self.extra_schema,
            split_claim=None,
            split_schema=None,
        )

    @property
    def has_split_form(self) -> bool:
        return self.split_claim is not None

    @property
    def takes_batch(self) -> bool:
        """The claim takes up to -batch messages: its text uses $2, the batch's size."""
        return BATCH_PARAMETER.search(self.claim.text) is not None

    @property
    def skips_locked(self) -> bool:
        """The claim passes over what another worker holds (SKIP LOCKED, an advisory try-lock)."""
        return ClaimLocks.read(self.claim.text).skips_locked

    @property
    def label(self) -> str:
        """The name, or says that -next-msg replaced the design's claim."""
        return self.name if self.claim.origin != "given by -next-msg" else f"{self.name}+next-msg"

    @property
    def files(self) -> dict[str, dict[str, str]]:
        """Every file the run uses and where it came from (the summary's and the JSON's `files`)."""
        named = {
            "schema": self.schema,
            "design_schema": self.extra_schema,
            "enqueue": self.enqueue,
            "claim": self.claim,
            "complete": self.complete,
            "fail": self.fail,
            "pending": self.pending,
            "notify": self.notify,
            "recover": self.recover,
        }
        return {key: source.as_json() for key, source in named.items() if source is not None}

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "origin": self.origin,
            "folder": describe_path(self.folder),
            "description": self.description,
            "transaction": self.transaction,
            "ordered": self.ordered,
            "delivery": "at-least-once" if self.at_least_once else "exactly-once",
            "seed_table": self.seed_table,
            "completion": "delete" if self.deletes else "update",
            "requires": self.requires,
            "group_order": "priority, then enqueue" if self.by_priority else "enqueue",
        }


def built_in_designs() -> list[str]:
    return sorted(p.name for p in BUILT_IN.iterdir() if (p / "queue.toml").is_file())


def known_designs() -> list[str]:
    """Built-in names, and the current directory's ./strategies/NAME folders (as before designs)."""
    names = set(built_in_designs())
    local = Path.cwd() / "strategies"
    if local.is_dir():
        names.update(p.parent.name for p in local.glob("*/claim.sql"))
    return sorted(names)


def _is_path(name: str) -> bool:
    return "/" in name or name.startswith(".") or name.endswith(".sql")


def find_design(name: str, flag: str) -> tuple[Path, str]:
    """Where a design of this name or path is, and how it was found. A folder in the current
    directory of a built-in's name wins (./NAME, or ./strategies/NAME as before designs)."""
    if _is_path(name):
        folder = Path(name)
        if not folder.is_dir():
            raise UsageError(
                f"{flag} {name}: no such folder; give a queue design's folder or a built-in name"
            )
        return folder, f"given by {flag}"
    for local in (Path.cwd() / name, Path.cwd() / "strategies" / name):
        if (local / "claim.sql").is_file() or (local / "queue.toml").is_file():
            return local, "current directory"
    if (BUILT_IN / name / "queue.toml").is_file():
        return BUILT_IN / name, "built-in"
    known = ", ".join(known_designs())
    raise UsageError(f"unknown queue design '{name}'; use one of: {known}, or a folder (-queue DIR)")


def read_toml(folder: Path) -> dict[str, Any]:
    path = folder / "queue.toml"
    if not path.is_file():
        return {}
    text = read_sql(path, "queue.toml", "fix the file or remove it")
    try:
        found = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{describe_path(path)} is not valid TOML: {exc}; fix it") from None
    unknown = sorted(set(found) - TOML_KEYS)
    if unknown:
        keys = ", ".join(sorted(TOML_KEYS))
        raise UsageError(f"{describe_path(path)}: unknown key(s) {', '.join(unknown)}; it may set {keys}")
    return found


def _choice(value: object, key: str, allowed: tuple[str, ...], where: Path) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise UsageError(
            f"{describe_path(where / 'queue.toml')}: {key} = {value!r}; use one of {', '.join(allowed)}"
        )
    return value


class _Files:
    """A design's folder and the folders it extends, searched in that order."""

    def __init__(self, folder: Path, origin: str) -> None:
        self.places = [(folder, origin)]
        self.settings = read_toml(folder)
        seen = {folder.resolve()}
        legacy = folder / "extends"  # before queue.toml: a one-line file naming the design extended
        if "extends" not in self.settings and legacy.is_file():
            self.settings["extends"] = legacy.read_text(encoding="utf-8").strip()
        parent = self.settings.get("extends")
        while parent is not None:
            if not isinstance(parent, str):
                raise UsageError(f"{describe_path(folder / 'queue.toml')}: extends must name a design")
            base, base_origin = find_design(parent, "extends")
            if base.resolve() in seen:
                raise UsageError(
                    f"{describe_path(folder / 'queue.toml')}: extends '{parent}' goes in a circle"
                )
            seen.add(base.resolve())
            self.places.append((base, base_origin))
            inherited = read_toml(base)
            self.settings = inherited | self.settings | {"extends": inherited.get("extends")}
            parent = inherited.get("extends")

    def find(self, name: str) -> SqlSource | None:
        for folder, origin in self.places:
            path = folder / name
            if path.is_file():
                return SqlSource(path, origin, read_sql(path, name, f"fix {name} in {describe_path(folder)}"))
        return None


def load_design(
    name: str,
    *,
    flag: str = "-queue",
    schema: Path | None = None,
    next_msg: Path | None = None,
    delmsg: bool = False,
    archive: bool = False,
    payload: bool = False,
) -> QueueDesign:
    """Read a design by name or folder; -schema and -next-msg replace the seed table's files.
    On the seed's table the enqueue writes the payload column only with -payload-bytes (`payload`):
    the Go tool's own table has none."""
    folder, origin = find_design(name, flag)
    files = _Files(folder, origin)
    toml = files.settings
    # ./strategies/NAME with a claim and no enqueue.sql: a claim strategy on the seed's table, as before
    legacy = (
        folder.parent == Path.cwd() / "strategies"
        and "table" not in toml
        and files.find("enqueue.sql") is None
        and files.find("claim.sql") is not None
    )
    seed_table = toml.get("table") == SEED_TABLE or legacy
    if "table" in toml and toml["table"] != SEED_TABLE:
        raise UsageError(
            f"{describe_path(folder / 'queue.toml')}: table = {toml['table']!r}; only the built-in designs"
            f" name a table ({SEED_TABLE!r}): a folder's own schema.sql is its whole queue"
        )
    if seed_table and archive:
        raise UsageError(
            f"-archive: the seed's table ({name}) has no archive; drop -archive or use -queue visibility"
        )
    if not seed_table and (schema is not None or next_msg is not None):
        given = "-schema" if schema is not None else "-next-msg"
        raise UsageError(
            f"{given} replaces a file of the seed's table; the design {name} is a folder of its own:"
            f" edit its files instead, or drop {given}"
        )
    keys = _keys(toml, folder)
    ordered, description, requires = keys.ordered, keys.description, keys.requires
    if seed_table:
        return _on_seed_table(
            name, folder, origin, files, schema, next_msg, delmsg, ordered, " ".join(description), payload
        )
    missing = [f for f in REQUIRED if files.find(f) is None]
    if missing:
        raise UsageError(
            f"queue design {describe_path(folder)} has no {', '.join(missing)}; a design is a folder with"
            f" {', '.join(REQUIRED)} (and optionally {', '.join(OPTIONAL)}, queue.toml)"
        )
    found = {f: files.find(f) for f in (*REQUIRED, *OPTIONAL)}
    if archive:  # -archive: the design's archiving completion instead
        if delmsg:
            raise UsageError("-archive and -delmsg each pick a completion; give one")
        if found["complete_archive.sql"] is None:
            raise UsageError(
                f"-archive picks a design's archiving completion, and {describe_path(folder)} has no"
                " complete_archive.sql: drop -archive, or add it"
            )
        found["complete.sql"] = found["complete_archive.sql"]
    forms = [found[f] for f in ("complete.sql", "complete_delete.sql", "complete_archive.sql")]
    complete, deletes = _completion(found["complete.sql"], found["complete_delete.sql"], delmsg, folder)
    schema_file = _present(found["schema.sql"])
    product = product_sql(requires) if requires in PACKAGED else None
    if product is not None:
        schema_file = replace(schema_file, text=fill(schema_file.text, product))
    return QueueDesign(
        name=folder.name if origin != "built-in" else name,
        origin=origin,
        folder=folder,
        schema=schema_file,
        enqueue=_present(found["enqueue.sql"]),
        claim=_present(found["claim.sql"]),
        complete=complete,
        fail=found["fail.sql"],
        pending=found["pending.sql"],
        notify=found["notify.sql"],
        recover=found["recover.sql"],
        ordered=ordered,
        transaction=keys.transaction,
        at_least_once=keys.delivery == "at-least-once",
        description=" ".join(description),
        deletes=deletes,
        other_completions=tuple(f for f in dict.fromkeys(forms) if f is not None and f != complete),
        requires=requires,
        product=product,
        by_priority=keys.by_priority,
        channel=keys.channel,
    )


class _Keys(NamedTuple):
    """queue.toml's keys, checked."""

    transaction: TxMode
    delivery: str
    ordered: bool
    description: list[str]
    requires: str | None
    by_priority: bool
    channel: str | None


def _keys(toml: dict[str, Any], folder: Path) -> _Keys:
    transaction = TxMode(
        _choice(toml.get("transaction", "single"), "transaction", ("single", "split"), folder)
    )
    delivery = _choice(toml.get("delivery", "exactly-once"), "delivery", DELIVERIES, folder)
    ordered = toml.get("ordered", True)
    if not isinstance(ordered, bool):
        raise UsageError(f"{describe_path(folder / 'queue.toml')}: ordered must be true or false")
    description = str(toml.get("description", "")).strip().splitlines()[0:1]
    requires = toml.get("requires")
    if requires is not None:
        requires = _choice(requires, "requires", REQUIRES, folder)
    by_priority = _choice(toml.get("order", "enqueue"), "order", ORDERS, folder) == "priority"
    channel = toml.get("channel")
    if channel is not None and (not isinstance(channel, str) or "{type}" not in channel):
        raise UsageError(
            f"{describe_path(folder / 'queue.toml')}: channel = {channel!r}; name the design's notification"
            ' channel with {type} for the message type, e.g. "jobs_{type}"'
        )
    return _Keys(transaction, delivery, ordered, description, requires, by_priority, channel)


def _present(source: SqlSource | None) -> SqlSource:
    assert source is not None  # checked by the caller
    return source


def _completion(
    update: SqlSource | None, delete: SqlSource | None, delmsg: bool, folder: Path
) -> tuple[SqlSource, bool]:
    """complete.sql decides how a message ends; -delmsg picks complete_delete.sql where there is one."""
    assert update is not None
    if not delmsg:
        return update, False
    if delete is None:
        raise UsageError(
            f"-delmsg picks a design's deleting completion, and {describe_path(folder)} has only"
            " complete.sql (its completion decides): drop -delmsg, or add complete_delete.sql"
        )
    return delete, True


def _on_seed_table(
    name: str,
    folder: Path,
    origin: str,
    files: _Files,
    schema: Path | None,
    next_msg: Path | None,
    delmsg: bool,
    ordered: bool,
    description: str,
    payload: bool = False,
) -> QueueDesign:
    """A design on the seed's table: its schema, the seed's completions and enqueue, and the claim
    (the seed's next_msg.sql, or the folder's claim.sql), each replaceable as before."""
    seed = _Files(BUILT_IN / "seed", "built-in")
    fix = "pass an existing, readable file with -next-msg"
    split_claim = None
    if name == "seed" and origin == "built-in":
        claim = user_file("next_msg.sql", next_msg, "-next-msg")
        if next_msg is None:
            split_claim = user_file("next_msg_split.sql", None, "-next-msg")
    elif next_msg is not None:
        claim = SqlSource(next_msg, "given by -next-msg", read_sql(next_msg, "claim query", fix))
    else:
        found = files.find("claim.sql")
        if found is None:
            raise UsageError(f"queue design {describe_path(folder)} has no claim.sql; add one")
        claim = found
        split_claim = files.find("claim_split.sql")
    first_line = next((line.strip() for line in claim.text.splitlines() if line.strip()), "")
    update, delete = files.find("complete.sql") or seed.find("complete.sql"), seed.find("complete_delete.sql")
    complete, deletes = _completion(update, files.find("complete_delete.sql") or delete, delmsg, folder)
    return QueueDesign(
        name=name,
        origin=origin,
        folder=folder,
        schema=user_file("schema.sql", schema, "-schema"),
        enqueue=_present(
            files.find("enqueue.sql") or seed.find("enqueue_payload.sql" if payload else "enqueue.sql")
        ),
        claim=claim,
        complete=complete,
        extra_schema=files.find("schema.sql") if folder != BUILT_IN / "seed" else None,
        split_claim=split_claim,
        split_schema=files.find("schema_split.sql"),
        ordered=ordered and first_line != UNORDERED_MARK,
        description=description,
        seed_table=True,
        deletes=deletes,
    )
