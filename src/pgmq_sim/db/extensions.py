"""What a design needs on the server besides its own files (queue.toml `requires`): the real pgmq,
its SQL from the `pgmq` package (a dependency, never a copy), or PgQ, Debian's extension.

pgmq: the server's own extension is used as it is, and said with its version; a schema `pgmq` of
others' is used as it is; else the package's SQL (pgmq/sql/pgmq.sql) is installed into schema
`pgmq`, marked as the tool's with its version, and replaced only when the tool installed it and the
package's version changed. PgQ: `create extension pgq` where the role may (a superuser's); else an
extension an administrator created once; else one line naming the package.
"""

from __future__ import annotations

import psycopg

from pgmq_sim.errors import UsageError
from pgmq_sim.sqlfiles import statement

PGMQ_MARK = "pgmq-sim: installed pgmq "  # the schema's comment: by the tool, and which version
PGQ_PACKAGE = "postgresql-NN-pgq3"


def pgmq_package() -> tuple[str, str]:
    """The pgmq package's SQL and its version."""
    from pgmq.install import get_embedded_install_sql, get_embedded_sql_version

    return get_embedded_install_sql(), get_embedded_sql_version()


def prepare_pgmq(conn: psycopg.Connection) -> tuple[str, str]:
    """pgmq in the run's database, in the open transaction; returned: which pgmq, said once, and
    the version of its SQL."""
    row = conn.execute(statement("pgmq_present")).fetchone()
    assert row is not None
    extension, schema_comment, schema_exists = row
    if extension is not None:
        return f"pgmq: the server's pgmq extension {extension} is used as it is", f"extension {extension}"
    sql, version = pgmq_package()
    if schema_exists and not str(schema_comment or "").startswith(PGMQ_MARK):
        return (
            "pgmq: schema pgmq exists and was not installed by pgmq-sim: used as it is (its version unknown)",
            "unknown (a schema pgmq of others)",
        )
    installed = str(schema_comment or "").removeprefix(PGMQ_MARK).split(" ", 1)[0]
    if schema_exists and installed == version:
        return f"pgmq: {version} (the pgmq package's SQL), installed by an earlier run of pgmq-sim", version
    if schema_exists:  # the tool's own, of another version: replaced
        conn.execute("drop schema pgmq cascade")
    conn.execute(sql.encode())
    conn.execute(
        f"comment on schema pgmq is '{PGMQ_MARK}{version} from the pgmq package; replaced by its next run'"
    )
    return f"pgmq: {version}, the pgmq package's SQL (pgmq/sql/pgmq.sql), installed into schema pgmq", version


def pgq_admin_steps(role: str, database: str, create: bool, grant: bool) -> str:
    """What an administrator runs once so that a plain role runs -queue pgq: the extension (a
    superuser's), and PgQ's own admin role (its queue functions and the ticker's). The queue's event
    tables stay the extension owner's: PgQ's SECURITY DEFINER functions make, fill and drop them."""
    steps = ["create extension pgq"] if create else []
    steps += [f"grant pgq_admin to {quote_ident(role)}"] if grant else []
    return f"`{'; '.join(steps)}` in database {quote_ident(database)}"


def quote_ident(name: str) -> str:
    return name if name.isidentifier() and name.islower() else '"' + name.replace('"', '""') + '"'


def prepare_pgq(conn: psycopg.Connection) -> tuple[str, str]:
    """PgQ in the run's database: its extension, created where the role may; a plain role needs
    what pgq_admin_steps names, said in one line before anything changes; the run's queues of
    another role's run are refused, named with that role."""
    row = conn.execute(statement("pgq_present")).fetchone()
    assert row is not None
    installed, available, superuser, admin, role, database, queues_owner = row
    if available is None and installed is None:
        raise UsageError(
            f"-queue pgq needs PgQ on the server, and it has none: install Debian's {PGQ_PACKAGE} (NN: the"
            " server's major version, e.g. postgresql-15-pgq3) and pgqd, or use another design"
        )
    if not superuser and (installed is None or not admin):
        raise UsageError(
            f"-queue pgq as role {role}, not a superuser: have an administrator run once"
            f" {pgq_admin_steps(role, database, installed is None, not admin)} (create extension pgq"
            " needs a superuser; pgq_admin is PgQ's role for its queue functions and pgqd's ticker, and"
            " the queues' event tables stay the extension owner's), then run as this role"
        )
    if queues_owner is not None and queues_owner != role:
        raise UsageError(
            f"-queue pgq: the run's PgQ queues (pgmq_sim_TYPE) in database {database} were left by a run of"
            f" role {queues_owner} (owner of pgmq_sim_pgq_consumers): run as {queues_owner}, or in another"
            " database"
        )
    if installed is not None:
        return f"pgq: the server's pgq extension {installed} is used", f"extension {installed}"
    conn.execute("create extension if not exists pgq")
    return f"pgq: extension {available} created in this database (Debian's package)", f"extension {available}"


def prepare_extension(conn: psycopg.Connection, requires: str | None) -> tuple[str, str] | None:
    """What the design requires, ready in the open transaction; returned: what is used and its
    version, or None (nothing to prepare: a package's SQL runs in the design's schema)."""
    if requires not in ("pgmq", "pgq"):
        return None
    if requires == "pgmq":
        return prepare_pgmq(conn)
    return prepare_pgq(conn)
