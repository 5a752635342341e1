"""The enqueue side as production has it: N producer sessions take open-loop arrivals, every enqueue
is timed from its due time to its commit and split into where it waited, nothing is smoothed over by
a batch the application would not send, and the audit holds when producer sessions are killed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psycopg
import pytest
from checks import PRODUCER, wait_for_producer
from conftest import Cli, Refuse, assert_one_line_error

FAST = "-claim indexed -wakeup notify -work-ms 1-2"


def doc(cli: Cli) -> dict:
    return json.loads((cli.workdir / "out.json").read_text())


def slow_schema(cli: Cli, each: str) -> None:
    """slow.sql: the seed's schema with a 5 ms trigger after each insert `statement` or `row`."""
    schema = (Path(__file__).parents[1] / "schema.sql").read_text()
    schema += f"""
create function slow_enqueue() returns trigger language plpgsql as
$$ begin perform pg_sleep(0.005); return null; end $$;
create trigger slow_enqueue after insert on msg_queue for each {each} execute function slow_enqueue();
"""
    (cli.workdir / "slow.sql").write_text(schema)


class Watch(threading.Thread):
    """Samples the run's producer sessions in the test's database every 50 ms; optionally ends one of
    them (the server's pg_terminate_backend) every `kill_every_s`."""

    def __init__(self, dsn: str, kill_every_s: float | None = None) -> None:
        super().__init__(daemon=True)
        self.dsn, self.kill_every_s = dsn, kill_every_s
        self.stop = threading.Event()
        self.most, self.killed = 0, 0

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            last_kill = time.monotonic()
            while not self.stop.wait(0.05):
                pids = [
                    r[0]
                    for r in conn.execute(
                        "select pid from pg_stat_activity where application_name = %s"
                        " and datname = current_database()",
                        (PRODUCER,),
                    )
                ]
                self.most = max(self.most, len(pids))
                due = self.kill_every_s is not None and time.monotonic() - last_kill >= self.kill_every_s
                if due and pids:
                    conn.execute("select pg_terminate_backend(%s)", (pids[self.killed % len(pids)],))
                    self.killed += 1
                    last_kill = time.monotonic()


@pytest.mark.integration
def test_eight_producers_at_a_steady_rate_are_timed_and_split_and_survive_their_sessions_killed(
    cli: Cli, dsn: str, db: psycopg.Connection
) -> None:
    """-producers 8 at 300/s: eight sessions at once on the server, every enqueue timed (p50 to max,
    per second of the timeline, its parts), one transaction per message; a producer session ended by
    the server every 0.4 s is reconnected, its enqueue in doubt looked for, and the audit passes."""
    watch = Watch(dsn, kill_every_s=0.4)
    watch.start()
    try:
        result = cli.run(f"-fill-db 1500 -rate 300 -workers 6 -orders 40 -producers 8 {FAST} -json out.json")
    finally:
        watch.stop.set()
        watch.join(5)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert watch.most == 8, watch.most  # eight sessions of their own, at once
    assert watch.killed >= 5, watch.killed
    report = doc(cli)
    audit = report["audit"]
    assert audit["verdict"] == "pass" and audit["processed"] == 1500, audit
    assert audit["missing"] == audit["duplicates"] == 0
    journal = [r[0] for r in db.execute("select msg_id from msg_journal order by msg_id")]
    assert journal == list(range(1, 1501))
    enqueue = report["producer"]["enqueue"]
    assert enqueue["sessions"] == 8 and enqueue["batch"] == 1 and enqueue["count"] == 1500
    figures = enqueue["latency_ms"]
    assert 0 < figures["p50"] <= figures["p95"] <= figures["p99"] <= figures["max"], figures
    assert set(enqueue["parts"]) >= {"session"} and abs(sum(enqueue["parts"].values()) - 1) < 0.01
    assert any(name.startswith("server:") for name in enqueue["parts"]), enqueue["parts"]
    assert enqueue["slowest"]["count"] >= 15 and enqueue["slowest"]["mean_ms"] >= figures["p99"] * 0.8
    seconds = [s["enqueue_p99_ms"] for s in report["timeline"] if s["arrived"]]
    assert seconds and all(p is not None and p > 0 for p in seconds[:-1]), report["timeline"]
    # one enqueue a transaction, as an application's: the killed sessions' enqueues rewritten once
    assert report["server_cost"]["roles"]["producer"]["transactions_per_msg"] == 1.0
    losses = [c for c in report["server_reasons"] if "producer" in c["workers"]]
    assert losses and sum(c["sessions_ended"] for c in losses) >= 3, report["server_reasons"]
    text = " ".join(result.stdout.split())
    assert "enqueue ms" in text and "8 sessions: p50" in text, text


@pytest.mark.integration
def test_a_lock_on_the_queue_shows_in_the_enqueue_latency_named_with_its_holder(
    cli: Cli, dsn: str, db: psycopg.Connection
) -> None:
    """A session outside the run holds an exclusive lock on the queue for 4 s: every producer session
    waits on it, arrivals wait in the client, the enqueue p99 covers the wait, offered exceeds
    written in those seconds (no batch catches up: one transaction per message after it), and the
    verdicts name the lock's holder by pid and application."""
    holder: list[int] = []

    def hold() -> None:
        with psycopg.connect(dsn, application_name="nightly report") as conn:
            wait_for_producer(conn)
            time.sleep(1.5)
            conn.execute("lock table msg_queue in exclusive mode")
            holder.append(conn.info.backend_pid)
            time.sleep(4)
            conn.rollback()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    result = cli.run(f"-fill-db 1200 -rate 150 -workers 6 -orders 40 -producers 4 {FAST} -json out.json -v")
    thread.join(10)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert holder, "the lock was never taken"
    report = doc(cli)
    assert report["audit"]["verdict"] == "pass", report["audit"]
    enqueue = report["producer"]["enqueue"]
    assert enqueue["latency_ms"]["p99"] >= 2500, enqueue["latency_ms"]  # the lock's wait, measured
    stalled = [s for s in report["timeline"] if (s["offered"] or 0) > 0 and s["arrived"] == 0]
    assert len(stalled) >= 2, [(s["offered"], s["arrived"]) for s in report["timeline"]]
    assert report["producer"]["stalled_s"] >= 2
    assert report["server_cost"]["roles"]["producer"]["transactions_per_msg"] == 1.0  # no catch-up batch
    cause = report["enqueue_cause"]
    assert cause["resource"] == "locks", cause
    assert f"pid {holder[0]} (nightly report" in cause["evidence"], cause
    assert "ExclusiveLock on msg_queue" in cause["evidence"], cause
    assert "nightly report" in report["limit"]["evidence"], report["limit"]


@pytest.mark.integration
def test_one_producer_is_the_default_and_writes_one_message_per_transaction(cli: Cli) -> None:
    """The Go tool's single producer stays the default: one session, one transaction per message,
    timed like the others."""
    result = cli.run(f"-fill-db 400 -rate 200 -workers 3 {FAST} -json out.json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = doc(cli)
    enqueue = report["producer"]["enqueue"]
    assert enqueue["sessions"] == 1 and enqueue["count"] == 400, enqueue
    assert enqueue["parts"].get("group", 0) == 0  # one session: a key's last enqueue always committed
    assert report["server_cost"]["roles"]["producer"]["transactions_per_msg"] == 1.0
    assert report["audit"]["verdict"] == "pass"
    # the embedded server times the queue's triggers: the notify trigger, once per enqueue
    triggers = {t["function"]: t for t in enqueue["triggers"]}
    assert triggers["msg_queue_notify()"]["calls"] == 400, enqueue["triggers"]
    assert triggers["msg_queue_notify()"]["ms_per_call"] > 0


@pytest.mark.integration
def test_an_application_that_batches_says_so_and_its_batches_are_one_transaction(cli: Cli) -> None:
    """-enqueue-batch 20 behind a rate the single session cannot keep one by one (a trigger takes
    5 ms per statement): waiting messages go up to 20 in one COPY, and the producer keeps up."""
    slow_schema(cli, "statement")
    result = cli.run(
        f"-schema slow.sql -fill-db 900 -rate 300 -workers 3 {FAST} -enqueue-batch 20 -json out.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = doc(cli)
    assert report["producer"]["enqueue"]["batch"] == 20
    assert report["server_cost"]["roles"]["producer"]["transactions_per_msg"] < 0.5, report["server_cost"]
    assert report["audit"]["verdict"] == "pass"


@pytest.mark.integration
def test_a_sweep_knee_set_by_the_enqueue_half_says_so(cli: Cli) -> None:
    """One producer session behind a 5 ms trigger carries at most 200 enqueues a second: at 450/s
    arrivals wait in the client (seconds, by the step's end) and the enqueue p99 breaks -slo
    enqueue-p99=500 though the workers keep up; the knee is the lower step (at 40/s a loaded CI host
    still took 129 ms for its slowest enqueue) and the headline says the enqueue half set it."""
    slow_schema(cli, "row")
    result = cli.run(
        "-schema slow.sql -sweep rate=40,450 -step 3 -settle 3 -workers 6 -orders 40",
        FAST,
        "-slo e2e-p99=5000,enqueue-p99=500 -json out.json",
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    steps = doc(cli)["sweep"]["steps"]
    low, high = steps
    assert low["verdict"] == "pass" and low["enqueue_ms"]["p99"] < 500, (low["reasons"], low)
    assert high["verdict"] == "fail", high
    assert any(r.startswith("enqueue p99") for r in high["reasons"]), high["reasons"]
    text = " ".join(result.stdout.split())
    assert "max sustainable rate 40 msg/s" in text, text
    assert "the enqueue half set it" in text and "at 450 msg/s enqueue p99" in text, text


@pytest.mark.unit
def test_the_enqueue_options_are_refused_where_they_cannot_mean_anything(refuse: Refuse) -> None:
    assert_one_line_error(refuse("-fill-db 100 -producers 4"), 2, "-producers", "-rate")
    assert_one_line_error(refuse("-fill-db 100 -enqueue-batch 4"), 2, "-enqueue-batch", "-rate")
    assert_one_line_error(refuse("-fill-db 100 -rate 10 -producers 0"), 2, "-producers")
    assert_one_line_error(
        refuse("-fill-db 100 -rate 10 -producers 2 -delmsg -no-audit"), 2, "-producers 2", "-no-audit"
    )
    assert_one_line_error(refuse("-sweep rate=10,20 -slo enqueue-p99=x"), 2, "-slo", "enqueue-p99=MS")
