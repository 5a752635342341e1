"""The command's entry point, in front of the CLI.

A distributed run (--processes, --master, --worker, or those keys in a -config file) imports Locust,
which monkey-patches the process with gevent; psycopg chooses its wait function when it is imported,
so the patch must come before psycopg (and everything else) is imported. A single-process run never
imports Locust.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

RUNNERS = ("processes", "master", "worker")
DISTRIBUTED_FLAGS = frozenset(f"{dash}{name}" for dash in ("-", "--") for name in RUNNERS)
CONFIG_FLAGS = ("-config", "--config")


def wants_locust(args: list[str]) -> bool:
    flags = [arg.split("=", 1)[0] for arg in args[: args.index("--") if "--" in args else len(args)]]
    return any(flag in DISTRIBUTED_FLAGS for flag in flags) or _config_wants_locust(args)


def _config_wants_locust(args: list[str]) -> bool:
    """A scenario file that names a runner; a file that cannot be read is the CLI's to report."""
    for index, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in CONFIG_FLAGS:
            path = Path(value if eq else args[index + 1] if index + 1 < len(args) else "")
            try:
                text = path.read_text(encoding="utf-8")
                data = json.loads(text).get("scenario") if path.suffix == ".json" else tomllib.loads(text)
            except (OSError, ValueError, AttributeError):
                return False
            return isinstance(data, dict) and any(data.get(key) not in (None, False) for key in RUNNERS)
    return False


def main() -> None:
    if wants_locust(sys.argv[1:]):
        import locust  # noqa: F401  (patches the process with gevent; must come first)
    from pgmq_sim.cli.command import main as cli_main

    cli_main()
