"""Traffic that looks like production, run for real: hot keys, many types, payloads that reach TOAST,
bursts, and a recorded day replayed; each audited, each replayed by its seed."""

from __future__ import annotations

import json
import math

import psycopg
import pytest
from checks import assert_exactly_once_in_order
from conftest import Cli, assert_one_line_error

from pgmq_sim.model.skew import zipf_share

pytestmark = pytest.mark.integration
FAST = "-claim indexed -work-ms 0-1 -poll-interval 0.02"


def doc(cli: Cli) -> dict:
    return json.loads((cli.workdir / "out.json").read_text())


def test_zipf_keys_give_the_hottest_key_its_share(cli: Cli, db: psycopg.Connection) -> None:
    n, orders, s = 6000, 1000, 1.2
    result = cli.run(
        f"-fill-db {n} -workers 6 -orders {orders} -key-skew zipf:{s} -seed 5 -json out.json -v", FAST
    )
    assert result.returncode == 0, result.stdout + result.stderr
    expected = zipf_share(orders, s)  # of its type's messages: key 1 of each type
    per_type = db.execute(
        "select queue_type, count(*) filter (where order_id = 1)::float / count(*) from msg_queue group by 1"
    ).fetchall()
    # 5 standard errors of a binomial share over each type's ~2000 messages
    tolerance = 5 * math.sqrt(expected * (1 - expected) / (n / 3))
    assert len(per_type) == 3 and all(abs(share - expected) < tolerance for _, share in per_type), per_type
    report = doc(cli)
    keys = report["keys"]
    assert keys["exact"] and keys["hottest"][0]["order_id"] == 1
    assert keys["expected_hot_share"] == pytest.approx(expected / 3, rel=1e-3)
    # the hottest group caps the run: the bound follows from its share, far below groups / work
    assert report["ordering_bound_per_s"] < report["groups"] / (report["work_mean_ms"] / 1000) / 5
    assert "hottest group 7.7% of messages: 13.0 groups' worth" in " ".join(result.stdout.split())
    assert report["audit"]["verdict"] == "pass"
    assert_exactly_once_in_order(db, n, delmsg=False)


def test_payloads_reach_the_table_and_toast(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run("-fill-db 600 -workers 3 -payload-bytes 3000-5000 -json out.json", FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    low, high, distinct = db.execute(
        "select min(octet_length(payload)), max(octet_length(payload)), count(distinct md5(payload))"
        " from msg_queue"
    ).fetchone()
    assert low >= 3000 and high <= 5000 and distinct == 600  # random: no two alike
    report = doc(cli)
    assert report["table"]["toast_bytes"] > 600 * 3000  # incompressible, out of line
    assert report["settings"]["payload_bytes"] == "3000-5000"
    assert report["audit"]["verdict"] == "pass"


def test_a_schema_without_a_payload_column_is_refused_before_anything_changes(
    cli: Cli, db: psycopg.Connection
) -> None:
    (cli.workdir / "bare.sql").write_text(
        "drop table if exists msg_queue;\n"
        "create table msg_queue(msg_id integer not null, queue_type varchar(10) not null,"
        " status varchar(1) not null, order_id integer not null, time_added timestamptz not null,"
        " time_processed timestamptz);\n"
    )
    assert cli.run("-fill-db 30 -workers 3 -work-ms 0").returncode == 0
    result = cli.run("-schema bare.sql -fill-db 30 -workers 3 -payload-bytes 100")
    assert_one_line_error(result, 2, "-payload-bytes needs a payload column", "bare.sql")
    assert db.execute("select count(*) from msg_queue").fetchone()[0] == 30  # the last run's queue, kept


def test_a_burst_profile_shapes_the_arrivals(cli: Cli) -> None:
    """100/s, with 400/s more for 1 s every 3 s: seconds 0, 3 and 6 offer 500, the others 100 (eight
    producer sessions, as an application meets a burst: one enqueue each, 500 in a second)."""
    result = cli.run(
        "-rate 100 -rate-profile burst:400*1s/3s -duration 7.5 -producers 8 -workers 6 -orders 50",
        FAST,
        "-json out.json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    timeline = doc(cli)["timeline"]
    offered = [s["offered"] or 0 for s in timeline[:7]]
    want = [500, 100, 100, 500, 100, 100, 500]
    assert all(abs(got - due) <= 2 for got, due in zip(offered, want, strict=True)), offered
    arrived = [s["arrived"] for s in timeline[:7]]
    for second in (0, 3, 6):
        assert arrived[second] > 350, arrived  # written in the burst's own second
    for second in (1, 2, 4, 5):
        assert arrived[second] < 200, arrived
    assert doc(cli)["audit"]["verdict"] == "pass"


def test_a_recorded_day_replays_faster(cli: Cli) -> None:
    day = cli.workdir / "day.csv"
    day.write_text("second,rate\n0,100\n3600,300\n7200,100\n10800,0\n")  # three hours of a day
    # four producer sessions: one enqueue at a time, a loaded host's single session fell behind the
    # 300/s hour (483 of 500 written when the profile ended), and the replay's shape is what is tested
    result = cli.run(
        "-rate-profile day.csv -speed 3600 -workers 6 -orders 50 -producers 4 -json out.json", FAST
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = doc(cli)
    # three recorded hours at 3600x: three seconds, of 100, 300 and 100 messages
    assert report["produced"] == 500 and report["target"] is None
    assert [s["offered"] for s in report["timeline"][:3]] == [100, 300, 100]
    assert report["audit"]["verdict"] == "pass"


def test_ten_types_are_all_processed(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run("-fill-db 1000 -types 10 -workers 10 -orders 3 -json out.json", FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    report = doc(cli)
    assert sorted(report["processed_per_type"]) == sorted(f"type{i}" for i in range(1, 11))
    assert all(n > 0 for n in report["processed_per_type"].values())
    assert {w["queue_type"] for w in report["workers"]} == {f"type{i}" for i in range(1, 11)}
    assert db.execute("select count(distinct queue_type) from msg_journal").fetchone()[0] == 10
    assert_exactly_once_in_order(db, 1000, delmsg=False)


def test_the_seed_replays_the_same_messages(cli: Cli, db: psycopg.Connection) -> None:
    shape = "-types 4 -orders 200 -key-skew zipf:1.1 -payload-bytes 10-50 -seed 77"

    def messages() -> list[tuple[object, ...]]:
        rows = db.execute("select msg_id, queue_type, order_id, md5(payload) from msg_queue order by msg_id")
        return rows.fetchall()

    assert cli.run(f"-fill-db 500 -workers 4 {shape}", FAST).returncode == 0
    first = messages()
    assert cli.run(f"-fill-db 500 -rate 1000 -workers 4 {shape}", FAST).returncode == 0  # other batches
    assert messages() == first and len(first) == 500


def test_shapes_hold_across_processes_and_split_transactions(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run(
        "-fill-db 1200 -rate-profile step:300,600/1s -workers 6 -types 5 -orders 40 -key-skew zipf:1.1",
        "-payload-bytes 200 -tx split --processes 2 -json out.json",
        FAST,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = doc(cli)
    assert report["audit"]["verdict"] == "pass" and report["processed"] == 1200
    assert {w["runner"].split("@")[0] for w in report["workers"]} == {"p1", "p2"}
    assert db.execute("select count(distinct queue_type) from msg_journal").fetchone()[0] == 5
    settings = report["settings"]
    assert (settings["types"], settings["key_skew"], settings["payload_bytes"]) == (5, "zipf:1.1", "200")
    assert settings["rate_profile"] == "step:300,600/1s"
    log = (cli.workdir / "msg_queue.log").read_text()
    assert "zipf:1.1" in log and "step:300,600/1s" in log
