"""The latency account read a chunk of claim time at a time (result/running_account), on the journals
of real runs: with any number of chunks, each cohort's messages and parts are the whole-journal
account's, and so is where its hidden time fell; a chunk fed with a floor past a later message's
enqueue is found out, and gives no account rather than a wrong one."""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import time

import psycopg
import pytest
from conftest import Cli

from pgmq_sim.db.account import read_account, read_chunk, read_origin
from pgmq_sim.engine.accounting import AccountKeeper
from pgmq_sim.result.account import CohortSplit, LatencyAccount
from pgmq_sim.result.running_account import RunningAccount

pytestmark = pytest.mark.integration


def cohorts(account: LatencyAccount) -> dict[str, CohortSplit]:
    found = {f"run/{name}": c for name, c in account.overall.items()}
    return found | {f"{t}/{name}": c for t, cs in account.per_type.items() for name, c in cs.items()}


def chunked(
    conn: psycopg.Connection,
    ordered: bool,
    chunks: int,
    free_at_end: list[tuple[str, str]],
    overstated_s: float = 0.0,
) -> LatencyAccount | None:
    """The account fed chunk by chunk, each with the earliest enqueue of the later chunks' messages
    as its floor (`overstated_s` later: a floor a driver got wrong). Every chunk but the last ends
    before each worker's latest claim, as the live cut-off does (sql/account_cutoff.sql): a worker's
    free time is journaled at its next claim, so a worker idle to the end (its type's messages all
    done) would leave the middle chunks without its free time."""
    origin = read_origin(conn)
    assert origin is not None
    row = conn.execute(
        "select min(first), min(latest) from (select extract(epoch from min(claimed_at))::float8 as first,"
        " extract(epoch from max(claimed_at))::float8 as latest from msg_journal group by worker) w"
    ).fetchone()
    assert row is not None
    first, last = row
    running = RunningAccount(ordered, origin)
    bounds: list[float | None] = [0.0, *(first + (last - first) * k / chunks for k in range(1, chunks)), None]
    read = []
    for lo, hi in itertools.pairwise(bounds):
        assert lo is not None
        read.append((read_chunk(conn, origin, lo, hi, free_at_end), hi))
    for index, ((journeys, free, claims), hi) in enumerate(read):
        later = [j.added for (others, _, _), _ in read[index + 1 :] for j in others]
        floor = min(later, default=math.inf) + overstated_s
        running.feed(journeys, free, claims, math.inf if hi is None else hi - origin, floor)
    account = running.finish(60)
    assert (account is None) == (running.missed is not None)
    return account


@pytest.mark.parametrize(
    ("design", "ordered"),
    [
        ("-queue next-attempt -fail-rate 0.1 -max-attempts 2 -delay 0.2:0.05-0.3", True),
        ("-claim fifo", False),
    ],
    ids=["ordered-retries-due", "unordered"],
)
def test_the_account_read_in_chunks_is_the_whole_journals(
    cli: Cli, dsn: str, design: str, ordered: bool
) -> None:
    result = cli.run(f"-rate 500 -fill-db 2500 -workers 6 -orders 20 -work-ms 1-8 {design} -json out.json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    free_at_end = [(w["name"], w["queue_type"]) for w in report["workers"]]
    with psycopg.connect(dsn) as conn:
        whole = read_account(
            conn, ordered, free_at_end, lambda origin, j, f: LatencyAccount.of(j, f, ordered, origin)
        )
        conn.commit()
        assert whole is not None
        expected = cohorts(whole)
        # a floor past what a later chunk's message was enqueued at: missed, and no account
        assert chunked(conn, ordered, 7, free_at_end, overstated_s=10.0) is None
        for chunks in (1, 7, 40):
            account = chunked(conn, ordered, chunks, free_at_end)
            assert account is not None
            got = cohorts(account)
            assert set(got) == set(expected), (chunks, set(got) ^ set(expected))
            for key, want in expected.items():
                have = got[key]
                assert have.messages == want.messages, (chunks, key)
                for part in ("due", "ordering", "claim", "capacity", "hidden", "service"):
                    assert have.part_ms(part) == pytest.approx(want.part_ms(part), rel=1e-4, abs=0.01), (
                        chunks,
                        key,
                        part,
                    )
                placed, wanted = dict(have.hidden_by_second), dict(want.hidden_by_second)
                for second in {*placed, *wanted}:  # a microsecond in one may round to nothing in the other
                    assert placed.get(second, 0.0) == pytest.approx(
                        wanted.get(second, 0.0), rel=1e-5, abs=1e-4
                    )


@pytest.mark.parametrize(
    "design",
    ["-claim indexed", "-queue next-attempt -fail-rate 0.1 -max-attempts 2 -delay 0.2:0.05-0.3"],
    ids=["indexed", "retries-due"],
)
def test_a_live_runs_account_is_read_as_it_goes_and_is_the_whole_journals(
    cli: Cli, dsn: str, design: str
) -> None:
    """With the live audit's windows every 0.5 s, the account reads the journal a chunk at a time
    after each window, up to the cut-off every claim before which is journaled; the end reads only
    the rest. Its cohorts are those of the whole journal read after the run, with retries and due
    times too."""
    result = cli.run(
        f"-rate 500 -fill-db 3000 -workers 6 -orders 20 -work-ms 1-8 {design} -audit-window 0.5"
        " -account-live-from 0 -v -json out.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    split = report["latency_split"]
    assert split["live_chunks"] >= 2 and split["live_cpu_s"] > 0, split
    said = " ".join(result.stdout.replace("│", " ").split())  # its cost beside the run's, with -v
    assert f"per message more, in a process of its own ({split['live_chunks']} chunks)" in said, said
    assert not any("latency account" in note for note in report["notes"]), report["notes"]
    free_at_end = [(w["name"], w["queue_type"]) for w in report["workers"]]  # a drained queue: all free
    with psycopg.connect(dsn) as conn:
        whole = read_account(
            conn, True, free_at_end, lambda origin, j, f: LatencyAccount.of(j, f, True, origin)
        )
    assert whole is not None
    expected = whole.as_json()
    for scope, want, have in [("run", expected["overall"], split["overall"])] + [
        (t, cs, split["per_type"][t]) for t, cs in expected["per_type"].items()
    ]:
        assert set(have) == set(want), scope
        for name, cohort in want.items():
            assert have[name]["messages"] == cohort["messages"], (scope, name)
            for part in ("due_ms", "ordering_ms", "claim_ms", "capacity_ms", "hidden_ms", "service_ms"):
                assert have[name][part] == pytest.approx(cohort[part], rel=1e-4, abs=0.01), (
                    scope,
                    name,
                    part,
                )


def test_a_ctrl_c_ends_the_run_and_the_account_kept_as_it_went_still_answers(cli: Cli) -> None:
    """Ctrl-C in a terminal signals the whole process group, the account's process too: the run
    ends, and asks that process for its account, which ignored the signal (the run's to handle)."""
    command = cli.command(
        "-rate 400 -duration 60 -workers 4 -orders 20 -claim indexed -work-ms 1-5 -audit-window 0.5"
        " -account-live-from 0 -json out.json"
    )
    proc = subprocess.Popen(
        command, cwd=cli.workdir, env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        log = cli.workdir / "msg_queue.log"
        while time.monotonic() < deadline and (not log.exists() or log.read_text().count("handled") < 2000):
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    report = json.loads((cli.workdir / "out.json").read_text())
    assert report["outcome"] == "interrupted", (report["outcome"], out, err)
    split = report["latency_split"]
    assert split is not None and split["live_chunks"] >= 2, (split, report["notes"])
    assert not any("latency account" in note for note in report["notes"]), report["notes"]


def test_below_its_threshold_the_account_is_read_whole_at_the_end(cli: Cli) -> None:
    """The live audit's windows close, but the journal never reaches -account-live-from rows: no
    process is started, and the end reads the whole journal (cheaper in all for a short run)."""
    result = cli.run(
        "-rate 500 -fill-db 1500 -workers 4 -orders 20 -claim indexed -work-ms 1-5 -audit-window 0.5"
        " -account-live-from 1000000 -json out.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    assert report["live_audit"]["windows_closed"] >= 2, report["live_audit"]
    split = report["latency_split"]
    assert split["live_chunks"] == 0 and split["live_cpu_s"] is None and split["overall"], split


def test_a_span_journaled_after_its_chunk_that_began_before_it_sends_the_end_to_the_whole_journal(
    cli: Cli, dsn: str
) -> None:
    """A row's free and claim spans are placed by the worker's own timing, and a frozen or starved
    client places them early. A row journaled after a chunk was read whose span began before that
    chunk's end (planted: a worker's latest row made later than the read saw, its free time 100 s)
    is found at the next read: no account, and the reason, rather than one missing that part."""
    result = cli.run(
        "-rate 400 -fill-db 1200 -workers 3 -orders 20 -claim indexed -work-ms 1-3 -json out.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workers = [
        (w["name"], w["queue_type"]) for w in json.loads((cli.workdir / "out.json").read_text())["workers"]
    ]
    for planted in (False, True):
        keeper = AccountKeeper(dsn, True, [name for name, _ in workers])
        keeper.step(None)
        assert keeper.kept().chunks == 1 and keeper.failed is None, keeper.failed
        if planted:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    "update msg_journal set claimed_at = claimed_at + interval '1 ms', free_s = 100"
                    " where msg_id = (select msg_id from msg_journal where worker = %s"
                    " order by claimed_at desc limit 1)",
                    (workers[0][0],),
                )
        account = keeper.finish(workers, 30)
        keeper.close()
        if planted:
            assert account is None and keeper.failed is not None, keeper.failed
            assert keeper.failed.startswith("1 worker span(s) of free or claim time"), keeper.failed
        else:
            assert account is not None and keeper.failed is None, keeper.failed


def test_a_keeper_far_behind_reads_a_bounded_chunk_at_a_time_and_its_account_is_the_whole_journals(
    cli: Cli, dsn: str
) -> None:
    """An account process the run left far behind holds one read's journeys, not the backlog: a
    read stops `most` rows on, the next is read as soon as the sweeps have room (not at the next
    step), and the end reads the rest the same way while the sweeps catch up.
    Its cohorts are those of the whole journal read at once."""
    result = cli.run(
        "-rate 200 -fill-db 1200 -workers 3 -orders 20 -claim indexed -work-ms 1-3 -json out.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workers = [
        (w["name"], w["queue_type"]) for w in json.loads((cli.workdir / "out.json").read_text())["workers"]
    ]
    with psycopg.connect(dsn) as conn:
        whole = read_account(conn, True, workers, lambda origin, j, f: LatencyAccount.of(j, f, True, origin))
    assert whole is not None
    keeper = AccountKeeper(dsn, True, [name for name, _ in workers], most=100)
    try:
        keeper.step(None)
        assert keeper.kept().chunks == 1 and keeper.failed is None, keeper.failed
        upto = keeper.kept().upto
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "select count(*) from msg_journal where claimed_at < to_timestamp(%s)", (keeper.kept().upto,)
            ).fetchone()
        assert row is not None and 0 < row[0] <= 100, row  # the first read stopped 100 rows on
        assert keeper.waiting  # the rest of the step's chunk is left to read: no other step needed
        deadline = time.monotonic() + 30
        while not keeper.read_wanted() and time.monotonic() < deadline:  # once the sweeps have room
            time.sleep(0.05)
        assert keeper.kept().chunks == 2 and keeper.kept().upto > upto, keeper.failed
        account = keeper.finish(workers, 30)
    finally:
        keeper.close()
    assert account is not None and keeper.failed is None, keeper.failed
    with psycopg.connect(dsn) as conn:  # the end's reads stop short of every worker's last claim
        row = conn.execute(
            "select count(*) from msg_journal where claimed_at < (select min(last) - interval '2 s'"
            " from (select max(claimed_at) as last from msg_journal group by worker) w)"
        ).fetchone()
    assert row is not None and row[0] >= 500 and keeper.kept().chunks >= row[0] // 100, row
    got, expected = cohorts(account), cohorts(whole)
    assert set(got) == set(expected)
    for key, want in expected.items():
        assert got[key].messages == want.messages, key
        for part in ("due", "ordering", "claim", "capacity", "hidden", "service"):
            have = got[key].part_ms(part)
            assert have == pytest.approx(want.part_ms(part), rel=1e-4, abs=0.01), (key, part)
