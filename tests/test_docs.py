"""The docs stay true: every `pgmq-sim ...` command in README.md and docs/ passes the command line's
own flag parsing and every check a run makes before it starts a server (nothing runs), every file a
page cites is in the repository, every link and anchor resolves, the site's navigation lists every
page, and the README keeps its shape (its test command is .ci/run's, its flag table is the CLI's).

A command that reads a file an earlier command of the same block writes (`-baseline base.json`,
`pgmq-sim diff base.json new.json`) gets a stand-in holding the earlier command's real settings:
what is checked is the refusal a user would meet (settings that differ), not figures a unit test
cannot measure.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
import yaml
from conftest import REPO

from pgmq_sim.cli.audit_command import audit_command, checked_audit
from pgmq_sim.cli.command import check_flags, command
from pgmq_sim.cli.diff_command import diff_command, diff_inputs
from pgmq_sim.cli.flag_table import BEGIN, END, flag_tables
from pgmq_sim.cli.flags import check_flags as check_command_flags
from pgmq_sim.cli.options import AUDIT, DIFF, RUN
from pgmq_sim.cli.plan import plan_run
from pgmq_sim.cli.scenario import scenario_of
from pgmq_sim.errors import SimError

pytestmark = pytest.mark.unit

README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))  # docs/benchmarks.md is bench/README.md, linked
DOCS = [README, *PAGES]
PACKAGE = REPO / "src" / "pgmq_sim"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"\.\.\.|\[|\||\b[A-Z][A-Z0-9_]*\b(?!=)|\b[A-Z]+\.json\b")
PATH = re.compile(r"\.?[\w-]+(?:[./][\w-]+)*/?(?:::\w+)?")
TOP = {"src", "tests", "bench", "tools", "docs", ".ci", ".github"}  # the repository's folders
SOURCES = {"py", "sql", "md", "toml", "yml", "yaml"}  # a file of these kinds is the repository's


@dataclass(frozen=True)
class Command:
    doc: Path
    line: int
    block: int  # the sh block it is in (a later command may read what an earlier one wrote); -1 inline
    args: tuple[str, ...]  # after `pgmq-sim`

    def __str__(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}: pgmq-sim {shlex.join(self.args)}"


def prose(text: str) -> str:
    """The text outside fenced blocks (their lines blanked, so line numbers hold)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def commands_in(doc: Path) -> Iterator[Command]:
    """Every pgmq-sim command of a sh block (one a line, `\\` continues one, `&&` chains), and every
    inline `pgmq-sim -...` span that holds no placeholder."""
    text = doc.read_text(encoding="utf-8")
    for number, block in enumerate(FENCE.finditer(text)):
        if block.group(1) not in ("sh", "bash", "console"):
            continue
        first = line_of(text, block.start(2))
        for offset, line in logical_lines(block.group(2)):
            words = shlex.split(line, comments=True)
            while words:
                chained = words.index("&&") if "&&" in words else len(words)
                head, words = words[:chained], words[chained + 1 :]
                if head and (head[0] == "pgmq-sim" or head[0].endswith("/pgmq-sim")):
                    yield Command(doc, first + offset, number, tuple(head[1:]))
    outside = prose(text)
    for span in SPAN.finditer(outside):
        body = span.group(1)
        if body.startswith("pgmq-sim -") and not PLACEHOLDER.search(body):
            yield Command(doc, line_of(outside, span.start()), -1, tuple(shlex.split(body)[1:]))


def logical_lines(block: str) -> Iterator[tuple[int, str]]:
    """A shell block's commands with the offset of their first line: `\\` at a line's end continues it."""
    start, parts = 0, []
    for offset, line in enumerate(block.split("\n")):
        if not parts:
            start = offset
        if line.endswith("\\"):
            parts.append(line[:-1])
            continue
        yield start, " ".join([*parts, line])
        parts = []


def all_commands() -> list[Command]:
    return [c for doc in DOCS for c in commands_in(doc)]


def stand_in(path: Path, settings: dict[str, object]) -> None:
    path.write_text(json.dumps({"settings": settings, "server": None, "throughput_per_s": None}))


def check(cmd: Command, workdir: Path, written: dict[str, dict[str, object]]) -> None:
    """Parse and check one command as the CLI would, in a checkout's copy; record the -json it writes."""
    args = list(cmd.args)
    subcommand = args[0] if args and args[0] in ("audit", "diff") else None
    reads = [args[args.index("-baseline") + 1]] if "-baseline" in args else []
    if subcommand == "diff":
        reads = [a for a in args[1:] if not a.startswith("-")][:2]
    for name in reads:
        if name in written:
            stand_in(workdir / name, written[name])
    if subcommand == "audit":
        check_command_flags(audit_command, args[1:])
        with audit_command.make_context("pgmq-sim audit", args[1:]) as ctx:
            checked_audit(scenario_of(AUDIT, ctx))
        return
    if subcommand == "diff":
        check_command_flags(diff_command, args[1:])
        with diff_command.make_context("pgmq-sim diff", args[1:]) as ctx:
            diff_inputs(scenario_of(DIFF, ctx))
        return
    check_flags(args)
    try:
        ctx = command.make_context("pgmq-sim", args)
    except click.exceptions.Exit as done:  # --help, -version
        assert done.exit_code == 0
        return
    with ctx:
        plan = plan_run(scenario_of(RUN, ctx))
    if plan is not None and plan.settings.json_path is not None and str(plan.settings.json_path) != "-":
        written[str(plan.settings.json_path)] = plan.settings.as_json()


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory like the top of a clone, for what a command reads from there (the seed's two SQL
    files, the example designs); copies, so nothing the test writes can reach the repository. The
    DSN variable unset."""
    for name in ("schema.sql", "next_msg.sql"):
        (tmp_path / name).write_bytes((REPO / name).read_bytes())
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PGMQ_SIM_DSN", raising=False)
    return tmp_path


def test_every_documented_command_passes_the_checks_a_run_makes_before_it_starts(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = all_commands()
    assert len({c.doc for c in commands}) >= 8 and len(commands) >= 50, "the commands were not found"
    written: dict[str, dict[str, object]] = {}
    block: tuple[Path, int] | None = None
    failures = []
    for cmd in commands:
        if (cmd.doc, cmd.block) != block:  # what a block wrote is not there for the next one
            for name in written:
                (checkout / name).unlink(missing_ok=True)
            written, block = {}, (cmd.doc, cmd.block)
        try:
            check(cmd, checkout, written)
        except (SimError, click.ClickException) as refused:
            message = refused.format_message() if isinstance(refused, click.ClickException) else refused
            failures.append(f"{cmd}\n    -> {message}")
    capsys.readouterr()  # --help's text
    assert not failures, "documented commands the tool refuses:\n" + "\n".join(failures)


def test_every_toml_block_of_the_docs_is_a_scenario_the_tool_accepts(checkout: Path) -> None:
    """A page's TOML block is a scenario file, of the run unless its first line names `pgmq-sim
    audit` or `pgmq-sim diff`: read by -config and checked as a run would check it."""
    blocks = [
        (doc, line_of(doc.read_text(encoding="utf-8"), block.start(2)), block.group(2))
        for doc in DOCS
        for block in FENCE.finditer(doc.read_text(encoding="utf-8"))
        if block.group(1) == "toml"
    ]
    assert len(blocks) >= 4, "the scenario blocks were not found"
    stand_in(checkout / "base.json", {"workers": 12})
    stand_in(checkout / "new.json", {"workers": 12})
    failures = []
    for doc, line, text in blocks:
        (checkout / "block.toml").write_text(text, encoding="utf-8")
        first = text.splitlines()[0]
        sub = next((name for name in ("audit", "diff") if f"pgmq-sim {name}" in first), None)
        args = (
            *([sub] if sub else []),
            "-config",
            "block.toml",
            *(["-dsn", "postgres://u@h/d"] if sub == "audit" else []),
        )
        try:
            check(Command(doc, line, -1, args), checkout, {})
        except (SimError, click.ClickException) as refused:
            message = refused.format_message() if isinstance(refused, click.ClickException) else refused
            failures.append(f"{doc.relative_to(REPO)}:{line}: {message}")
    assert not failures, "scenario blocks the tool refuses:\n" + "\n".join(failures)


@pytest.mark.parametrize(
    "args,refusal",
    [
        ("-fill-db 10 -frobnicate", "unknown flag -frobnicate"),
        ("-fill-db ten", "'ten' is not a valid integer"),
        ("-sweep rate=auto -duration 60", "-sweep sets its own time"),
        ("-sweep rate=auto -step 2", "needs steps of at least 3"),
        ("-compare seed,indexed -next-msg next_msg.sql", "-next-msg would replace them all"),
        ("--processes 20 -workers 12", "--processes 20 is more than -workers 12"),
        ("-fill-db 10 -json new.json -baseline base.json", "ran other settings"),
        ("diff base.json new.json", "the runs' settings differ"),
        ("-fill-db 10 -baseline nothing-wrote-it.json", "cannot read nothing-wrote-it.json"),
        ("-fill-db 10 -schema nope.sql", "nope.sql does not exist"),
        ("audit -reconnect-timeout 5", "needs -dsn"),
    ],
)
def test_the_command_check_refuses_what_the_tool_refuses(checkout: Path, args: str, refusal: str) -> None:
    """The check above is only as good as these: each documented-looking command fails it."""
    written: dict[str, dict[str, object]] = {"base.json": {"workers": 99}, "new.json": {"workers": 12}}
    with pytest.raises((SimError, click.ClickException)) as refused:
        check(Command(README, 1, 0, tuple(shlex.split(args))), checkout, written)
    error = refused.value
    message = error.format_message() if isinstance(error, click.ClickException) else str(error)
    assert refusal in message, message


def test_the_docs_show_the_commands_people_run() -> None:
    """The extraction finds what the pages show: a chained command, a continued one, inline ones."""
    commands = all_commands()
    found = {(c.doc.name, c.args[:2]) for c in commands}
    assert ("README.md", ("-fill-db", "10000")) in found  # after `&&` in the first of the two commands
    assert any(c.doc.name == "ci.md" and "-junit" in c.args for c in commands)  # continued with `\`
    assert ("report.md", ("-fill-db", "3000")) in found  # inline, in prose
    assert ("processes.md", ("--worker", "--master-host")) in found
    assert ("audit.md", ("audit", "-dsn")) in found


def repository_file(cited: str, doc: Path) -> Path | None:
    """Where a cited path is: the repository's top, the page's own folder, the package, its SQL."""
    path = cited.split("::")[0].rstrip("/")
    for base in (REPO, doc.resolve().parent, PACKAGE, PACKAGE / "sql"):
        if (base / path).exists():
            return base / path
    designs = sorted((PACKAGE / "designs").glob(f"*/{path}")) + sorted((REPO / "examples").glob(f"*/{path}"))
    return designs[0] if designs else None


def cited_paths(doc: Path) -> Iterator[tuple[int, str]]:
    """Code spans that name a file or folder of the repository: a path under one of its top folders,
    a folder (`cli/`), or a source file's name (`sqlfiles.py`, `claim.sql`, `tests/x.py::test_y`);
    not a URL, a DSN, a module's attribute, a placeholder or a file a run writes."""
    text = prose(doc.read_text(encoding="utf-8"))
    for span in SPAN.finditer(text):
        body = span.group(1).strip()
        if not PATH.fullmatch(body) or PLACEHOLDER.search(body):
            continue
        name = body.split("::")[0]
        top = name.split("/")[0]
        if top in TOP or (name.endswith("/") and "." not in name) or Path(name).suffix[1:] in SOURCES:
            yield line_of(text, span.start()), body


# paths a page names that are not in the repository, and why
ELSEWHERE = {
    "data/server.log": "inside the embedded server's throwaway directory",
    "s/": "the embedded server's socket folder",
    "data/": "the embedded server's cluster",
    "site/": "the site mkdocs builds (git-ignored)",
    "tests/artifacts/reports/": "the browser test's pages and screenshots (git-ignored)",
}


def test_every_file_a_page_cites_is_in_the_repository() -> None:
    missing = []
    checked = 0
    for doc in DOCS:
        for line, body in cited_paths(doc):
            if body in ELSEWHERE:
                continue
            checked += 1
            found = repository_file(body, doc)
            where = f"{doc.relative_to(REPO)}:{line}: {body}"
            if found is None:
                missing.append(where)
            elif "::" in body:  # a test named by its node id
                test = body.split("::")[1]
                if not re.search(rf"^def {re.escape(test)}\(", found.read_text(encoding="utf-8"), re.M):
                    missing.append(f"{where} (no such test)")
    tests = "".join(path.read_text(encoding="utf-8") for path in (REPO / "tests").glob("test_*.py"))
    for doc in DOCS:  # a test named alone
        text = prose(doc.read_text(encoding="utf-8"))
        for span in re.finditer(r"`(test_\w+)`", text):
            checked += 1
            if not re.search(rf"^def {span.group(1)}\(", tests, re.M):
                missing.append(
                    f"{doc.relative_to(REPO)}:{line_of(text, span.start())}: {span.group(1)} (no such test)"
                )
    assert checked >= 40, "the cited paths were not found"
    assert not missing, "cited but not in the repository:\n" + "\n".join(missing)


def github_slug(heading: str) -> str:
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def site_slug(heading: str) -> str:
    """Python-Markdown's toc slug, which MkDocs checks anchors against."""
    text = unicodedata.normalize("NFKD", re.sub(r"[`*]", "", heading)).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def headings(doc: Path) -> list[str]:
    return re.findall(r"^#{1,6} (.+)$", prose(doc.read_text(encoding="utf-8")), re.M)


def test_links_and_anchors_resolve_on_github_and_on_the_site() -> None:
    """MkDocs checks the pages' links (strict build); README.md is outside the site, so this checks it,
    and every heading's anchor is the same on GitHub as on the site, so one link serves both."""
    broken = []
    for doc in DOCS:
        for heading in headings(doc):
            if github_slug(heading) != site_slug(heading):
                broken.append(f"{doc.relative_to(REPO)}: heading '{heading}' has two anchors")
        text = prose(doc.read_text(encoding="utf-8"))
        for link in LINK.finditer(text):
            target = link.group(1)
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            page = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(REPO)}:{line_of(text, link.start())}: {target}"
            if not page.exists():
                broken.append(f"{where}: no such file")
            elif anchor and anchor not in {github_slug(h) for h in headings(page)}:
                broken.append(f"{where}: no such anchor")
    assert not broken, "\n".join(broken)


def test_the_site_lists_every_page() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = [next(iter(item.values())) if isinstance(item, dict) else item for item in config["nav"]]
    assert sorted(listed) == sorted(p.name for p in PAGES) and len(listed) == len(set(listed))
    assert config["strict"] is True and config["validation"]["omitted_files"] == "warn"
    assert (REPO / "docs" / "benchmarks.md").resolve() == REPO / "bench" / "README.md"


def test_the_readme_keeps_its_shape() -> None:
    """At most 450 lines; its test command is exactly .ci/run's; its flag tables are the options'
    (tools/flag_table.py writes them), and so every flag of the three commands, and no other."""
    text = README.read_text(encoding="utf-8")
    assert text.count("\n") <= 450
    blocks = [m.group(2).strip() for m in FENCE.finditer(text) if m.group(1) == "sh"]
    ci_command = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert blocks[1] == ci_command, "README's test command and .ci/run differ"
    tables = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert tables == flag_tables(), (
        "README's flag tables are not the options': run python tools/flag_table.py"
    )
    in_tables = {
        word.lstrip("-")
        for row in tables.splitlines()
        if row.startswith("| `")
        for span in SPAN.findall(row.split(" | ")[0])
        for word in span.split()
        if word.startswith("-")
    }
    flags = {
        o.lstrip("-")
        for c in (command, audit_command, diff_command)
        for p in c.params
        for o in p.opts
        if o[0] == "-"
    }
    assert in_tables == flags - {"h", "help"}, (sorted(flags - in_tables), sorted(in_tables - flags))
