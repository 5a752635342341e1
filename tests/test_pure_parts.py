"""Pure parts of the run, each judged without a server: the audit's verdict on counts, the stall
diagnosis on facts, counters that add up field by field, settings' closed sets of names, and the
import graph's rules."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import builders
import pytest
from conftest import REPO

from pgmq_sim.errors import UsageError
from pgmq_sim.model.events import Fault
from pgmq_sim.model.facts import AuditCounts, LockBlocker, StallFacts, lock_blocker
from pgmq_sim.model.identity import Whose, whose
from pgmq_sim.model.kinds import Outcome, TxMode, WakeupMode
from pgmq_sim.result.audit import AuditVerdict
from pgmq_sim.result.stats import SecondSample, Timeline, WorkerCounters, WorkerStats
from pgmq_sim.result.waits import BlockerSeen
from pgmq_sim.settings import Settings, WorkTime
from pgmq_sim.verdicts.audit import judge_audit
from pgmq_sim.verdicts.diagnose import explain_stall
from pgmq_sim.verdicts.outages import fault_effects

pytestmark = pytest.mark.unit

CLEAN = AuditCounts(100, 0, 0, 0, (), (), (), 0)


def verdict(counts: AuditCounts = CLEAN, *, ordered: bool = True, complete: bool = True) -> AuditVerdict:
    return judge_audit(counts, expected=100, ordered=ordered, complete=complete)


def test_verdict_passes_a_clean_run_and_keeps_every_count() -> None:
    v = verdict()
    assert v.passed and v.problems == ()
    doc = v.as_json()
    assert doc["verdict"] == "pass" and doc["expected"] == 100 and doc["processed"] == 100
    assert doc["order_checked"] is True and doc["complete"] is True
    assert set(doc) >= {f.name for f in dataclasses.fields(AuditCounts)}


@pytest.mark.parametrize(
    "change,words",
    [
        ({"duplicates": 1, "duplicate_ids": (7,)}, "1 duplicate(s), e.g. msg_id 7"),
        ({"missing": 2, "missing_ids": (3, 4)}, "2 missing, e.g. msg_id 3, 4"),
        ({"left_behind": 5}, "5 left behind"),
        ({"order_violations": 1, "order_violation_ids": (9,)}, "1 order violation(s), e.g. msg_id 9"),
    ],
)
def test_each_kind_of_problem_fails_the_verdict(change: dict[str, object], words: str) -> None:
    v = verdict(dataclasses.replace(CLEAN, **change))  # type: ignore[arg-type]
    assert not v.passed and v.verdict == "fail"
    assert words in "; ".join(v.problems)


def test_a_partial_run_may_leave_messages_and_an_unordered_one_may_reorder() -> None:
    assert verdict(dataclasses.replace(CLEAN, left_behind=5), complete=False).passed
    reordered = dataclasses.replace(CLEAN, order_violations=3, order_violation_ids=(1, 2, 3))
    assert verdict(reordered, ordered=False).passed
    assert "out-of-order (unordered strategy)" in "; ".join(verdict(reordered, ordered=False).problems)


def facts(**changes: object) -> StallFacts:
    base = StallFacts(blocked=[], pending_by_type=[], heads=[], unlocked_heads=set(), lock_holders=[])
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_stall_names_a_type_nobody_serves() -> None:
    causes = explain_stall(facts(pending_by_type=[("type9", 30)]), {"type1", "type2", "type3"})
    assert causes == ["30 pending message(s) of type 'type9' but no worker serves that type"]


def test_stall_names_the_session_holding_a_head_and_hides_its_literals() -> None:
    holder = (
        4242,
        "report job",
        "idle in transaction",
        61.0,
        "777",
        "update t set pw = 'hunter2'",
        False,
        "10.0.0.9",
    )
    causes = explain_stall(
        facts(heads=[("type1", 3, 12, False, "777")], lock_holders=[holder]), {"type1", "type2", "type3"}
    )
    assert len(causes) == 1
    assert "group (type1, order_id 3): head msg_id 12 is locked by another session, pid 4242" in causes[0]
    assert "report job" in causes[0] and "hunter2" not in causes[0] and "'…'" in causes[0]


def test_stall_names_a_pooler_connection_and_a_session_hidden_from_the_role() -> None:
    ours = (100, "pgmq-sim w1", "active", 1.0, "", "execute claim", True, "127.0.0.1")
    pooled_holder = (
        200,
        "report job",
        "idle in transaction",
        30.0,
        "900",
        "lock table x",
        False,
        "127.0.0.1",
    )
    facts_ = facts(
        heads=[("type1", 1, 5, False, "900")],
        blocked=[LockBlocker(100, "pgmq-sim w1", 300, "", "", False, "relation", "x", "")],
        lock_holders=[ours, pooled_holder],
    )
    causes = explain_stall(facts_, {"type1", "type2", "type3"}, pooled=True)
    assert "its state and query are hidden from this role" in causes[0] and "pid 300" in causes[0]
    assert "a server connection of the pooler at 127.0.0.1, last serving report job" in causes[1]
    assert "pooler" not in " ".join(explain_stall(facts_, {"type1", "type2", "type3"}, pooled=False))


def test_advisory_locks_are_transaction_level_only() -> None:
    """A transaction pooler hands the server connection to another client at every commit: a
    session-level advisory lock would stay with the connection, not with the worker."""
    root = REPO / "src" / "pgmq_sim"
    texts = {str(path.relative_to(root)): path.read_text() for path in root.rglob("*.sql")}
    session_level = re.compile(r"pg_(try_)?advisory_(lock|unlock)(_shared)?\s*\(")
    assert [name for name, text in texts.items() if session_level.search(text)] == []
    for name in ("designs/advisory/claim.sql", "designs/advisory/claim_split.sql"):
        assert "pg_try_advisory_xact_lock(" in texts[name], name


def test_stall_names_a_time_tie_and_a_head_the_claim_never_selects() -> None:
    heads = [("type1", 1, 5, True, "0"), ("type2", 2, 6, False, "0")]
    causes = explain_stall(facts(heads=heads, unlocked_heads={5, 6}), {"type1", "type2", "type3"})
    assert "shares its time_added" in causes[0] and "never selects it" in causes[1]


def test_counters_add_up_field_by_field() -> None:
    a, b = WorkerStats(name="w1", queue_type="type1"), WorkerStats(name="w2", queue_type="type2")
    a.processed, a.busy_s, a.dead_lettered = 3, 0.5, 1
    b.processed, b.busy_s, b.crashes = 4, 0.25, 2
    total = WorkerCounters.total([a, b])
    assert (total.processed, total.busy_s, total.dead_lettered, total.crashes) == (7, 0.75, 1, 2)
    assert total.finished == 8
    assert set(a.counters()) == set(WorkerCounters.names()) and "name" not in a.counters()
    b.set_counters(a.counters())
    assert b.counters() == a.counters() and b.name == "w2"


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


def tool(name: str, *args: Path) -> subprocess.CompletedProcess[str]:
    """One of tools/, run as .ci/run runs it."""
    command = [sys.executable, str(REPO / "tools" / name), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_import_graph_of_the_package_has_no_circle_and_keeps_its_layers() -> None:
    checked = tool("check_imports.py")
    assert checked.returncode == 0, checked.stdout
    assert "no circles" in checked.stdout


def test_the_house_sizes_hold_and_the_check_names_each_one_over(tmp_path: Path) -> None:
    """No module over 500 lines, no class over 250, no function over 100 (tools/check_sizes.py);
    the check names a module, a class and a method over their limits, in every part (verdicts/ too)."""
    checked = tool("check_sizes.py")
    assert checked.returncode == 0, checked.stdout
    package = tmp_path / "pgmq_sim"
    (package / "render").mkdir(parents=True)
    (package / "verdicts").mkdir()
    method = "    def long(self) -> None:\n" + "        pass\n" * 101
    (package / "render" / "big.py").write_text("class Big:\n" + method * 3 + "x = 1\n" * 200)
    (package / "verdicts" / "big.py").write_text("x = 1\n" * 600)
    checked = tool("check_sizes.py", package)
    assert checked.returncode == 1
    assert "render/big.py: 507 lines (a module at most 500)" in checked.stdout
    assert "render/big.py:1: class Big, 307 lines (at most 250)" in checked.stdout
    assert "render/big.py:2: function long, 102 lines (at most 100)" in checked.stdout
    assert "verdicts/big.py: 600 lines (a module at most 500)" in checked.stdout


def test_import_check_catches_a_circle_a_view_a_driver_and_each_forbidden_arrow(tmp_path: Path) -> None:
    package = tmp_path / "pgmq_sim"
    files = {
        "__init__.py": "",
        "errors.py": "",
        "settings.py": "from pgmq_sim import errors\n",  # a leaf: allowed everywhere
        "a.py": "from pgmq_sim import b\n",  # a module in no part
        "b.py": "def f():\n    from pgmq_sim.a import x\n",  # a deferred import is still a circle
        "render/terminal.py": "from pgmq_sim.actors import worker\n",  # a view importing an actor
        "engine/run.py": "import pgmq_sim.render.terminal\n",  # the engine drawing
        "result/run.py": "import psycopg\nfrom pgmq_sim.verdicts import checks\n",  # the data judging
        "verdicts/checks.py": "from pgmq_sim.result import run\n",  # allowed
        "verdicts/limits.py": "from pgmq_sim.db import views\n",  # a verdict reading the database
        "model/traffic.py": "from pgmq_sim.settings import Settings\n",  # the model depending up
        "db/views.py": "",
        "actors/worker.py": "from pgmq_sim.db import views\n",  # allowed
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    for folder in ("render", "engine", "result", "verdicts", "model", "db", "actors"):
        (package / folder / "__init__.py").write_text("")
    checked = tool("check_imports.py", package)
    assert checked.returncode == 1
    out = checked.stdout
    assert "import circle: pgmq_sim.a <-> pgmq_sim.b" in out
    assert "pgmq_sim.a is in no part of docs/architecture.md" in out
    assert "pgmq_sim.engine.run imports the view pgmq_sim.render.terminal" in out
    assert (
        "pgmq_sim.engine.run imports pgmq_sim.render.terminal: the part 'engine' may not import 'render'"
        in out
    )
    assert (
        "pgmq_sim.render.terminal imports pgmq_sim.actors.worker: the part 'render' may not import 'actors'"
        in out
    )
    assert (
        "pgmq_sim.result.run imports pgmq_sim.verdicts.checks: the part 'result' may not import 'verdicts'"
        in out
    )
    assert (
        "pgmq_sim.verdicts.limits imports pgmq_sim.db.views: the part 'verdicts' may not import 'db'" in out
    )
    assert (
        "pgmq_sim.model.traffic imports pgmq_sim.settings: the part 'model' may not import 'settings'" in out
    )
    assert "pgmq_sim.result.run must not load the driver or the SQL layer, but loads psycopg" in out
    assert "pgmq_sim.verdicts.limits must not load the driver or the SQL layer, but loads pgmq_sim.db" in out
    # the allowed arrows are not named
    assert "pgmq_sim.actors.worker imports" not in out and "pgmq_sim.verdicts.checks imports" not in out
    assert "pgmq_sim.settings imports" not in out


def test_the_package_root_keeps_at_most_ten_modules() -> None:
    root = REPO / "src" / "pgmq_sim"
    modules = sorted(p.name for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(modules) <= 10, modules


def _p50(ms: float) -> dict[str, float | None]:
    return {"p50": ms, "p95": ms * 2, "p99": ms * 3, "max": ms * 4}


@pytest.mark.unit
@pytest.mark.parametrize(
    "before,after,beside,why",
    [
        (0.50, 0.55, 0.60, None),  # alone agrees with itself, beside is slower: the queue's cost
        (1.00, 0.40, 0.60, "disagree"),  # the server changed between the two alone windows
        (1.04, 1.00, 0.40, "sleeping CPU"),  # an idle machine is no baseline for a busy one
        (0.50, None, 0.60, "not measured"),  # the run stopped before the second window
    ],
)
def test_a_bystander_baseline_is_compared_only_when_it_is_like_for_like(
    before: float, after: float | None, beside: float, why: str | None
) -> None:
    from pgmq_sim.result.costs import BystanderResult

    alone = (before + after) / 2 if after is not None else before
    result = BystanderResult(
        50, 500, 0, _p50(alone), _p50(beside), _p50(before), _p50(after) if after is not None else None
    )
    reason = result.incomparable_because
    assert (reason is None) == (why is None), reason
    if why is not None:
        assert reason is not None and why in reason
    assert result.as_json()["comparable"] == (why is None)


def _seconds(processed: list[int]) -> list[SecondSample]:
    return [SecondSample(i, n, n, 0, None, None, None) for i, n in enumerate(processed)]


def test_a_faults_outage_and_recovery_are_measured_from_the_timeline() -> None:
    """From the fault to the next completion is the outage; the rate before is the median of the
    seconds before; recovery ends with the first whole second back at 90% of it. A pause with a
    lost connection that no fault explains is reported as met; one without any loss is not."""
    processed = [100, 100, 98, 102, 5, 0, 60, 95, 100, 100, 40, 100, 100, 100]
    faults = [Fault(4.0, "kill-pooler", "KILL"), Fault(12.5, "reconnect-pooler", "RECONNECT")]
    gaps = [(4.04, 6.3), (9.9, 10.6), (11.2, 11.45)]
    losses = [4.05, 4.06, 10.1]
    kill, met, reconnect = fault_effects(faults, gaps, losses, _seconds(processed))
    assert (kill.kind, kill.outage_s, kill.rate_before, kill.connections_lost) == ("kill-pooler", 2.3, 100, 2)
    assert kill.recovery_s == 1.7  # second 6 (60/s) is short of 90; second 7 (95/s) is back, ending at 8 s
    assert (met.kind, met.at_s, met.outage_s, met.connections_lost) == ("outage", 9.9, 0.7, 1)
    assert (reconnect.outage_s, reconnect.connections_lost, reconnect.recovery_s) == (0.0, 0, 0.5)
    assert kill.effect() == "out 2.30 s, back to 100/s within 1.7 s, 2 connection(s) lost"


def test_a_fault_never_back_to_its_rate_says_so() -> None:
    (fault,) = fault_effects(
        [Fault(3.2, "pause-pooler", "for 1 s")], [(3.2, 4.5)], [], _seconds([50] * 4 + [10] * 4)
    )
    assert (
        fault.recovery_s is None
        and fault.effect() == "out 1.30 s, not back to 50/s by the end, 0 connection(s) lost"
    )


def test_a_pause_no_longer_than_the_runs_usual_is_no_outage() -> None:
    """Workers that sleep when idle pause completions anyway: a fault's pause counts only when it is
    longer than the pauses the run kept making before it; a one-off stall makes no habit."""
    idle = [(i + 0.1, i + 0.9) for i in range(1, 9)]
    (same,) = fault_effects([Fault(5.0, "reconnect-pooler", "")], idle, [], _seconds([80] * 10))
    (longer,) = fault_effects(
        [Fault(5.0, "kill-pooler", "")], [*idle[:3], (5.05, 7.5)], [], _seconds([80] * 10)
    )
    assert same.outage_s == 0.0 and longer.outage_s == 2.5
    (after_a_stall,) = fault_effects(
        [Fault(5.0, "pause-pooler", "")], [(1.0, 3.5), (5.0, 6.5)], [], _seconds([80] * 9)
    )
    assert after_a_stall.outage_s == 1.5


def _cut_off(pooler: bool = True) -> list[SecondSample]:
    """Ten seconds at 100/s offered; from second 7 nothing is written or completed (the path down
    until the run's end), the pooler showing 5 clients waiting, the longest 2.5 s."""
    out = []
    for second in range(10):
        up = second < 7
        waiting = (0 if up else 5) if pooler else None
        out.append(
            SecondSample(second, 100 if up else 0, 100 if up else 0, 0, None, None, None, offered=100,
                         pooler_waiting=waiting, pooler_wait_ms=None if waiting is None else 500.0 * waiting)
        )  # fmt: skip
    return out


def test_an_outage_the_runs_end_cuts_off_is_still_an_outage() -> None:
    """The pause from the last completion to the run's end, while messages were due: met (the
    producer stalled, the pooler held clients waiting) or the injected fault's, to the end, not
    recovered; its row says what the pooler showed meanwhile."""
    timeline = Timeline()
    for at in (6.5, 6.9, 6.95):
        timeline.processed(at, 1.0)
    gaps, losses = timeline.pauses(10.0)
    assert gaps == [(6.5, 6.9), (6.95, 10.0)] and losses == [], gaps  # the last runs to the end
    assert timeline.pauses(7.0)[0] == [(6.5, 6.9)]  # under GAP_S after the last completion: none
    (met,) = fault_effects([], [(6.95, 10.0)], [], _cut_off(), 10.0)
    assert (met.kind, met.at_s, met.outage_s, met.open_at_end, met.recovery_s) == (
        "outage",
        6.95,
        3.05,
        True,
        None,
    )
    assert "the producer wrote nothing for 3 s while messages were due" in met.detail, met.detail
    assert "the pooler held up to 5 client(s) waiting" in met.detail, met.detail
    assert met.effect() == (
        "out 3.05 s, not recovered by the end of the run, 0 connection(s) lost; the pooler showed up to 5"
        " client(s) waiting for a server connection (longest 2500 ms)"
    )
    assert met.as_json()["recovered"] is False
    (restart,) = fault_effects([Fault(7.0, "restart-server", "")], [(6.95, 10.0)], [], _cut_off(False), 10.0)
    assert (restart.outage_s, restart.open_at_end) == (3.0, True)
    # the same pause, in a run whose work was all done (nothing due, no backlog): no outage
    drained = [dataclasses.replace(s, offered=0, arrived=s.processed) for s in _cut_off(False)]
    assert fault_effects([], [(6.95, 10.0)], [], drained, 10.0) == []
    # nor one the run outlived: a closed pause of a second with nothing lost and nobody waiting
    assert fault_effects([], [(3.0, 4.2)], [], _seconds([100] * 10), 10.0) == []


def test_a_claim_skips_locked_rows_by_its_code_not_its_comments(tmp_path: Path) -> None:
    """Every built-in claim passes over what another worker holds; a team's claim is read from its
    code: SKIP LOCKED named only in a comment, or a blocking advisory lock, does not skip."""
    from pgmq_sim.designs.design import built_in_designs, load_design

    # (pgmq's and PgQ's claims call functions: their locks are not in the claim's text)
    assert all(load_design(n).skips_locked for n in built_in_designs() if load_design(n).requires is None)
    said = tmp_path / "said.sql"
    said.write_text("-- no SKIP LOCKED here\nselect 1 /* nor FOR UPDATE SKIP LOCKED */ for update")
    blocking = tmp_path / "blocking.sql"
    blocking.write_text("select 1 where pg_advisory_xact_lock(1) is not null")
    trying = tmp_path / "trying.sql"
    trying.write_text("select 1 where pg_try_advisory_xact_lock(1)")
    assert not load_design("indexed", next_msg=said).skips_locked
    assert not load_design("seed", next_msg=blocking).skips_locked
    assert load_design("seed", next_msg=trying).skips_locked


@pytest.mark.parametrize(
    "application,query,same_database,pooled,expected",
    [
        ("pgmq-sim housekeeper", "select ...", True, False, Whose.OURS),  # a session of its own: its name
        ("pgmq-sim housekeeper", "select ...", True, True, Whose.POOL),  # the last client's name only
        ("pgmq-sim w3", "select * from pgmq_sim_claim($1)", True, True, Whose.OURS),  # runs the run's
        ("report job", "select * from pgmq_sim_claim($1)", True, True, Whose.OUTSIDE),  # another's name
        ("pgmq-sim producer", "insert ...", False, False, Whose.OUTSIDE),  # another database's
        ("pgmq-sim pressure", "lock table msg_queue", True, False, Whose.OUTSIDE),  # stands for one outside
    ],
)
def test_whose_a_session_is_follows_the_paths_pooling(
    application: str, query: str, same_database: bool, pooled: bool, expected: Whose
) -> None:
    """Behind a transaction pooler a backend named as the run's is its pool's, unless what it runs
    now is the run's own statement; nothing is outside the run without another name or database."""
    assert whose(application, query, same_database, pooled) == expected


def test_a_pooled_blocker_named_as_the_run_is_neither_outside_it_nor_said_to_be_its_own() -> None:
    """A blocker row of sql/lock_blockers.sql behind a transaction pooler: the backend's name is the
    last client's, so the blocker is not outside the run, and its text says whose is not known."""
    head = (101, "pgmq-sim w1", 202)
    row = (*head, "pgmq-sim housekeeper", "active", "tuple", "msg_queue", "", 0.1, "select 1", "", "")
    b = lock_blocker(row, transaction_pooled=True)
    assert b.ours
    seen = BlockerSeen(b.pid, b.application, b.state, b.ours, b.lock, b.target, b.mode, 1).text()
    assert "whose transaction, not known" in seen and "outside the run" not in seen, seen
    assert "the run's own" not in seen, seen
    assert not lock_blocker((*head, "report job", *row[4:]), transaction_pooled=True).ours
