"""Outputs (each output file declares its check, its writing and its line in the summary:
cli/outputs); and more processes, more hosts (Locust's runners)."""

from __future__ import annotations

from pgmq_sim.cli.option import (
    PORT,
    SEED_DSN,
    Option,
    Output,
    Range,
)
from pgmq_sim.cli.outputs import json_file, plot_file, report_file
from pgmq_sim.model.kinds import ProgressMode
from pgmq_sim.render.plot import check_plot_support
from pgmq_sim.render.report import check_report_path

OUTPUT_OPTIONS = (
    # -- outputs --------------------------------------------------------------------------------
    Option(
        "json",
        "path",
        "the whole result as JSON, with the scenario it ran (regular files written atomically; a"
        " symlink is followed, a device written directly); `-` for stdout (the summary then goes to"
        " stderr)",
        "outputs",
        metavar="FILE",
        dest="json_path",
        place="out",
        output=Output("JSON", json_file, rank=1),
        example=("-json", "out.json"),
    ),
    Option(
        "plot",
        "path",
        "the report's charts as one picture (PNG, SVG or PDF): the run over time, its latency account and"
        " waits, a sweep's knee, a comparison's cells (`pip install '.[plot]'`)",
        "outputs",
        metavar="FILE.png",
        dest="plot_path",
        place="out",
        output=Output("plot", plot_file, check_plot_support, rank=2),
        example=("-plot", "out.png"),
    ),
    Option(
        "report",
        "path",
        "one self-contained HTML page of the run (a comparison, a sweep): the answer, charts over time,"
        " the tables, the advice and the scenario; no network needed to open it (`pip install"
        " '.[plot]'`); see [Reports](docs/scenarios.md#reports)",
        "outputs",
        metavar="FILE.html",
        dest="report_path",
        place="out",
        output=Output("report", report_file, check_report_path, rank=0),
        example=("-report", "out.html"),
    ),
    Option(
        "verbose",
        "switch",
        "the summary prints every row (costs, workers, steps, checks, each fault, the latency account"
        " per type), not the answer alone",
        "outputs",
        default=False,
        short="v",
        example=("-verbose",),
    ),
    Option(
        "progress",
        "text",
        "`auto`: bars on a terminal, a plain line every 5 s otherwise; or always `bars`, always"
        " `plain`, or `off`",
        "outputs",
        default=ProgressMode.AUTO.value,
        metavar="auto|bars|plain|off",
        choices=ProgressMode,
        example=("-progress", "off"),
    ),
    # -- more processes, more hosts (Locust's runners) ------------------------------------------
    Option(
        "processes",
        "int",
        "run the workers in N processes on this host (`-1`: one per core), and a `-rate`'s or"
        " `-rate-profile`'s producer sessions; see [More processes, more hosts](docs/processes.md)",
        "runners",
        metavar="N",
        setting=None,
        gnu=True,
        example=("--processes", "2"),
    ),
    Option(
        "master",
        "switch",
        "master of a run across hosts: worker processes join it with `--worker`",
        "runners",
        default=False,
        setting=None,
        gnu=True,
        example=("--master", "-dsn", SEED_DSN),
    ),
    Option(
        "expect-workers",
        "int",
        "the worker processes a master waits for",
        "runners",
        default=1,
        metavar="K",
        setting=None,
        range=Range(1),
        gnu=True,
        example=("--master", "-dsn", SEED_DSN, "--expect-workers", "2"),
    ),
    Option(
        "master-bind-host",
        "text",
        "where the master listens for worker processes (`*`: every interface)",
        "runners",
        default="*",
        metavar="H",
        setting=None,
        gnu=True,
        example=("--master", "-dsn", SEED_DSN, "--master-bind-host", "127.0.0.1"),
    ),
    Option(
        "master-bind-port",
        "int",
        "the port the master listens on",
        "runners",
        default=5557,
        metavar="P",
        setting=None,
        range=PORT,
        gnu=True,
        example=("--master", "-dsn", SEED_DSN, "--master-bind-port", "6557"),
    ),
    Option(
        "worker",
        "switch",
        "join a master as a worker process; every setting comes from the master",
        "runners",
        default=False,
        setting=None,
        gnu=True,
        example=("--worker", "--master-host", "master.example"),
    ),
    Option(
        "master-host",
        "text",
        "with `--worker`: the master to join",
        "runners",
        metavar="H",
        setting=None,
        gnu=True,
        example=("--worker", "--master-host", "master.example"),
    ),
    Option(
        "master-port",
        "int",
        "with `--worker`: the master's port",
        "runners",
        default=5557,
        metavar="P",
        setting=None,
        range=PORT,
        gnu=True,
        example=("--worker", "--master-host", "master.example", "--master-port", "6557"),
    ),
    Option(
        "web",
        "switch",
        "with `--processes` or `--master`: Locust's web UI showing the run live",
        "runners",
        default=False,
        setting=None,
        gnu=True,
        example=("--processes", "2", "--web"),
    ),
    Option(
        "web-port",
        "int",
        "the web UI's port",
        "runners",
        default=8089,
        metavar="P",
        setting=None,
        range=PORT,
        gnu=True,
        example=("--processes", "2", "--web", "--web-port", "8090"),
    ),
)
