"""What a team keeps running after launch: a long run's drift, live metrics for Prometheus, and a
run that stops at the first breach of a check that can only get worse."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from conftest import Cli, Refuse, assert_one_line_error
from prometheus_client import CollectorRegistry, generate_latest
from psycopg.conninfo import make_conninfo

from pgmq_sim.cli.command import main as cli_main
from pgmq_sim.model.census import CensusSetting, ServerCensus, SlotCensus
from pgmq_sim.model.facts import TablePulse
from pgmq_sim.render.metrics import MetricsObserver, RunCollector
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.observer import LiveFigures
from pgmq_sim.result.snapshots import SnapshotWatch
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.settings import parse_listen_address
from pgmq_sim.verdicts.drift import judge_drift, least_squares


def seconds(
    minutes: int, p99: float, p99_per_minute: float = 0.0, table_mb: float = 2.0
) -> list[SecondSample]:
    """A run's seconds: 300 msg/s, p99 rising as asked, a table whose autovacuum runs each minute."""
    out = []
    for second in range(minutes * 60):
        minute = second // 60
        noise = (second * 7919 % 13) / 13 - 0.5  # a wobble, as a real run has
        out.append(
            SecondSample(
                second, 300, 300, 3, 5.0, 8.0, p99 + p99_per_minute * minute + noise,
                dead_tuples=500 + (second % 60) * 10, offered=300, table_mb=table_mb, autovacuums=minute,
                snapshot_age_s=0.1, rss_mb=60.0 + noise,
            )
        )  # fmt: skip
    return out


@pytest.mark.unit
def test_a_long_steady_run_is_stable_and_a_rising_p99_drifts() -> None:
    assert judge_drift(seconds(9, 20.0), 9 * 60) is None  # under ten minutes: no drift section
    assert judge_drift(seconds(9, 20.0), 9 * 60, asked=True) is not None  # unless -drift
    steady = judge_drift(seconds(12, 20.0), 12 * 60)
    assert steady is not None and steady.verdict == "stable" and len(steady.windows) == 12
    assert steady.window_s == 60 and steady.autovacuums == 11
    # 20 ms rising 0.2 ms a minute: about +55% of its mean per hour
    rising = judge_drift(seconds(12, 20.0, 0.2), 12 * 60)
    assert rising is not None and rising.verdict == "drifting"
    assert [d.split()[0] for d in rising.drifting] == ["p99"], rising.drifting
    trend = rising.trend("e2e_p99")
    assert trend is not None and 0.45 < trend.share_per_hour < 0.65 and trend.p < 0.01


@pytest.mark.unit
@pytest.mark.parametrize("noise", [0.0, 0.5, 5.0, 50.0])
def test_the_drift_line_and_its_p_value_are_linregress(noise: float) -> None:
    """The trend's slope and p-value are scipy.stats.linregress's (the tool imports only scipy's t
    distribution: scipy.stats cost the run's end 75 MB): a clean line, a noisy one, and noise."""
    from random import Random

    from scipy.stats import linregress

    rng = Random(7)
    xs = [30.0 + 60 * i for i in range(12)]
    ys = [100 + 0.01 * x + rng.gauss(0, noise) for x in xs]
    slope, p = least_squares(xs, ys)
    fit = linregress(xs, ys)
    assert slope == pytest.approx(fit.slope, rel=1e-9)
    assert p == pytest.approx(fit.pvalue, rel=1e-6, abs=1e-12)  # an exact line: 0 or 1e-79


@pytest.mark.unit
def test_the_drift_line_leaves_scipy_stats_unimported() -> None:
    """75 MB of the tool's memory at every long run's end, for a line."""
    code = (
        "import sys; from pgmq_sim.verdicts.drift import least_squares;"
        " least_squares([0, 1, 2, 3], [1, 2, 2, 4]); print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False", out


@pytest.mark.unit
def test_a_table_growing_before_any_autovacuum_is_not_judged_and_after_one_it_is() -> None:
    def growing(vacuums: Callable[[int], int], seconds: int = 12 * 60) -> list[SecondSample]:
        return [
            SecondSample(s, 300, 300, 3, 5.0, 8.0, 20.0, table_mb=2 + s / 60, autovacuums=vacuums(s),
                         snapshot_age_s=0.1, rss_mb=60.0)
            for s in range(seconds)
        ]  # fmt: skip

    unvacuumed = judge_drift(growing(lambda s: 0), 12 * 60)
    assert unvacuumed is not None and unvacuumed.verdict == "stable" and unvacuumed.trend("table") is None
    assert "not judged: no autovacuum" in unvacuumed.table_note, unvacuumed.table_note
    vacuumed = judge_drift(growing(lambda s: s // 60), 12 * 60)
    assert vacuumed is not None and vacuumed.verdict == "drifting", vacuumed.drifting
    assert vacuumed.drifting[0].startswith("table +60 MB per hour"), vacuumed.drifting
    assert "judged from the first autovacuum (in the window from 60 s)" in vacuumed.table_note
    # a minute judged by tenths: one autovacuum at 30 s, and the table grows on until the next one
    short = judge_drift(growing(lambda s: int(s >= 30), 60), 60, asked=True)
    assert short is not None and short.verdict == "stable" and short.trend("table") is None, short.drifting
    assert "not judged: fewer than two autovacuums" in short.table_note, short.table_note
    judged = judge_drift(growing(lambda s: int(s >= 12) + int(s >= 24), 60), 60, asked=True)
    assert judged is not None and judged.trend("table") is not None and judged.verdict == "drifting"


@pytest.mark.unit
def test_autovacuum_off_is_named_with_its_dead_tuples_and_growth_and_never_stable() -> None:
    """Issue 43, case 3: autovacuum off on the server, 0 autovacuums, a table growing: read before the
    run, it is named (the setting and where it is set) with the dead tuples and the growth per hour,
    however short the run, and neither "stable" nor "not judged: no autovacuum"."""
    switch = CensusSetting("autovacuum", "off", "configuration file", "/srv/pg/postgresql.auto.conf", 3)
    census = ServerCensus("q", "q", (switch,), (), SlotCensus((), "q", True), "readable", 1.0)
    off = "autovacuum = off (the server's configuration file (/srv/pg/postgresql.auto.conf:3))"
    for minutes, asked in ((12, False), (1, True)):
        samples = [
            SecondSample(s, 800, 800, 3, 5.0, 8.0, 20.0, dead_tuples=160 * s, table_mb=0.88 + s * 0.064,
                         autovacuums=0, snapshot_age_s=0.1, rss_mb=60.0)
            for s in range(minutes * 60)
        ]  # fmt: skip
        report = judge_drift(samples, minutes * 60, asked=asked, census=census)
        assert report is not None and report.verdict == "drifting", report
        (named,) = report.drifting  # the table's growth is said once, with its cause
        assert named.startswith(f"autovacuum off ({off}): dead tuples "), named
        assert "MB, +230 MB per hour; nothing reclaims them" in named, named
        assert "not judged" not in report.table_note and "autovacuum off" in report.table_note
        unknown = judge_drift(samples, minutes * 60, asked=asked)  # the setting not read: as before
        assert unknown is not None and "not judged" in unknown.table_note
        # autovacuum on, but it looks every 10 minutes: the table is not judged, and the note says why
        naptime = CensusSetting("autovacuum_naptime", "10min", "configuration file")
        on = dataclasses.replace(census, settings=(CensusSetting("autovacuum", "on", "default"), naptime))
        waited = judge_drift(samples, minutes * 60, asked=asked, census=on)
        assert waited is not None and "not judged" in waited.table_note
        assert "autovacuum looks every 10min (the server's configuration file (" in waited.table_note


@pytest.mark.unit
def test_a_short_wobble_is_not_a_drift_however_steep_per_hour() -> None:
    # 60 s judged in tenths: memory 60 -> 62 MB is +200% per hour but 3% over the run
    samples = [
        SecondSample(s, 100, 100, 1, 3.0, 5.0, 9.0, table_mb=1.0, autovacuums=0, snapshot_age_s=0.0,
                     rss_mb=60 + s / 30)
        for s in range(60)
    ]  # fmt: skip
    report = judge_drift(samples, 60, asked=True)
    assert report is not None and report.verdict == "stable", report.drifting
    rss = report.trend("rss")
    assert rss is not None and rss.share_per_hour > 1 and rss.p < 0.01 and not rss.drifting


def soak(
    holder: Callable[[int], tuple[int, str] | None],
    dead: Callable[[int], int],
    rss: Callable[[int], float],
    minutes: int = 15,
) -> list[SecondSample]:
    """A run at 800/s whose pulses name, each second, the oldest snapshot's holder and xmin (None:
    no session holds one), timed as the housekeeper times it (the same xmin in consecutive samples)."""
    watch, out = SnapshotWatch(), []
    for second in range(minutes * 60):
        held = holder(second)
        pid, xmin = held if held is not None else (None, None)
        pulse = TablePulse(dead(second), pid, "pgmq-sim", xmin, None, 12, 6_100_000, second // 60)
        age = watch.see(float(second), pulse)
        noise = (second * 7919 % 13) / 13 - 0.5
        out.append(
            SecondSample(second, 800, 800, 5, 5.0, 9.0, 12.4 + noise, dead_tuples=dead(second), offered=800,
                         table_mb=5.82, autovacuums=second // 60, snapshot_age_s=round(age, 1),
                         rss_mb=rss(second))
        )  # fmt: skip
    return out


def flattening_rss(second: int) -> float:
    """The issue's soak: 52.7 -> 59.2 MB in the first 5 minutes, 59.2 -> 61.5 in the next five,
    61.5 -> 62.0 in the last five."""
    for start, low, high in ((600, 61.5, 62.0), (300, 59.2, 61.5), (0, 52.7, 59.2)):
        if second >= start:
            return low + (high - low) * (second - start) / 300
    raise AssertionError(second)


def vacuumed(second: int) -> int:
    """Dead tuples between 93k and 95k: each autovacuum removes what the last minute left."""
    return 93_000 + (second % 60) * 33


@pytest.mark.unit
def test_a_flattening_rss_and_a_transaction_without_a_held_snapshot_are_stable() -> None:
    """The listener's notification reads date from its LISTEN (xact_start at the run's start) but
    each takes a fresh snapshot for a moment: seen now and then, never the same xmin twice; the
    workers' statements hold theirs for milliseconds; an open transaction without a snapshot shows
    none. With a memory curve that flattens, the run is stable."""

    def holders(second: int) -> tuple[int, str] | None:
        if second % 450 in (0, 1):
            return 99, str(70_000 + second)  # the listener, reading notifications: a new xmin each time
        return (100 + second % 12, str(80_000 + second)) if second % 3 else None  # workers, or nobody

    report = judge_drift(soak(holders, vacuumed, flattening_rss), 900)
    assert report is not None and report.verdict == "stable", report.drifting
    assert report.snapshot_max_s == 0.0, report.snapshot_max_s
    rss = report.trend("rss")
    assert rss is not None and not rss.drifting and abs(rss.share_per_hour) < 0.2, rss
    assert rss.first > 61.5, rss  # judged from its last third, after the warm-up


@pytest.mark.unit
def test_a_held_snapshot_with_dead_tuples_rising_behind_it_drifts_and_one_without_does_not() -> None:
    """The same backend_xmin from 60 s to the end: with dead tuples piling up behind it (vacuum can
    remove none) the run drifts and says so with both figures; held while the dead tuples stay as
    vacuum leaves them, it held nothing back: stable, with a note."""

    def report_job(second: int) -> tuple[int, str] | None:
        return (4242, "61000") if second >= 60 else (100, str(80_000 + second))

    piling = judge_drift(soak(report_job, lambda s: 93_000 + 800 * max(0, s - 60), flattening_rss), 900)
    assert piling is not None and piling.verdict == "drifting", piling
    assert piling.snapshot_max_s is not None and piling.snapshot_max_s >= 830, piling.snapshot_max_s
    (snapshot,) = [line for line in piling.drifting if "snapshot" in line]
    assert snapshot.startswith("a snapshot held 839 s while dead tuples rose"), snapshot
    assert "vacuum could remove nothing behind it" in snapshot
    harmless = judge_drift(soak(report_job, vacuumed, flattening_rss), 900)
    assert harmless is not None and harmless.verdict == "stable", harmless.drifting
    assert "a snapshot held 839 s, but dead tuples did not rise behind it" in harmless.table_note


@pytest.mark.unit
def test_a_tool_that_leaks_still_drifts_when_judged_by_its_late_slope() -> None:
    """Memory rising at the same pace to the end is a leak, whatever the warm-up."""
    leaking = judge_drift(soak(lambda s: None, vacuumed, lambda s: 52.7 + s / 30), 900)
    assert leaking is not None and leaking.verdict == "drifting", leaking
    assert [d.split(" +")[0] for d in leaking.drifting] == ["tool RSS (last third)"], leaking.drifting


@pytest.mark.unit
def test_latencies_go_to_prometheus_as_cumulative_buckets_with_their_sum() -> None:
    histogram = LatencyHistogram()
    for ms in (1.0, 3.0, 30.0, 30.0):
        histogram.record_ms(ms)
    counts, total_ms = histogram.cumulative_ms((2, 5, 50, 100))
    assert counts == [1, 2, 4, 4]
    assert abs(total_ms - 64.0) < 0.5


@pytest.mark.unit
def test_latency_histograms_are_served_in_seconds_on_the_same_bucket_edges() -> None:
    workers = [WorkerStats(name="w1", queue_type="type1"), WorkerStats(name="w2", queue_type="type2")]
    for ms, worker in ((1.0, 0), (3.0, 1), (30.0, 0), (30.0, 1)):
        workers[worker].e2e.record_ms(ms)
    workers[0].claim.record_ms(0.5)
    registry = CollectorRegistry()
    registry.register(RunCollector(LiveFigures(workers=workers, target=None, produced=lambda: 4)))
    text = generate_latest(registry).decode()
    assert "_latency_ms" not in text
    lines = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[0] != "#"
    }
    e2e = "pgmq_sim_e2e_latency_seconds"
    edges = [key.split('le="')[1][:-2] for key in lines if key.startswith(e2e + "_bucket")]
    # the edges of the old _ms histograms (1 ms ... 30 s), in seconds
    assert edges == ["0.001", "0.002", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5",
                     "5.0", "10.0", "30.0", "+Inf"]  # fmt: skip
    assert lines[f'{e2e}_bucket{{le="0.002"}}'] == 1 and lines[f'{e2e}_bucket{{le="0.005"}}'] == 2
    assert lines[f'{e2e}_bucket{{le="0.025"}}'] == 2 and lines[f'{e2e}_bucket{{le="0.05"}}'] == 4
    assert lines[f"{e2e}_count"] == 4 and abs(lines[f"{e2e}_sum"] - 0.064) < 0.0005
    assert lines['pgmq_sim_claim_latency_seconds_bucket{le="0.001"}'] == 1


@pytest.mark.unit
@pytest.mark.parametrize(
    "text,expected",
    [("9100", (None, 9100)), ("0", (None, 0)), ("127.0.0.1:9100", ("127.0.0.1", 9100)),
     ("localhost:0", ("localhost", 0)), ("[::1]:9100", ("::1", 9100))],
)  # fmt: skip
def test_a_metrics_address_is_a_port_or_a_host_and_a_port(
    text: str, expected: tuple[str | None, int]
) -> None:
    assert parse_listen_address(text, "-metrics-port") == expected


@pytest.mark.unit
@pytest.mark.parametrize(
    "text", ["localhost", "::1:9100", "70000", ":9100", "host:", "[::1]", "a b:1", "x:-1"]
)
def test_a_bad_metrics_address_is_one_line_and_exit_2(
    text: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["pgmq-sim", "-fill-db", "10", "-metrics-port", text])
    with pytest.raises(SystemExit) as ended:
        cli_main()  # refused while the flags are read: no server is started
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"-metrics-port '{text}' is not [HOST:]PORT" in err and "127.0.0.1:9100" in err, err


class Quiet:
    def say(self, line: str) -> None: ...
    def watching(self, figures: LiveFigures) -> None: ...
    def tick(self) -> None: ...
    def stopped_watching(self) -> None: ...


def reaches(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


@pytest.mark.unit
def test_a_metrics_host_keeps_the_endpoint_off_other_interfaces() -> None:
    """127.0.0.2 is this host too (the loopback is 127/8): it reaches every interface's endpoint, and
    not one kept to 127.0.0.1."""
    everywhere = MetricsObserver(None, 0, Quiet())
    loopback = MetricsObserver("127.0.0.1", 0, Quiet())
    try:
        assert everywhere.url == f"http://0.0.0.0:{everywhere.port}/metrics"
        assert loopback.url == f"http://127.0.0.1:{loopback.port}/metrics"
        assert reaches("127.0.0.2", everywhere.port) and reaches("127.0.0.1", everywhere.port)
        assert reaches("127.0.0.1", loopback.port) and not reaches("127.0.0.2", loopback.port)
    finally:  # each close waits out its server's poll (half a second): both at once
        closing = [threading.Thread(target=observer.close) for observer in (everywhere, loopback)]
        for thread in closing:
            thread.start()
        for thread in closing:
            thread.join()


@pytest.mark.integration
@pytest.mark.alone
def test_a_held_snapshot_growing_table_drifts_and_a_steady_run_is_stable(cli: Cli, server_dsn: str) -> None:
    """Two 60 s runs side by side, each in a database of its own: no -delmsg and a snapshot held
    from 2 s to the end (the table grows, vacuum can remove nothing), and -delmsg unheld."""
    base = "-duration 60 -rate 60 -workers 3 -work-ms 1-2 -orders 50 -claim indexed -wakeup notify -drift"
    steady_db = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"create database {steady_db}")
    steady_dsn = make_conninfo(server_dsn, dbname=steady_db)
    runs = {
        "growing": subprocess.Popen(
            cli.command(base, "-chaos hold-xmin@2s+70s -check table-drift<50%/h -json growing.json"),
            cwd=cli.workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env(),
        ),
        "steady": subprocess.Popen(
            [*cli.command(base, "-delmsg -check throughput-drift>-50%/h -json steady.json", dsn=False),
             "-dsn", steady_dsn],
            cwd=cli.workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env(),
        ),
    }  # fmt: skip
    outputs = {name: proc.communicate(timeout=150) for name, proc in runs.items()}
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"drop database {steady_db} with (force)")
    growing = json.loads((cli.workdir / "growing.json").read_text())
    steady = json.loads((cli.workdir / "steady.json").read_text())
    assert runs["growing"].returncode == 4, outputs["growing"]  # the table-drift check breached
    assert growing["drift"]["verdict"] == "drifting", growing["drift"]
    assert any(d.startswith("table +") for d in growing["drift"]["drifting"]), growing["drift"]["drifting"]
    assert any("a snapshot held" in d for d in growing["drift"]["drifting"])
    assert "drifting:" in outputs["growing"][0] and "checks breached: table-drift<50" in outputs["growing"][0]
    assert runs["steady"].returncode == 0, outputs["steady"][0][-3000:]
    assert steady["drift"]["verdict"] == "stable", steady["drift"]
    assert steady["audit"]["verdict"] == growing["audit"]["verdict"] == "pass"


@pytest.mark.unit
@pytest.mark.parametrize(
    "args,needles",
    [
        ("-duration 60 -rate 10 -check p99-drift<10%/h", ["produces no p99-drift", "-duration 600"]),
        ("-duration 30 -rate 10 -drift", ["-drift needs a run of at least 60 s"]),
        ("-sweep rate=auto -drift", ["-drift judges a run at one setting"]),
    ],
)
def test_a_drift_needs_a_long_run_at_one_setting(refuse: Refuse, args: str, needles: list[str]) -> None:
    assert_one_line_error(refuse(args), 2, *needles)


@pytest.mark.integration
def test_drift_asked_of_a_run_that_ends_early_says_it_was_not_judged(cli: Cli) -> None:
    result = cli.run("-fill-db 50 -workers 3 -drift -json out.json")  # a drain: seconds, not 60
    assert result.returncode == 0, result.stdout + result.stderr
    assert "-drift: not judged: the run lasted" in result.stdout, result.stdout
    assert json.loads((cli.workdir / "out.json").read_text())["drift"] is None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.integration
@pytest.mark.parametrize("runner", ["", "--processes 2"], ids=["threads", "fleet"])
def test_live_metrics_are_served_for_as_long_as_the_run_lasts(cli: Cli, runner: str) -> None:
    """With --processes (a master and its workers) the master serves the whole fleet's figures."""
    port = free_port()
    argv = cli.command(
        "-duration 3 -rate 100 -workers 4 -claim indexed -wakeup notify",  # 3 s: a dozen scrapes
        f"-metrics-port {port} -json m.json {runner}",
    )
    proc = subprocess.Popen(argv, cwd=cli.workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        scraped: list[str] = []
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
                    scraped.append(answer.read().decode())
            except OSError:
                pass
            time.sleep(0.2)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err
    report = json.loads((cli.workdir / "m.json").read_text())
    during = [text for text in scraped if "pgmq_sim_processed_total" in text]
    assert len(during) >= 3, scraped[-1:]

    def value(text: str, name: str) -> float:
        return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))

    processed = [value(text, "pgmq_sim_processed_total") for text in during]
    assert processed[-1] > processed[0] and processed == sorted(processed), processed
    # the endpoint lasts to the end of the run: its last scrape is within a second of arrivals
    # (100) of the report's count, though the drain may finish between two scrapes
    assert report["processed"] - 100 <= processed[-1] <= report["processed"], (processed, report["processed"])
    for name in (
        "pgmq_sim_produced_total",
        "pgmq_sim_backlog",
        "pgmq_sim_e2e_latency_seconds_bucket",
        "pgmq_sim_claim_latency_seconds_count",
        "pgmq_sim_worker_busy_seconds",
        "pgmq_sim_connections_lost_total",
    ):
        assert name in during[-1], name  # fmt: skip
    for worker in ("w1", "w2", "w3", "w4"):  # every worker's busy time, wherever it runs
        assert f'worker="{worker}"}}' in during[-1], during[-1]
    with pytest.raises(OSError):  # the run is over: so is the endpoint
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


@pytest.mark.unit
def test_a_taken_metrics_port_is_refused_before_the_run(refuse: Refuse) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_one_line_error(
            refuse(f"-fill-db 10 -metrics-port {port}"), 2, f"-metrics-port {port}", "free port"
        )


@pytest.mark.integration
def test_check_abort_ends_the_run_at_the_first_lost_connection(cli: Cli) -> None:
    result = cli.run(
        "-duration 30 -rate 100 -workers 3 -claim indexed -poll-interval 0.05",
        "-chaos kill-connection/2s -check lost==0 -check-abort -json out.json",
    )
    assert result.returncode == 4, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    assert report["elapsed_s"] < 10 and report["audit"]["verdict"] == "pass"
    assert any("-check-abort: lost==0 breached" in note for note in report["notes"])
    assert [c["passed"] for c in report["checks"]] == [False]


@pytest.mark.unit
def test_check_abort_without_a_check_it_can_act_on_is_refused(refuse: Refuse) -> None:
    assert_one_line_error(refuse("-fill-db 10 -check-abort"), 2, "-check-abort acts on -check lost")


@pytest.mark.unit
def test_a_baseline_of_other_settings_is_refused_before_the_run(refuse: Refuse, tmp_path: Path) -> None:
    (tmp_path / "base.json").write_text(
        json.dumps({"settings": {"claim": "seed", "workers": 12}, "throughput_per_s": 1.0})
    )
    assert_one_line_error(
        refuse("-fill-db 10 -workers 3 -claim indexed -baseline base.json"),
        2, "-baseline base.json ran other settings", "claim: seed -> indexed", "pgmq-sim diff",
    )  # fmt: skip
