"""Queue designs without a server: how a folder is read, what a claim's text says about its locks,
and the causes a failed audit names from constructed evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgmq_sim.designs.design import load_design
from pgmq_sim.errors import UsageError
from pgmq_sim.model.facts import AuditCounts, DuplicateClaims, OrderViolation
from pgmq_sim.model.locks import ClaimLocks
from pgmq_sim.verdicts.audit import judge_audit

pytestmark = pytest.mark.unit

FILES = ("schema.sql", "enqueue.sql", "claim.sql", "complete.sql")


def make(tmp_path: Path, toml: str | None = None, **extra: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (tmp_path / name).write_text("select 1")
    for name, text in extra.items():
        (tmp_path / name.replace("_sql", ".sql")).write_text(text)
    if toml is not None:
        (tmp_path / "queue.toml").write_text(toml)
    return tmp_path


def test_a_folder_is_read_with_its_options(tmp_path: Path) -> None:
    design = load_design(
        str(make(tmp_path, 'transaction = "split"\ndelivery = "at-least-once"\nordered = false\n'))
    )
    assert (design.transaction, design.at_least_once, design.ordered, design.seed_table) == (
        "split",
        True,
        False,
        False,
    )
    assert design.origin == "given by -queue" and design.complete.path.name == "complete.sql"


def test_delmsg_picks_the_deleting_form_or_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"has only complete\.sql"):
        load_design(str(make(tmp_path)), delmsg=True)
    (tmp_path / "complete_delete.sql").write_text("delete from t where id = $1")
    design = load_design(str(tmp_path), delmsg=True)
    assert design.deletes and design.complete.path.name == "complete_delete.sql"


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ('transaction = "sometimes"\n', "use one of single, split"),
        ("ordered = 1\n", "ordered must be true or false"),
        ('table = "jobs"\n', "only the built-in designs name a table"),
        ('extends = "nowhere"\n', "unknown queue design 'nowhere'"),
    ],
)
def test_a_queue_toml_that_says_something_unknown_is_refused(tmp_path: Path, toml: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        load_design(str(make(tmp_path, toml)))


def test_the_built_in_strategies_are_designs_on_the_seed_table() -> None:
    indexed = load_design("indexed")
    assert indexed.seed_table and indexed.extra_schema is not None and indexed.has_split_form
    assert "limit $2" in indexed.claim.text  # batches
    affinity = load_design("affinity")  # extends indexed: its schema and split form come from there
    assert affinity.extra_schema == indexed.extra_schema and "$3" in affinity.claim.text
    assert not load_design("fifo").ordered


@pytest.mark.parametrize(
    ("claim", "said"),
    [
        (
            "select id from t -- for update skip locked (a comment)",
            "no row lock (no FOR UPDATE, no advisory lock)",
        ),
        ("select id from t for update skip locked", "FOR UPDATE, SKIP LOCKED"),
        ("select id from t FOR NO KEY UPDATE", "FOR UPDATE"),
        ("select id from t where pg_try_advisory_xact_lock(1, id)", "an advisory lock"),
    ],
)
def test_a_claims_locks_are_read_from_its_text_not_its_comments(claim: str, said: str) -> None:
    assert ClaimLocks.read(claim).said() == said


def counts(**values: object) -> AuditCounts:
    base: dict[str, object] = {
        "processed": 100,
        "duplicates": 0,
        "missing": 0,
        "left_behind": 0,
        "duplicate_ids": (),
        "missing_ids": (),
        "order_violation_ids": (),
        "order_violations": 0,
    }
    return AuditCounts(**(base | values))  # type: ignore[arg-type]


def test_duplicates_from_a_claim_without_a_lock_name_the_workers_and_the_missing_lock() -> None:
    evidence = (DuplicateClaims(17, ("w2", "w5"), False, 0.004),)
    verdict = judge_audit(
        counts(duplicates=3, duplicate_ids=(17,), left_behind=3, duplicate_claims=evidence),
        expected=100,
        ordered=True,
        complete=True,
        claim_sql="update q set s = 'taken' where id = (select id from q where s = 'new' limit 1)",
    )
    assert not verdict.passed
    assert "msg_id 17 was completed by w2 and again by w5" in verdict.causes[0]
    assert "4.0 ms after w2's" in verdict.causes[0] and "takes no row lock" in verdict.causes[0]
    assert "3 message(s) were never processed" in verdict.causes[1]  # the count was reached by duplicates
    assert verdict.fix is not None and "FOR UPDATE SKIP LOCKED" in verdict.fix


def test_duplicates_despite_a_lock_say_the_lock_is_not_on_the_row_updated() -> None:
    evidence = (DuplicateClaims(8, ("w1", "w3"), True, 0.002),)
    verdict = judge_audit(
        counts(duplicates=1, duplicate_ids=(8,), duplicate_claims=evidence),
        expected=100,
        ordered=True,
        complete=False,
        claim_sql="select id from q for update skip locked",
    )
    assert "while w1 still held it" in verdict.causes[0]
    assert "FOR UPDATE, SKIP LOCKED, yet two transactions held one message at once" in verdict.causes[0]


def test_an_order_violation_names_the_group_both_messages_and_how_early() -> None:
    evidence = (OrderViolation("type2", 4, 12, 9, "w3", "w1", 0.0021),)
    verdict = judge_audit(
        counts(order_violations=1, order_violation_ids=(12,), violations=evidence),
        expected=100,
        ordered=True,
        complete=True,
        claim_sql="select id from q for update skip locked",
    )
    assert (
        "group (type2, order_id 4): msg_id 12 (w3) was claimed 2.1 ms before msg_id 9 (w1)"
        in verdict.causes[0]
    )
    assert "skips locked rows" in verdict.causes[0]
    unordered = judge_audit(counts(order_violations=1), expected=100, ordered=False, complete=True)
    assert (
        unordered.passed and unordered.causes == ()
    )  # an unordered design's reordering is reported, not failed


def test_a_passing_audit_has_no_cause_and_redeliveries_are_named_not_failed() -> None:
    verdict = judge_audit(
        counts(redelivered=2, redelivered_ids=(5, 6)),
        expected=100,
        ordered=True,
        complete=True,
        at_least_once=True,
    )
    assert verdict.passed and verdict.causes == () and verdict.fix is None
    assert "2 redelivered after their lease passed" in "; ".join(verdict.problems)


def test_the_workers_claim_is_the_file_as_written() -> None:
    """No file is wrapped, nested or rewritten: the claim the workers prepare is claim.sql's text,
    its batch still the argument $2; as a function it returns the claim's own columns."""
    from dataclasses import replace

    from pgmq_sim.db.statements import CLAIM, create_function, prepare, worker_statements
    from pgmq_sim.db.values import SessionPlan

    design = load_design("indexed")
    plan = SessionPlan(
        design.claim.text,
        False,
        True,
        complete_sql=design.complete.text,
        batch=10,
        claim_returns="msg_id integer",
    )
    claim = next(s for s in worker_statements(plan) if s.name == CLAIM)
    assert claim.text == design.claim.text and "limit $2" in claim.text
    assert prepare(claim) == f"prepare {CLAIM}(text, integer, bigint, text, float8) as {design.claim.text}"
    drop, create, _ = create_function(claim)  # an earlier run's function of other columns dropped first
    assert drop.startswith("drop function if exists pgmq_sim_claim(")
    assert "returns table (msg_id integer) language sql" in create
    assert "with claimed as" not in create_function(claim)[0]
    # the tool's own built-in claims have their batch written in (a plan the plan cache keeps)
    own = next(s for s in worker_statements(replace(plan, builtin_claim=True)) if s.name == CLAIM)
    assert "$2" not in own.text and "limit 10  -- the batch" in own.text


def test_a_folder_missing_its_enqueue_is_refused_not_taken_for_a_strategy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make(tmp_path / "mine")
    (folder / "enqueue.sql").unlink()
    with pytest.raises(UsageError, match=r"has no enqueue\.sql"):
        load_design(str(folder))
    monkeypatch.chdir(tmp_path)  # as before designs, ./strategies/NAME with only a claim is a strategy
    (tmp_path / "strategies" / "old").mkdir(parents=True)
    (tmp_path / "strategies" / "old" / "claim.sql").write_text("select 1")
    assert load_design("old").seed_table
