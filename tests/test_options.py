"""One definition per option (cli/options): the flags, --help, the docs' tables, the settings and the
scenario file's keys all agree with it; a scenario file gives what the flags give; a bad file is one
line and exit 2; values parsed (-work-ms, -compare, the modes) or refused by range. No server: every
check here is one a run makes before it starts one."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import builders
import click
import pytest
from conftest import REPO

from pgmq_sim.cli.audit_command import audit_command, checked_audit
from pgmq_sim.cli.command import command
from pgmq_sim.cli.command import main as cli_main
from pgmq_sim.cli.diff_command import diff_command, diff_inputs
from pgmq_sim.cli.flag_table import flag_tables
from pgmq_sim.cli.flags import check_flags, command_of
from pgmq_sim.cli.option import SECTIONS, CommandOptions, Option
from pgmq_sim.cli.options import AUDIT, DIFF, RUN
from pgmq_sim.cli.plan import parse_compare, plan_run, settings_of
from pgmq_sim.cli.scenario import Scenario, scenario_of, scenario_record, scenario_toml
from pgmq_sim.errors import UsageError
from pgmq_sim.launch import wants_locust
from pgmq_sim.model.kinds import Outcome, TxMode, WakeupMode
from pgmq_sim.settings import Settings, WorkTime

pytestmark = pytest.mark.unit

COMMANDS: dict[str, tuple[CommandOptions, click.Command]] = {
    "pgmq-sim": (RUN, command),
    "pgmq-sim audit": (AUDIT, audit_command),
    "pgmq-sim diff": (DIFF, diff_command),
}
RUN_ONLY = ("-seed", "1")  # a drawn seed would differ between two readings of one scenario


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory like a clone's top: the seed's SQL and the examples (linked: nothing here writes
    to them); no DSN variable."""
    for name in ("schema.sql", "next_msg.sql", "examples"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PGMQ_SIM_DSN", raising=False)
    return tmp_path


def parsed(spec: CommandOptions, args: list[str]) -> Scenario:
    """The scenario a command line gives, as the command reads it (its flags and its -config file)."""
    cmd = COMMANDS[spec.command][1]
    check_flags(cmd, args)  # type: ignore[arg-type]
    with cmd.make_context(spec.command, list(args)) as ctx:
        return scenario_of(spec, ctx)


def outcome(scenario: Scenario) -> Any:
    """What the command makes of it before touching a server: the run's settings, the audit's DSN,
    the diff's inputs."""
    if scenario.spec is AUDIT:
        return checked_audit(scenario)
    if scenario.spec is DIFF:
        return diff_inputs(scenario)
    plan = plan_run(scenario)
    return None if plan is None else plan.settings


def stand_in(path: Path, settings: dict[str, Any]) -> None:
    path.write_text(json.dumps({"settings": settings, "server": None, "throughput_per_s": None}))


# -- the flags, --help, the settings: all from the options --------------------------------------


@pytest.mark.parametrize("name", COMMANDS)
def test_the_flags_are_the_options_both_spellings_with_their_defaults(name: str) -> None:
    spec, cmd = COMMANDS[name]
    params = {p.name: p for p in cmd.params}
    for option in spec:
        if option.kind == "version":
            assert set(params.pop("version").opts) == {"-version", "--version"}
            continue
        param = params.pop(option.param)
        if option.argument:
            assert param.opts == [option.param] and not param.required
            continue
        short = {f"-{option.short}"} if option.short else set()
        assert set(param.opts) == {f"-{option.name}", f"--{option.name}"} | short, option.name
        assert param.default == option.default, option.name
        assert isinstance(param, click.Option) and param.is_flag == (option.kind == "switch")
    assert not params, f"flags that are no option: {sorted(params)}"


def test_help_lists_every_option_under_its_section() -> None:
    with command.make_context("pgmq-sim", []) as ctx:
        text = command.get_help(ctx)
    section = None
    seen: dict[str, str] = {}
    titles = {f"{title}:": key for key, title in SECTIONS.items()}
    for line in text.splitlines():
        if line in titles:
            section = titles[line]
        elif line.startswith("  -") and section is not None:
            seen[line.split(",")[0].strip()] = section
    for option in RUN:
        if option.kind != "version":
            assert seen.get(f"-{option.short or option.name}") == option.section, option.name
    assert list(dict.fromkeys(seen.values())) == [k for k in SECTIONS if k in seen.values()]


def test_every_setting_is_filled_by_an_option() -> None:
    """Settings is built from the options: each field but the profile (read from -rate-profile) is
    one option's, and none is filled by hand."""
    fields = [f.name for f in dataclasses.fields(Settings) if f.init]
    from_options = [field for o in RUN for field in o.fields]
    assert sorted(from_options) == sorted(fields)
    assert not [
        f.name for f in dataclasses.fields(Settings) if f.init and f.default is not dataclasses.MISSING
    ]


@dataclass(frozen=True, kw_only=True)
class WithFlavour(Settings):
    flavour: str  # the throwaway option's field: what the run would read


FLAVOUR = Option(
    "flavour",
    "text",
    "the ice cream's flavour",
    "workload",
    default="vanilla",
    metavar="NAME",
    choices=("vanilla", "pistachio"),
    example=("-flavour", "pistachio"),
)


def test_a_new_option_is_one_declaration(workdir: Path) -> None:
    """A throwaway option, declared once, is a flag (both spellings, its default, its choices checked),
    a line of --help in its section, a scenario file's key (-print-config writes it, -config reads it),
    a setting (in the JSON's settings and its scenario) and a row of the docs' flag table."""
    spec = CommandOptions(RUN.command, (*RUN.options, FLAVOUR))  # the run's options and the throwaway
    cmd = command_of(spec)(lambda **_: None)

    def scenario(args: list[str]) -> Scenario:
        check_flags(cmd, args)
        with cmd.make_context("pgmq-sim", args) as ctx:
            return scenario_of(spec, ctx)

    param = next(p for p in cmd.params if p.name == "flavour")
    assert set(param.opts) == {"-flavour", "--flavour"} and param.default == "vanilla"
    with cmd.make_context("pgmq-sim", []) as ctx:
        helped = cmd.get_help(ctx)
    workload = helped.index("The workload:")
    assert workload < helped.index("-flavour NAME") < helped.index("Time, capacity and sweeps:")
    assert "The ice cream's flavour. [default: vanilla]" in " ".join(helped.split())
    with pytest.raises(UsageError, match=r"unknown -flavour 'mint'; use one of: vanilla, pistachio"):
        scenario(["-flavour", "mint"])

    given = scenario(["-flavour", "pistachio", "-workers", "4"])
    (workdir / "flavour.toml").write_text(scenario_toml(given))
    assert 'flavour = "pistachio"' in (workdir / "flavour.toml").read_text()
    from_file = scenario(["-config", "flavour.toml"])
    assert from_file.sources["flavour"] == "file" and from_file.options["flavour"] == "pistachio"
    (workdir / "bad.toml").write_text('flavour = "mint"\n')
    with pytest.raises(UsageError, match=r"bad\.toml:1: flavour = 'mint': use one of: vanilla, pistachio"):
        scenario(["-config", "bad.toml"])

    settings = settings_of(from_file.options, spec, WithFlavour)
    assert isinstance(settings, WithFlavour) and settings.flavour == "pistachio" and settings.workers == 4
    assert settings.as_json()["flavour"] == "pistachio"
    assert settings_of(scenario([]).options, spec, WithFlavour).as_json()["flavour"] == "vanilla"
    record = scenario_record(scenario([]), {}, None)
    assert record["scenario"]["flavour"] == "vanilla" and record["scenario_sources"]["flavour"] == "default"

    assert "| `-flavour NAME` | `vanilla` | the ice cream's flavour |" in flag_tables((spec,))


def test_every_option_is_defined_once_with_an_example_that_sets_it() -> None:
    for spec in (RUN, AUDIT, DIFF):
        names = [o.name for o in spec]
        assert len(names) == len(set(names)), spec.command
        for option in spec.keys:
            assert option.section in SECTIONS, option.name
            assert option.argument or {f"-{option.name}", f"--{option.name}"} & set(option.example), (
                option.name
            )


# -- a scenario file gives what the flags give ----------------------------------------------------


KEYS = [(spec, option) for spec in (RUN, AUDIT, DIFF) for option in spec.keys if not option.argument]


@pytest.mark.parametrize("spec,option", KEYS, ids=[f"{s.command[9:] or 'run'}:{o.name}" for s, o in KEYS])
def test_each_key_in_a_scenario_file_gives_what_its_flag_gives(
    workdir: Path, spec: CommandOptions, option: Option
) -> None:
    """Generated over every option: its example's flags, and the same as a file (-print-config's),
    read back by -config, give the same options and the same settings; the key came from the file."""
    args = list(option.example)
    if spec is RUN and "--worker" not in args and "-seed" not in args:
        args += RUN_ONLY
        stand_in(workdir / "base.json", plan_run(parsed(RUN, list(RUN_ONLY))).settings.as_json())  # type: ignore[union-attr]
    if spec is DIFF:
        for name in ("base.json", "new.json"):
            stand_in(workdir / name, {"workers": 12})
        args = ["base.json", "new.json", *args]
    by_flags = parsed(spec, args)
    assert by_flags.sources[option.name] == "flag"
    (workdir / "scenario.toml").write_text(scenario_toml(by_flags))
    by_file = parsed(spec, ["-config", "scenario.toml"])
    assert by_file.sources[option.name] == "file", (workdir / "scenario.toml").read_text()
    assert {**by_file.options, "config": None} == by_flags.options
    assert outcome(by_file) == outcome(by_flags)
    if spec is RUN and option.field is not None:  # the option does something: not the default
        assert outcome(by_flags) != outcome(parsed(spec, list(RUN_ONLY)))


def test_structured_keys_are_tables_and_arrays(workdir: Path) -> None:
    """The forms docs/scenarios.md shows, written by hand: checks and chaos as arrays, the compare's
    cells as [[compare]] tables, a sweep as the [sweep] table with its own keys."""
    (workdir / "checks.toml").write_text(
        'check = ["e2e-p99<250", "lost==0"]\nchaos = ["kill-worker@1s", "kill-connection/5s"]\nseed = 1\n'
    )
    flags = ["-check", "e2e-p99<250,lost==0", "-chaos", "kill-worker@1s,kill-connection/5s", "-seed", "1"]
    assert outcome(parsed(RUN, ["-config", "checks.toml"])) == outcome(parsed(RUN, flags))
    (workdir / "cells.toml").write_text(
        'fill-db = 500\n[[compare]]\nqueue = "seed"\n'
        '[[compare]]\nqueue = "examples/jobs"\nwakeup = "notify"\n'
    )
    cells = parsed(RUN, ["-config", "cells.toml"])
    assert cells.options["compare"] == "seed,examples/jobs/notify"
    (workdir / "sweep.toml").write_text(
        'workers = 12\nwakeup = "notify"\nseed = 1\n[sweep]\nrate = [100, 200, 400]\nstep = 4\n'
        "slo = { e2e-p99 = 250 }\n"
    )
    flags = ["-workers", "12", "-wakeup", "notify", "-seed", "1", "-sweep", "rate=100,200,400", "-step", "4"]
    swept = outcome(parsed(RUN, ["-config", "sweep.toml"]))
    assert swept == outcome(parsed(RUN, [*flags, "-slo", "e2e-p99=250"]))
    assert swept.sweep.values == (100, 200, 400) and swept.slo_p99_ms == 250 and swept.step_s == 4


def test_a_flag_wins_over_the_file_and_the_sources_say_which_is_which(workdir: Path) -> None:
    (workdir / "s.toml").write_text("fill-db = 300\nworkers = 6\n")
    scenario = parsed(RUN, ["-config", "s.toml", "-workers", "9"])
    assert scenario.options["fill_db"] == 300 and scenario.options["workers"] == 9
    assert (scenario.sources["fill-db"], scenario.sources["workers"], scenario.sources["rate"]) == (
        "file",
        "flag",
        "default",
    )


def test_paths_read_are_relative_to_the_file_and_paths_written_to_the_current_directory(
    workdir: Path,
) -> None:
    team = workdir / "team"
    shutil.copytree(REPO / "examples" / "jobs", team / "jobs")
    shutil.copy(REPO / "schema.sql", team / "queue.sql")
    (team / "day.csv").write_text("second,rate\n0,10\n5,20\n")
    (team / "s.toml").write_text(
        'queue = "jobs"\nrate-profile = "day.csv"\njson = "out.json"\nlogfile = "run.log"\n'
        '[[compare]]\nqueue = "jobs"\n[[compare]]\nqueue = "indexed"\n'
    )
    options = parsed(RUN, ["-config", "team/s.toml"]).options
    assert (options["queue"], options["rate_profile"]) == ("team/jobs", "team/day.csv")
    assert options["compare"] == "team/jobs,indexed"  # a built-in's name stays a name
    assert (options["json_path"], options["logfile"]) == (Path("out.json"), "run.log")
    (team / "seed.toml").write_text('schema = "queue.sql"\nnext-msg = "../next_msg.sql"\n')
    options = parsed(RUN, ["-config", "team/seed.toml"]).options
    assert (options["schema"], options["next_msg"]) == (Path("team/queue.sql"), Path("team/../next_msg.sql"))
    assert plan_run(parsed(RUN, ["-config", "team/seed.toml"])) is not None


def test_a_dsn_names_a_variable_and_no_scenario_written_holds_a_password(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_DB", "postgres://app:s3cret@db.example/queue")
    (workdir / "s.toml").write_text('dsn = "$TEAM_DB"\nfill-db = 100\n')
    scenario = parsed(RUN, ["-config", "s.toml"])
    assert scenario.options["dsn"] == "postgres://app:s3cret@db.example/queue"
    written = scenario_toml(scenario)
    assert 'dsn = "$TEAM_DB"' in written and "s3cret" not in written
    by_flag = scenario_toml(parsed(RUN, ["-dsn", "postgres://app:s3cret@db.example/queue"]))
    assert 'dsn = "$PGMQ_SIM_DSN"' in by_flag and "s3cret" not in by_flag
    plain = scenario_toml(parsed(RUN, ["-dsn", "postgres://app@db.example/queue"]))
    assert 'dsn = "postgres://app@db.example/queue"' in plain
    monkeypatch.delenv("TEAM_DB")
    with pytest.raises(UsageError, match=r"^s.toml:1: dsn names \$TEAM_DB, which is not set; export TEAM_DB"):
        parsed(RUN, ["-config", "s.toml"])


# -- a bad file: one line naming the file, the line and the key, exit 2 ------------------------------


@pytest.mark.parametrize(
    "text,needles",
    [
        ("fill-db = 100\nworkerz = 6\n", ["s.toml:2:", "unknown key workerz", "did you mean", "workers"]),
        ('fill-db = 100\nworkers = "six"\n', ["s.toml:2:", 'workers = "six"', "a whole number"]),
        ("\ntypes = 0\n", ["s.toml:2:", "types = 0 must be between 1 and 1000"]),
        ("rate = -5\n", ["s.toml:1:", "rate = -5 must be 0 or more"]),
        ("fill-db = 100\nworkers = 6\nfill-db = 200\n", ["s.toml:3:", "fill-db is given twice"]),
        ('[sweep]\nrate = "auto"\n[sweep]\nstep = 5\n', ["s.toml:3:", "[sweep] is given twice"]),
        ("fill-db = 100\nworkers = six\n", ["s.toml:2:", "not TOML (Invalid value)"]),
        ('[sweep]\nrate = "auto"\nstep = 0\n', ["s.toml:3:", "step = 0 must be more than 0"]),
        ("step = 5\n", ["s.toml:1:", "step goes in the [sweep] table"]),
        (
            '[[compare]]\nqueue = "seed"\n[[compare]]\nqueue = "fifo"\nwakeup = "often"\n',
            ["s.toml:5:", "wakeup"],
        ),
        ('check = "lost==0"\n', ["s.toml:1:", "check", "an array of strings"]),
        ('work-ms = "ten"\n', ["s.toml:1:", "work-ms", "is not a range"]),
    ],
)
def test_a_bad_scenario_file_is_one_line_and_exit_2(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    needles: list[str],
) -> None:
    (workdir / "s.toml").write_text(text)
    line = one_line_error(capsys, monkeypatch, ["-config", "s.toml"])
    for needle in needles:
        assert needle in line, (needle, line)


def one_line_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> str:
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["pgmq-sim", *args])
    with pytest.raises(SystemExit) as done:
        cli_main()
    out, err = capsys.readouterr()
    assert done.value.code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgmq-sim: error: "), err
    assert not out
    return lines[0]


def test_a_missing_file_one_not_utf8_and_a_json_without_a_scenario_are_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "nope.toml: no such file" in one_line_error(capsys, monkeypatch, ["-config", "nope.toml"])
    (workdir / "bin.toml").write_bytes(b"\xff\xfe")
    assert "not UTF-8" in one_line_error(capsys, monkeypatch, ["-config", "bin.toml"])
    (workdir / "old.json").write_text(json.dumps({"settings": {}, "throughput_per_s": 1}))
    assert "old.json: no scenario in it" in one_line_error(capsys, monkeypatch, ["-config", "old.json"])
    (workdir / "a.toml").write_text("json-path = 1\n")
    line = one_line_error(capsys, monkeypatch, ["audit", "-config", "a.toml"])
    assert "a.toml:1: unknown key json-path" in line and "pgmq-sim audit --help" in line
    (workdir / "d.toml").write_text('fail-on = ["no-such-figure"]\n')
    assert "d.toml:1: fail-on" in one_line_error(capsys, monkeypatch, ["diff", "-config", "d.toml"])
    assert "-dsn is given twice" in one_line_error(capsys, monkeypatch, ["audit", "-dsn", "a", "--dsn", "b"])


# -- the examples, the runners --------------------------------------------------------------------


@pytest.mark.parametrize("example", sorted(p.name for p in (REPO / "examples").glob("*.toml")))
def test_each_example_scenario_is_valid_settings(workdir: Path, example: str) -> None:
    plan = plan_run(parsed(RUN, ["-config", f"examples/{example}"]))
    assert plan is not None and plan.settings.workers == 12
    assert len(list((REPO / "examples").glob("*.toml"))) >= 5


def test_a_scenario_that_names_a_runner_imports_locust_first(workdir: Path) -> None:
    (workdir / "many.toml").write_text("processes = 2\n")
    (workdir / "one.toml").write_text("workers = 2\n")
    assert wants_locust(["-config", "many.toml"]) and wants_locust(["--config=many.toml"])
    assert not wants_locust(["-config", "one.toml"]) and not wants_locust(["-config", "missing.toml"])
    assert wants_locust(["--processes", "2"])


@pytest.mark.parametrize(
    "text,expected", [("1-10", (1, 10)), ("0", (0, 0)), (" 2.5 - 3 ", (2.5, 3)), ("7", (7, 7))]
)
def test_work_time_parses(text: str, expected: tuple[float, float]) -> None:
    work = WorkTime.parse(text)
    assert (work.min_ms, work.max_ms) == expected


@pytest.mark.parametrize("text", ["ten", "9-3", "-1", "1-", ""])
def test_work_time_refuses(text: str) -> None:
    with pytest.raises(UsageError):
        WorkTime.parse(text)


def test_compare_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no -tx: each cell runs its design's own (None), which is single for the seed's table
    assert parse_compare("seed, indexed/notify") == [
        ("seed", "poll", None),
        ("indexed", "notify", None),
    ]
    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(tmp_path)
    assert parse_compare("./mine/notify,./mine") == [("./mine", "notify", None), ("./mine", "poll", None)]
    assert parse_compare("indexed/split,fifo/notify/split", "single") == [
        ("indexed", "poll", "split"),
        ("fifo", "notify", "split"),
    ]
    assert ("fifo", "notify", "split") in parse_compare("all", "split")
    for bad in ("nope", "seed/smoke", " , ", "./missing/notify"):
        with pytest.raises(UsageError):
            parse_compare(bad)


def test_flags_named_as_written_and_given_once() -> None:
    from pgmq_sim.cli.command import check_flags  # the run command's, not cli.flags's

    check_flags(["-fill-db", "10", "--workers=3", "-logfile", "-", "-work-ms", "0"])
    with pytest.raises(UsageError, match="unknown flag -frobnicate"):
        check_flags(["-frobnicate"])
    with pytest.raises(UsageError, match="given twice"):
        check_flags(["-fill-db", "50", "--fill-db=300"])


def test_options_refuse_values_the_table_cannot_hold() -> None:
    """The ranges are the options' (cli/options): a flag's and a file's value are both checked."""
    orders, fill_db = RUN.by_name("orders"), RUN.by_name("fill-db")
    assert orders is not None and fill_db is not None
    with pytest.raises(UsageError, match=r"^-orders 3000000000 must be between 1 and 2147483647 \(order_id"):
        orders.checked(3_000_000_000)
    with pytest.raises(UsageError, match=r"^x.toml:3: fill-db = 2147483648 must be between 1 and .*integer"):
        fill_db.checked(2**31, "x.toml:3: ")


def settings(**changes: object) -> Settings:
    """Three workers without work time, ten messages."""
    return builders.settings(
        **({"fill_db": 10, "workers": 3, "work": WorkTime(0, 0), "seed": None} | changes)
    )


def test_modes_arrive_as_text_and_are_kept_as_names() -> None:
    s = settings(tx="split", wakeup="notify")
    assert s.tx is TxMode.SPLIT and s.wakeup is WakeupMode.NOTIFY
    assert s.as_json()["tx"] == "split" and type(s.as_json()["tx"]) is str
    with pytest.raises(UsageError, match="unknown -tx 'twice'; use one of: single, split"):
        settings(tx="twice")
    assert [o.exit_code for o in Outcome] == [0, 0, 1, 3, 3, 3]
