"""The SQL of the Python queues built in as designs (procrastinate, pgqueuer), read from their installed
packages when a run loads the design: a dependency, never a copy. A built-in design's schema.sql names
a package's text as `{{product.part}}`; the text goes in as a dollar-quoted literal (the schema runs
it with `execute`), so the folder holds only the tool's own SQL around it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from importlib import metadata, resources
from uuid import UUID

from pgmq_sim.errors import UsageError

PACKAGED = ("procrastinate", "pgqueuer")  # queue.toml `requires` whose SQL the package gives
MARKER = re.compile(r"\{\{(\w+)\.(\w+)\}\}")
QUOTE = "$pgmq_sim_product$"


@dataclass(frozen=True)
class ProductSql:
    """A package's SQL texts by part, and which version of the package gave them."""

    name: str
    version: str
    source: str  # where in the package the SQL comes from, said with the version
    parts: dict[str, str]

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "sql": self.source}

    @property
    def line(self) -> str:
        return f"{self.name}: {self.version}, the {self.name} package's SQL ({self.source})"


def _procrastinate() -> ProductSql:
    schema = resources.files("procrastinate.sql").joinpath("schema.sql").read_text(encoding="utf-8")
    return ProductSql(
        "procrastinate", metadata.version("procrastinate"), "procrastinate/sql/schema.sql", {"schema": schema}
    )


def _pgqueuer() -> ProductSql:
    """pgqueuer's statements from its query builder, in the shape its own worker runs them: a dequeue
    without concurrency limits ($1 batch, $2 entrypoints, $3 the queue manager, $4 the heartbeat
    timeout), the enqueue of arrays, log_job (done or failed), retry_job, the heartbeat."""
    from pgqueuer.adapters.persistence.qb import QueryBuilderEnvironment, QueryQueueBuilder
    from pgqueuer.domain.types import QueueEntrypoint, QueueManagerId

    queries = QueryQueueBuilder()
    dequeue = queries.build_dequeue_query(
        batch_size=1,
        entrypoints=[QueueEntrypoint("-")],
        concurrency_limits=[0],
        queue_manager_id=QueueManagerId(UUID(int=0)),
        global_concurrency_limit=None,
        heartbeat_timeout=timedelta(seconds=1),
    ).sql
    environment = QueryBuilderEnvironment()
    parts = {
        "install": environment.build_install_query(),
        "uninstall": environment.build_uninstall_query(),
        "dequeue": dequeue,
        "enqueue": queries.build_enqueue_query(),
        "log_job": queries.build_log_job_query(),
        "retry_job": queries.build_retry_job_query(),
        "heartbeat": queries.build_update_heartbeat_query(),
    }
    return ProductSql("pgqueuer", metadata.version("pgqueuer"), "pgqueuer's query builder", parts)


def product_sql(name: str) -> ProductSql:
    """The package's SQL; a package that cannot be imported is one line naming it."""
    try:
        return _procrastinate() if name == "procrastinate" else _pgqueuer()
    except (ImportError, metadata.PackageNotFoundError, FileNotFoundError) as exc:
        raise UsageError(
            f"-queue {name} runs the {name} package's own SQL, and it cannot be read ({exc}):"
            f" pip install {name}"
        ) from None


def fill(text: str, product: ProductSql) -> str:
    """The schema with each `{{product.part}}` replaced by that text as a dollar-quoted literal."""

    def part(found: re.Match[str]) -> str:
        if found.group(1) != product.name or found.group(2) not in product.parts:
            raise UsageError(f"schema.sql names {found.group(0)}, which {product.name} does not give")
        sql = product.parts[found.group(2)]
        assert QUOTE not in sql
        return f"{QUOTE}{sql}{QUOTE}"

    return MARKER.sub(part, text)
