"""Every option of every command, once: the run's (the Go tool's own first, then the queue design,
the workload, time and sweeps, faults, the path, gates, outputs and the runners), the audit's and
the diff's. The flags (-fill-db, --fill-db), the scenario file's keys (fill-db = 100), --help, the
JSON's scenario and the docs' flag tables are all read from these.

The run's options are declared by --help's sections in cli/options_go, options_load,
options_faults, options_path, options_gates and options_out. A new option is one `Option(...)`
there (and, for a run, its typed field in Settings, which cli/plan fills from it); see
docs/scenarios.md#adding-an-option."""

from __future__ import annotations

import dataclasses

from pgmq_sim.cli.option import SEED_DSN, CommandOptions, Option
from pgmq_sim.cli.options_faults import FAULT_OPTIONS
from pgmq_sim.cli.options_gates import GATE_OPTIONS
from pgmq_sim.cli.options_go import GO_OPTIONS
from pgmq_sim.cli.options_load import LOAD_OPTIONS
from pgmq_sim.cli.options_out import OUTPUT_OPTIONS
from pgmq_sim.cli.options_path import PATH_OPTIONS
from pgmq_sim.dsn import DSN_ENV
from pgmq_sim.verdicts.diff import DEFAULT_FAIL_ON, parse_fail_on

RUN_OPTIONS = (*GO_OPTIONS, *LOAD_OPTIONS, *FAULT_OPTIONS, *PATH_OPTIONS, *GATE_OPTIONS, *OUTPUT_OPTIONS)


def _run_option(name: str) -> Option:
    return next(o for o in RUN_OPTIONS if o.name == name)


# every command reads a scenario and can print one
SCENARIO = (
    Option(
        "config",
        "path",
        "read the options from a scenario file (TOML; or a run's JSON, to rerun it); a flag given too"
        " wins over the file; see [Scenarios](docs/scenarios.md#scenarios)",
        "scenario",
        metavar="FILE",
        setting=None,
        in_file=False,
    ),
    Option(
        "print-config",
        "switch",
        "print the scenario of the options given (the flags and `-config`'s) as TOML, and run nothing",
        "scenario",
        default=False,
        setting=None,
        in_file=False,
    ),
)
VERSION = Option("version", "version", "the version", "scenario", setting=None, in_file=False)
RUN = CommandOptions("pgmq-sim", (*RUN_OPTIONS, *SCENARIO, VERSION))

AUDIT = CommandOptions(
    "pgmq-sim audit",
    (
        # the run's declarations (type, range, check, secret), with the audit's own words
        dataclasses.replace(
            _run_option("dsn"),
            help='the server whose queue and journal to audit; in a scenario file `"$VARIABLE"` names an'
            " environment variable",
            section="path",
            shown_default=f"`${DSN_ENV}`",
        ),
        Option(
            "json",
            "path",
            "the verdict as JSON; `-` for stdout",
            "outputs",
            metavar="FILE",
            dest="json_path",
            place="out",
            example=("-dsn", SEED_DSN, "-json", "audit.json"),
        ),
        dataclasses.replace(  # an audit waits out a passing refusal; a run rides through a restart
            _run_option("reconnect-timeout"),
            help="how long a passing refusal (a server starting up, a pooler retrying its login) is"
            " waited out",
            default=30.0,
            example=("-dsn", SEED_DSN, "-reconnect-timeout", "5"),
        ),
        *SCENARIO,
    ),
)

DIFF = CommandOptions(
    "pgmq-sim diff",
    (
        Option(
            "base",
            "path",
            "the earlier run's JSON",
            "diff",
            metavar="BASE.json",
            place="in",
            argument=True,
        ),
        Option(
            "new",
            "path",
            "the later run's JSON",
            "diff",
            metavar="NEW.json",
            place="in",
            argument=True,
        ),
        Option(
            "fail-on",
            "text",
            "exit 4 when one of these figures got worse beyond the noise (in a scenario file an array)",
            "gates",
            default=",".join(DEFAULT_FAIL_ON),
            metavar="FIGURES",
            validate=parse_fail_on,
            form="list",
            example=("-fail-on", "throughput"),
        ),
        Option(
            "allow-different",
            "switch",
            "diff runs whose settings differ (listed first)",
            "gates",
            default=False,
            gnu=True,
            example=("--allow-different",),
        ),
        Option(
            "json",
            "path",
            "the diff as JSON",
            "outputs",
            metavar="FILE",
            dest="json_path",
            place="out",
            example=("-json", "diff.json"),
        ),
        Option(
            "report",
            "path",
            "the diff as one self-contained HTML page: both runs, and what moved beyond the noise",
            "outputs",
            metavar="FILE.html",
            dest="report_path",
            place="out",
            example=("-report", "diff.html"),
        ),
        *SCENARIO,
    ),
)
COMMANDS = (RUN, AUDIT, DIFF)
