"""Claim strategies and wake-ups: each ordered claim keeps order, fifo is flagged, notify wakes at once."""

from __future__ import annotations

import json
import re

import psycopg
import pytest
from conftest import REPO, Cli, assert_one_line_error

from pgmq_sim.actors.bells import new_loop
from pgmq_sim.db.claims import ClaimSession
from pgmq_sim.db.connection import connect_async
from pgmq_sim.db.values import SessionPlan
from pgmq_sim.designs.design import load_design

pytestmark = pytest.mark.integration

ORDERED = ["seed", "indexed", "advisory", "affinity"]


@pytest.mark.parametrize("orders", [2, 50])
@pytest.mark.parametrize("claim", ORDERED)
def test_ordered_strategy_passes_audit_with_12_workers(cli: Cli, claim: str, orders: int) -> None:
    result = cli.run(
        "-claim",
        claim,
        "-fill-db 600 -workers 12 -orders",
        str(orders),
        "-work-ms 0-2 -poll-interval 0.02 -json out.json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["strategy"] == claim and doc["ordered"] is True
    audit = doc["audit"]
    assert (audit["verdict"], audit["order_checked"], audit["processed"]) == ("pass", True, 600)
    assert audit["duplicates"] == audit["missing"] == audit["order_violations"] == 0


@pytest.mark.parametrize(("claim", "keeps_group"), [("indexed", False), ("affinity", True)])
def test_affinity_claims_the_next_message_of_the_group_just_completed(
    db: psycopg.Connection, dsn: str, claim: str, keeps_group: bool
) -> None:
    """Groups 1 and 2 with two messages each. A holds group 2, B holds group 1; B completes and
    stops, so group 1's next message is free and lower. When A completes, the claim in the same
    round trip takes group 1's message (indexed: the lowest free head) or group 2's (affinity)."""
    design = load_design(claim)
    db.execute((REPO / "schema.sql").read_text())
    if design.extra_schema is not None:
        db.execute(design.extra_schema.text)
    for msg_id, order_id in enumerate([1, 1, 2, 2], start=1):
        db.execute(
            "insert into msg_queue values (%s, 'type1', 'N', %s, clock_timestamp(), null)", (msg_id, order_id)
        )
    plan = SessionPlan(design.claim.text, False, False, complete_sql=design.complete.text)

    async def sessions() -> None:
        b = await ClaimSession.open(await connect_async(dsn), plan, "type1", "b", "b")
        a = await ClaimSession.open(await connect_async(dsn), plan, "type1", "a", "a")
        try:
            (first_b,), (first_a,) = await b.claim(), await a.claim()
            assert (first_b.msg_id, first_a.msg_id) == (1, 3)
            await b.complete([first_b], claim_next=False)
            done = await a.complete([first_a], claim_next=True)
            assert done.chained and len(done.next) == 1
            assert (done.next[0].order_id, done.next[0].msg_id) == ((2, 4) if keeps_group else (1, 2))
        finally:
            a.close()
            b.close()

    loop = new_loop()
    try:
        loop.run_until_complete(sessions())
    finally:
        loop.close()


def test_fifo_is_flagged_unordered_not_failed(cli: Cli) -> None:
    result = cli.run("-claim fifo -fill-db 600 -workers 12 -orders 2 -work-ms 1-4 -json out.json")
    assert result.returncode == 0, result.stderr
    doc = json.loads((cli.workdir / "out.json").read_text())
    assert doc["ordered"] is False and doc["ordering_bound_per_s"] is None
    assert doc["audit"]["verdict"] == "pass" and doc["audit"]["order_checked"] is False
    assert doc["audit"]["order_violations"] > 0  # reported, as expected for this strategy
    assert "unordered strategy" in " ".join(result.stdout.split())


def test_notify_wakes_an_idle_worker_at_once(cli: Cli) -> None:
    """Messages trickle into an idle system; the fallback wait is 2 s, so only notify explains
    a fast pickup."""
    common = ["-fill-db", "8", "-rate", "4", "-workers", "3", "-work-ms", "0", "-poll-interval", "2"]
    assert cli.run(*common, "-wakeup", "notify", "-json", "notify.json").returncode == 0
    assert cli.run(*common, "-wakeup", "poll", "-json", "poll.json").returncode == 0
    notify = json.loads((cli.workdir / "notify.json").read_text())["latency_ms"]["e2e"]
    poll = json.loads((cli.workdir / "poll.json").read_text())["latency_ms"]["e2e"]
    assert notify["max"] < 500, notify
    assert poll["p50"] > notify["max"], (poll, notify)


def plan_and_buffers(db: psycopg.Connection, claim: str, backlog: int) -> tuple[str, int]:
    """Build a backlog, then EXPLAIN ANALYZE one claim: its plan and the buffers it touched."""
    design = load_design(claim)
    db.execute((REPO / "schema.sql").read_text())
    if design.extra_schema:
        db.execute(design.extra_schema.text)
    db.execute(
        """insert into msg_queue
           select g, 'type' || (1 + g %% 3), 'N', 1 + (g / 3) %% 20,
                  timestamptz '2026-01-01' + g * interval '1 microsecond', null
           from generate_series(1, %s) g""",
        (backlog,),
    )
    db.execute("analyze msg_queue")
    with db.transaction(force_rollback=True):
        sql = "explain (analyze, buffers, format text) " + design.claim.text
        params = ("type1", 1)[: max(int(n) for n in re.findall(r"\$(\d)", design.claim.text))]
        plan = "\n".join(r[0] for r in psycopg.RawCursor(db).execute(sql, params).fetchall())
    hits = re.search(r"Buffers: shared hit=(\d+)", plan)
    return plan, int(hits.group(1)) if hits else 0


@pytest.mark.parametrize("claim", ["indexed", "advisory"])
def test_index_driven_claim_uses_the_index_and_cost_does_not_grow(db: psycopg.Connection, claim: str) -> None:
    _, small = plan_and_buffers(db, claim, 3_000)
    plan_large, large = plan_and_buffers(db, claim, 120_000)
    assert "msg_queue_pending_by_group" in plan_large
    assert "Seq Scan on msg_queue" not in plan_large
    assert large <= small * 2, (small, large)


def test_seed_claim_scans_the_backlog(db: psycopg.Connection) -> None:
    _, small = plan_and_buffers(db, "seed", 3_000)
    plan, large = plan_and_buffers(db, "seed", 120_000)
    assert "Seq Scan on msg_queue" in plan
    assert large > small * 10, (small, large)


def test_compare_runs_each_cell_on_one_workload(cli: Cli) -> None:
    """No -seed: one seed is drawn for the invocation, so every cell gets the same messages."""
    # one group per type and two workers each: fifo hands out a group's next message while its
    # previous one is still in flight, so its out-of-order count is never 0 here
    result = cli.run(
        "-compare seed,indexed/notify,fifo,seed",
        "-fill-db 300 -workers 6 -orders 1 -work-ms 1-3 -poll-interval 0.05 -json cmp.json",
    )
    assert result.returncode == 0, result.stderr
    runs = json.loads((cli.workdir / "cmp.json").read_text())["runs"]
    assert [(r["strategy"], r["settings"]["wakeup"]) for r in runs] == [
        ("seed", "poll"),
        ("indexed", "notify"),
        ("fifo", "poll"),
        ("seed", "poll"),
    ]
    assert all(r["processed"] == 300 for r in runs)
    seeds = {r["settings"]["seed"] for r in runs}
    assert len(seeds) == 1 and None not in seeds
    assert len({json.dumps(r["processed_per_type"]) for r in runs}) == 1, [
        r["processed_per_type"] for r in runs
    ]
    assert len({json.dumps(r["groups_per_type"]) for r in runs}) == 1
    seed = seeds.pop()
    assert f"seed {seed}" in result.stdout and f"seed {seed}" in (cli.workdir / "msg_queue.log").read_text()
    out = " ".join(result.stdout.split())
    assert "queue designs compared" in out and "msg/s" in out and "e2e p50 ms" in out
    # the unordered cell's out-of-order messages are shown, not hidden behind "pass"
    fifo = runs[2]["audit"]["order_violations"]
    assert fifo > 0 and f"({fifo} out of order: unordered)" in out
    for cell in ("cell seed/poll", "cell indexed/notify", "cell fifo/poll"):
        assert cell in result.stderr


def test_compare_with_next_msg_is_refused(cli: Cli) -> None:
    (cli.workdir / "mine.sql").write_text((REPO / "next_msg.sql").read_text())
    assert_one_line_error(cli.run("-compare seed,fifo -next-msg mine.sql"), 2, "-compare", "-next-msg")


def test_user_strategy_is_found_by_dropping_in_files(cli: Cli) -> None:
    folder = cli.workdir / "strategies" / "mine"
    folder.mkdir(parents=True)
    folder.joinpath("claim.sql").write_text((REPO / "next_msg.sql").read_text())
    result = cli.run("-claim", "mine", "-fill-db", "60", "-workers", "3", "-work-ms", "0", "-json", "o.json")
    assert result.returncode == 0, result.stderr
    assert json.loads((cli.workdir / "o.json").read_text())["strategy"] == "mine"
    assert_one_line_error(cli.run("-claim", "theirs"), 2, "mine", "seed", "indexed", "advisory", "fifo")


def test_compare_keeps_the_other_cells_when_one_fails(cli: Cli) -> None:
    folder = cli.workdir / "strategies" / "broken"
    folder.mkdir(parents=True)
    folder.joinpath("claim.sql").write_text("select msg_id from no_such_table where $1 = 'x'")
    result = cli.run("-compare broken,indexed -fill-db 100 -workers 3 -work-ms 0 -json cmp.json")
    assert result.returncode == 1
    assert "broken/poll" in result.stderr and "no_such_table" in result.stderr
    assert "Traceback" not in result.stderr
    doc = json.loads((cli.workdir / "cmp.json").read_text())
    assert [r["strategy"] for r in doc["runs"]] == ["indexed"] and doc["runs"][0]["processed"] == 100
    assert doc["failed"][0]["strategy"] == "broken" and "no_such_table" in doc["failed"][0]["error"]
