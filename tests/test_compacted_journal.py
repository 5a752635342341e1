"""The journal kept bounded (issue 50): with -compact-journal, once the latency account is kept as the
run goes, a closed window's journal rows are deleted when it passed and the account read them, so the
journal holds the open windows only; the audit still counts every message, the account is still
given, and a completion of a compacted message after its window closed is still found, as the
duplicate it is. Without the flag, or where the end reads the rows again, the journal is whole."""

from __future__ import annotations

import itertools
import json
import threading

import psycopg
import pytest
from conftest import Cli

pytestmark = pytest.mark.integration

MESSAGES = 20000  # 20 s at 1,000/s: a row goes 10 s after its completion at the earliest
BASE = "-rate 1000 -workers 6 -orders 30 -claim indexed -account-live-from 0 -reconnect-timeout 0"
RUN = f"{BASE} -fill-db {MESSAGES} -audit-window 0.5"  # a row kept 10 s after its completion, not 70
FEW = f"{BASE} -fill-db 3000"  # where the note says why nothing is compacted
COMPACT = f"{RUN} -compact-journal"


class JournalSizes:
    """The journal's rows, sampled every 0.2 s on a session of the test's own while in its block."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.sizes, self._stop = dsn, list[int](), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> list[int]:
        self._thread.start()
        return self.sizes

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _sample(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.wait(0.2):
                row = conn.execute("select to_regclass('msg_journal') is not null").fetchone()
                if row and row[0]:
                    count = conn.execute("select count(*) from msg_journal").fetchone()
                    self.sizes.append(int(count[0]) if count else 0)


def test_the_journal_holds_the_open_windows_only_and_a_late_completion_of_a_compacted_message_counts(
    cli: Cli, dsn: str
) -> None:
    """The journal keeps the open windows only, every message counted once; then (one run for both)
    it cannot be judged whole again once compacted: a row of a compacted message journaled after its
    window closed (planted: the first compacted one completed again) is counted as the duplicate it
    is, and the rest of the run is not found missing."""
    with JournalSizes(dsn) as sizes:
        result = cli.run(f"{COMPACT} -json out.json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    live = report["live_audit"]
    compacted = live["journal_compacted_rows"]
    assert compacted > 0 and live["compaction_stopped"] is None, live
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from msg_journal").fetchone()
    left = int(row[0]) if row else 0
    assert left + compacted == MESSAGES, (left, compacted)  # every completion journaled, once
    assert report["audit"]["verdict"] == "pass" and report["audit"]["processed"] == MESSAGES, report["audit"]
    # rows were deleted while the run went, and what is left is the last windows'
    assert any(later < earlier for earlier, later in itertools.pairwise(sizes)), sizes
    assert left <= MESSAGES * 3 // 4 and max(sizes) < MESSAGES, (left, max(sizes))
    split = report["latency_split"]
    assert split["live_chunks"] >= 2 and split["overall"], split  # the account read them first
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select min(g) from generate_series(1, (select max(hi) from pgmq_sim_windows)) g"
            " where not exists (select 1 from msg_journal j where j.msg_id = g)"
        ).fetchone()
        assert row is not None and row[0] is not None, "nothing was compacted"
        conn.execute("create temp table again as select * from msg_journal limit 1")
        conn.execute("update again set msg_id = %s", (row[0],))
        conn.execute("insert into msg_journal select * from again")
    audited = cli.audit("-dsn", cli.dsn, "-json", "audit.json")
    assert audited.returncode != 0, audited.stdout + audited.stderr
    audit = json.loads((cli.workdir / "audit.json").read_text())["audit"]
    assert (audit["duplicates"], audit["missing"], audit["processed"]) == (1, 0, MESSAGES), audit
    assert "counted as duplicates" in audited.stdout + audited.stderr, audited.stdout


@pytest.mark.parametrize(
    ("flags", "messages", "said"),
    [
        (RUN, MESSAGES, None),  # long enough that it would compact (as the test above does)
        (
            f"{FEW} -audit-window 0.5 -compact-journal -fail-rate 0.05",
            3000,
            "the end reads every failed attempt's group",
        ),
        (f"{FEW} -audit-window 0 -compact-journal", 3000, "no live audit closes windows"),
    ],
    ids=["not-asked", "retries", "no-windows"],
)
def test_unasked_or_where_the_end_reads_it_again_every_row_stays(
    cli: Cli, dsn: str, flags: str, messages: int, said: str | None
) -> None:
    result = cli.run(f"{flags} -json out.json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    assert (report["live_audit"] or {}).get("journal_compacted_rows", 0) == 0, report["live_audit"]
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(distinct msg_id) from msg_journal").fetchone()
    assert row is not None and row[0] == messages
    notes = [n for n in report["notes"] if n.startswith("-compact-journal")]
    assert (notes == []) if said is None else (said in notes[0]), report["notes"]
