"""How much a queue takes and what it costs the database: runs bounded by time, sweeps to the knee,
server cost per message from PostgreSQL's own statistics, and a bystander's latency, compared with
its baseline only when like for like; capacity flags refused before the run (unit)."""

from __future__ import annotations

import json
import re

import psycopg
import pytest
from checks import assert_exactly_once_in_order
from conftest import Cli, Refuse, assert_one_line_error

from pgmq_sim.model.quantities import count_text

FAST = "-claim indexed -poll-interval 0.02"


def doc(cli: Cli) -> dict:
    return json.loads((cli.workdir / "out.json").read_text())


@pytest.mark.integration
def test_a_rate_sweep_finds_the_knee_and_the_audit_holds_over_it(
    cli: Cli, db: psycopg.Connection, dsn: str
) -> None:
    """Three workers, one per type, 10 ms of work each: 300 messages/s at most (less on a busy host,
    where a claim and a completion cost milliseconds too). 50/s and 100/s are held; 1200/s is four
    times what they can do, so its backlog grows and it fails. Steps of 4 s: with 2.5 s, a clean-clone
    CI run on 2 loaded cores once failed the 100/s step (a backlog of 3% of a short step's arrivals is
    a tenth of a second's pause)."""
    result = cli.run(
        "-sweep rate=50,100,1200 -step 4 -settle 4 -workers 3 -orders 10 -work-ms 10",
        FAST,
        "-slo e2e-p99=1000 -json out.json -plot knee.png -enqueue-batch 100",
    )  # fmt: skip (1200/s offered on a loaded host: the enqueues batched so that they are offered)
    assert result.returncode == 0, result.stdout + result.stderr
    report = doc(cli)
    sweep = report["sweep"]
    steps = sweep["steps"]
    assert [s["setting"] for s in steps] == [50, 100, 1200]
    # the failing step says what bounded it: three workers, busy all the time
    assert steps[2]["limit"] == "workers", steps[2]["limit_evidence"]
    assert sweep["limit"].startswith("at 1200 msg/s the limit was workers"), sweep["limit"]
    for step in steps:
        for key in ("offered_per_s", "achieved_per_s", "backlog_end", "backlog_slope_per_s", "empty_claims"):
            assert step[key] is not None, key
        assert set(step["e2e_ms"]) == {"p50", "p95", "p99", "max"}
        assert step["claim_ms"]["p50"] is not None and step["complete_ms"]["p50"] is not None
        assert step["wal_bytes_per_msg"] > 0 and step["client_cpu_us_per_msg"] > 0
    low, mid, high = steps
    assert low["verdict"] == mid["verdict"] == "pass", (low, mid)
    assert abs(low["achieved_per_s"] - 50) < 15 and abs(mid["achieved_per_s"] - 100) < 25
    # above capacity: the backlog grew through the step, by about what the workers could not take
    assert high["verdict"] == "fail" and any("backlog grew" in r for r in high["reasons"]), high
    assert high["achieved_per_s"] < 320 and high["backlog_slope_per_s"] > 500
    assert sweep["max_sustainable_per_s"] == 100 and sweep["knee_step"] == 2
    assert "max sustainable rate 100 msg/s" in " ".join(result.stdout.split())
    # one continuous run: the audit judges every message any step produced
    audit = report["audit"]
    assert audit["verdict"] == "pass" and audit["duplicates"] == audit["missing"] == 0
    assert (
        audit["expected"]
        == report["produced"]
        == db.execute("select max(msg_id) from msg_queue").fetchone()[0]
    )
    assert (cli.workdir / "knee.png").read_bytes()[:4] == b"\x89PNG"
    # the failing last step left messages behind: `pgmq-sim audit` judges them as the run did
    assert audit["left_behind"] > 0, audit
    again = cli.audit("-dsn", dsn)
    assert again.returncode == 0 and "audit pass" in again.stdout, again.stdout + again.stderr


@pytest.mark.integration
def test_a_sweeps_summary_has_its_step_table_and_its_progress_counts_seconds(cli: Cli) -> None:
    """The short summary (no -v) holds the steps' table its headline is read from; a run that ends
    when its goal says (a sweep, phases) has no length to count to: its progress line says the
    seconds so far, never 'N of 0 s'."""
    result = cli.run("-sweep rate=20,40 -step 4 -settle 1 -workers 3 -orders 4 -work-ms 1-3", FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sweep rate=20,40: 4 s steps" in result.stdout, result.stdout
    rows = [" ".join(line.strip("│ ").split()) for line in result.stdout.splitlines() if line.startswith("│")]
    steps = [r.split(" │ ")[:2] for r in rows if re.match(r"[12] │ [24]0 │", r)]
    assert steps == [["1", "20"], ["2", "40"]], result.stdout
    progress = [line for line in result.stderr.splitlines() if line.startswith("progress:")]
    assert progress and all(re.search(r", \d+ s, step [12]/2: ", line) for line in progress), progress


@pytest.mark.integration
def test_fewer_groups_than_workers_are_said_before_the_run(cli: Cli) -> None:
    """The default 3 types x 2 orders are 6 groups: 8 workers dealt over 3 types can never all work
    at once. Said before the run, and in the summary, not only under -v."""
    result = cli.run("-fill-db 60 -workers 8", FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    said = (
        "note: the workload caps the run: 6 groups (3 types x 2 orders) for 8 workers, and a group takes"
        " one worker at a time: at most 6 work at once; give -orders 3 or more, or -workers 6"
    )
    assert said in " ".join(result.stderr.split()), result.stderr
    assert said in " ".join(result.stdout.split()), result.stdout
    enough = cli.run("-fill-db 60 -workers 8 -orders 3", FAST)
    assert enough.returncode == 0 and "caps the run" not in enough.stdout + enough.stderr


@pytest.mark.integration
@pytest.mark.alone
def test_a_workers_sweep_finds_where_throughput_peaks(cli: Cli) -> None:
    result = cli.run("-sweep workers=3,6 -step 2 -orders 20 -work-ms 5 -json out.json", FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = doc(cli)["sweep"]["steps"]
    assert [s["setting"] for s in steps] == [3, 6]
    # 5 ms of work: 3 workers take about 600/s, 6 about 1200/s (the queue is kept topped up)
    assert steps[1]["achieved_per_s"] > 1.4 * steps[0]["achieved_per_s"], steps
    assert "throughput peaks at 6 workers" in " ".join(result.stdout.split())


@pytest.mark.integration
def test_a_timed_run_ends_on_time_and_leaves_its_backlog_as_backlog(cli: Cli, db: psycopg.Connection) -> None:
    """400/s offered to what takes about 300/s: when 3 s have passed, the producer stops, the work in
    flight finishes, and the rest is backlog: pending, not missing."""
    result = cli.run(
        "-duration 3 -rate 400 -producers 4 -workers 3 -orders 10 -work-ms 10 -json out.json", FAST
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = doc(cli)
    assert report["outcome"] == "completed" and report["target"] is None
    assert 3.0 <= report["elapsed_s"] < 4.5, report["elapsed_s"]
    produced = report["produced"]
    assert 1100 <= produced <= 1250, produced  # 400/s for 3 s
    pending = db.execute("select count(*) from msg_queue where status = 'N'").fetchone()[0]
    assert pending > 50 and report["audit"]["left_behind"] == pending
    assert report["audit"]["verdict"] == "pass" and report["audit"]["missing"] == 0
    assert report["processed"] + pending == produced
    assert f"{count_text(pending)} left as backlog" in " ".join(result.stdout.split())


@pytest.mark.integration
def test_server_cost_and_bystander_are_reported(cli: Cli, db: psycopg.Connection) -> None:
    db.execute("create extension if not exists pg_stat_statements")  # the tests' server preloads it
    result = cli.run(
        "-fill-db 400 -rate 200 -workers 6 -orders 10 -work-ms 0-1 -bystander 40 -json out.json -v", FAST
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = doc(cli)
    cost = report["server_cost"]
    for key in ("wal_bytes_per_msg", "commits_per_msg", "blks_hit_per_msg", "rows_written_per_msg"):
        assert cost[key] is not None and cost[key] > 0, key
    assert cost["messages"] == 400
    statements = cost["statements"]
    assert statements and any("msg_queue" in s["query"] for s in statements)
    assert all(s["calls"] > 0 and s["mean_ms"] is not None for s in statements)
    roles = cost["roles"]
    assert roles["sources"] == {"transactions": "the tool's own count", "statements": "pg_stat_statements"}
    producer, consumers, empty = roles["producer"], roles["consumers"], roles["empty_claims"]
    # an application's shape: one insert, one transaction per message (a COPY only to catch up)
    assert 0.5 <= producer["transactions_per_msg"] <= 1.0 and 0.5 <= producer["calls_per_msg"] <= 1.0
    assert producer["wal_bytes_per_msg"] > 0 and empty["wal_bytes_per_msg"] == 0
    assert consumers["transactions_per_msg"] >= 1.0 and consumers["wal_bytes_per_msg"] > 0
    assert roles["bystander"]["calls_per_msg"] > 0  # its statements are named apart from the queue's
    assert "cost by role" in result.stdout
    client = report["client"]
    assert client["cpu_us_per_msg"] > 0 and client["processes"][0]["runner"] == "local"
    # the workers' logins are counted apart from the run's CPU per message
    local = client["processes"][0]
    logins = local["logins"]
    assert logins["count"] == 6 and logins["cpu_s"] > 0 and 0 < logins["seconds"] < 10, logins
    assert client["logins"]["count"] == 6
    run_us = (local["cpu_s"] - logins["cpu_s"]) * 1e6 / (local["messages"] - logins["messages"])
    assert client["cpu_us_per_msg"] == pytest.approx(run_us, rel=0.05)
    assert "6 logins took" in " ".join(result.stdout.split())
    bystander = report["bystander"]
    assert bystander["transactions"] > 60 and bystander["errors"] == 0
    assert bystander["latency_ms"]["p50"] > 0 and bystander["alone_latency_ms"]["p99"] > 0
    # alone twice, before the workers and after them, so that a start-up is not the baseline
    assert bystander["alone_before_ms"]["p50"] > 0 and bystander["alone_after_ms"]["p50"] > 0
    assert bystander["comparable"] == (bystander["incomparable_because"] is None)
    said = " ".join(result.stdout.split())
    assert "alone (before and after)" in said and ("; comparable" in said or "not comparable: " in said)
    assert (
        db.execute("select sum(counter) from pgmq_sim_bystander").fetchone()[0] == bystander["transactions"]
    )
    assert "bystander ms" in result.stdout and "server cost" in result.stdout
    # -v: every row of the summary, the workers' table too (a plain run's: test_port.py)
    for row in ("workers' time", "complete+commit ms", "claim ms", "empty claims", "conn. lost"):
        assert row in result.stdout, row
    assert_exactly_once_in_order(db, 400, delmsg=False)


@pytest.mark.unit
@pytest.mark.parametrize(
    "args,needles",
    [
        ("-sweep rate=100,x", ["-sweep 'rate=100,x'", "rate=A,B,C"]),
        ("-sweep speed=1", ["is not a sweep"]),
        ("-sweep rate=100 -rate 50", ["drop -rate"]),
        ("-sweep rate=100 -duration 5", ["drop -duration"]),
        ("-sweep workers=2,6 -workers 6", ["leaves a type without one"]),
        ("-slo p95=3", ["-slo 'p95=3'", "e2e-p99=MS"]),
        ("-duration 0 -rate 10", ["-duration 0"]),
        ("-bystander -4", ["-bystander -4"]),
    ],
)
def test_bad_capacity_flags(refuse: Refuse, args: str, needles: list[str]) -> None:
    assert_one_line_error(refuse(args), 2, *needles)


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
    from pgmq_sim.verdicts.bystander import judge_bystander

    alone = (before + after) / 2 if after is not None else before
    result = BystanderResult(
        50, 500, 0, _p50(alone), _p50(beside), _p50(before), _p50(after) if after is not None else None
    )
    judged = judge_bystander(result)
    reason = judged.incomparable_because
    assert (reason is None) == (why is None), reason
    if why is not None:
        assert reason is not None and why in reason
    assert judged.as_json() == {"comparable": why is None, "incomparable_because": reason}
