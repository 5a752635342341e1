"""Which engine the flags ask for, and the flag combinations a distributed run refuses.

Imported by every run, so it must not import Locust.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pgmq_sim.errors import UsageError
from pgmq_sim.server import DSN_ENV
from pgmq_sim.settings import Settings

# what a worker may be given itself; everything else comes from the master
WORKER_FLAGS = {"worker", "master_host", "master_port", "logfile", "progress", "config", "print_config"}
MASTER_FLAGS = ("expect_workers", "master_bind_host", "master_bind_port")
WORKER_ONLY = ("master_host", "master_port")
WEB_FLAGS = ("web", "web_port")


@dataclass(frozen=True)
class DistributedOptions:
    """How the master finds its worker processes."""

    processes: int | None  # local worker processes it starts itself, or None: wait for --worker
    expect_workers: int
    bind_host: str
    bind_port: int
    web: bool
    web_port: int


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def distributed_mode(options: dict[str, Any], given: Callable[[str], bool]) -> str | None:
    """None (one process, threads), "master" (--processes or --master) or "worker". `given`: whether
    an option was given (by a flag or a scenario file), by its parameter's name."""
    if options["worker"]:
        if options["master"] or options["processes"] is not None:
            raise UsageError("--worker joins a master; give it without --master and --processes")
        extra = [name for name in options if given(name) and name not in WORKER_FLAGS]
        if extra:
            raise UsageError(
                f"a worker takes every setting from the master; drop {', '.join(_flag(n) for n in extra)}"
                " (give them to the master)"
            )
        if not options["master_host"]:
            raise UsageError("--worker needs --master-host HOST (the host running pgmq-sim --master)")
        return "worker"
    for name in WORKER_ONLY:
        if given(name):
            raise UsageError(f"{_flag(name)} is for a worker; use it with --worker")
    distributed = options["master"] or options["processes"] is not None
    if not distributed:
        for name in (*MASTER_FLAGS, *WEB_FLAGS):
            if given(name):
                raise UsageError(f"{_flag(name)} needs --master or --processes N")
        return None
    if options["master"] and options["processes"] is not None:
        raise UsageError("give --processes N (this host) or --master (several hosts), not both")
    if options["compare"]:
        raise UsageError("-compare runs on one process; drop --processes/--master or -compare")
    if options["processes"] is not None:
        for name in MASTER_FLAGS:
            if given(name):
                raise UsageError(f"{_flag(name)} is for --master; --processes N starts its own workers")
        if options["processes"] == 0 or options["processes"] < -1:
            raise UsageError(f"--processes {options['processes']} must be a count >= 1, or -1 (one per core)")
    else:
        if not options["dsn"] and not os.environ.get(DSN_ENV):
            raise UsageError(
                "--master needs -dsn URL (or PGMQ_SIM_DSN): the embedded server listens only on a local"
                " socket, which workers on other hosts cannot reach"
            )
    return "master"


def distributed_options(options: dict[str, Any]) -> DistributedOptions:
    processes = options["processes"]
    if processes == -1:
        processes = os.cpu_count() or 1
    return DistributedOptions(
        processes=processes,
        expect_workers=processes if processes is not None else options["expect_workers"],
        bind_host="127.0.0.1" if processes is not None else options["master_bind_host"],
        bind_port=0 if processes is not None else options["master_bind_port"],
        web=options["web"],
        web_port=options["web_port"],
    )


def checked_fleet(options: dict[str, Any], settings: Settings) -> DistributedOptions:
    """The worker processes the distributed flags ask for, checked against the settings."""
    chosen = distributed_options(options)
    if chosen.processes is not None and chosen.processes > settings.workers:
        raise UsageError(
            f"--processes {chosen.processes} is more than -workers {settings.workers};"
            " every process needs a worker"
        )
    if chosen.processes is None and chosen.expect_workers > settings.workers:
        raise UsageError(
            f"--expect-workers {chosen.expect_workers} is more than -workers {settings.workers};"
            " every worker process needs a queue worker"
        )
    return chosen
