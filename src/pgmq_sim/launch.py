"""The command's entry point, in front of the CLI.

A distributed run (--processes, --master, --worker) imports Locust, which monkey-patches the
process with gevent; psycopg chooses its wait function when it is imported, so the patch must come
before psycopg (and everything else) is imported. A single-process run never imports Locust.
"""

from __future__ import annotations

import sys

DISTRIBUTED_FLAGS = frozenset(
    f"{dash}{name}" for dash in ("-", "--") for name in ("processes", "master", "worker")
)


def wants_locust(args: list[str]) -> bool:
    return any(arg.split("=", 1)[0] in DISTRIBUTED_FLAGS for arg in args if arg != "--")


def main() -> None:
    if wants_locust(sys.argv[1:]):
        import locust  # noqa: F401  (patches the process with gevent; must come first)
    from pgmq_sim.cli.command import main as cli_main

    cli_main()
