"""Episodes judged from a timeline built by hand (no server): the soak of issue 50, whose whole-run
verdict said nothing of 140 s of notify runs in another database, and the cases around it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from builders import settings

from pgmq_sim.model.events import Fault
from pgmq_sim.model.facts import NOTIFY_QUEUE
from pgmq_sim.model.kinds import Outcome
from pgmq_sim.result.holders import HolderSeen, LockCensus
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.result.waits import SLICES_MOST, WaitTally
from pgmq_sim.verdicts.episodes import EPISODE_FLOOR_MS, episodes, window_length
from pgmq_sim.verdicts.verdict import judge_run

pytestmark = pytest.mark.unit

SOAK_S = 2400  # 40 minutes at 800/s, p99 15 ms a second, but for 140 s from 1200 s
NOTIFIER = HolderSeen(
    8123, "billing notifier", "active", 1201.0, 1339.5, 270, 0, 0, "", 0.02, "pgmq-sim w1, pgmq-sim w2",
    "billing", NOTIFY_QUEUE,
)  # fmt: skip


def soak(*, bad: tuple[int, int] = (1200, 1340), p99_ms: float = 21_800.0, **measured: Any) -> RunResult:
    seconds = [
        SecondSample(s, 800, 800, 0, 6.0, 11.0, p99_ms if bad[0] <= s < bad[1] else 15.0, offered=800)
        for s in range(SOAK_S)
    ]
    return RunResult.from_stats(
        settings=settings(rate=800.0, duration=float(SOAK_S), fill_db=None),
        server="test",
        strategy="seed",
        ordered=True,
        files={},
        produced=800 * SOAK_S,
        elapsed_s=float(SOAK_S),
        outcome=Outcome.COMPLETED,
        stats=[WorkerStats(name="w1", queue_type="type1")],
        timeline=seconds,
        health=None,
        audit=None,
        **measured,
    )


def test_the_soaks_notify_runs_in_another_database_are_one_episode_naming_the_notifier() -> None:
    """The measured bug: the whole run's verdict said `none` and 'stable'; the episode says when, how
    much worse, and whose notifications held the notification queue's lock."""
    run = soak(locks=LockCensus(4800, 0, (NOTIFIER,)))
    verdict = judge_run(run)
    assert verdict.limit.resource == "none", verdict.limit  # the whole run averages it away
    found = verdict.episodes
    assert found == episodes(run) and len(found) == 1, found
    episode = found[0]
    assert window_length(SOAK_S) == 20
    assert (episode.from_s, episode.to_s) == (1200, 1340), episode
    assert episode.p99_ms == 21_800.0 and episode.baseline_p99_ms == 15.0
    assert episode.cause.resource == "locks"
    assert "pid 8123 (billing notifier; in database billing; active)" in episode.cause.evidence
    assert "the notification queue" in episode.cause.evidence
    assert episode.cause.fix and "move the other notifying applications" in episode.cause.fix  # not one pid
    assert episode.text().startswith("from 1200 s to 1340 s: p99 21.8 s against the run's 15 ms; locks: ")
    assert episode.as_json()["limit"] == "locks" and episode.as_json()["from_s"] == 1200


def test_an_episode_nothing_measured_explains_is_unexplained_never_none() -> None:
    (episode,) = episodes(soak(locks=LockCensus(4800, 0, ())))
    assert episode.cause.resource == "unexplained", episode
    assert "no lock holder in the census" in episode.cause.evidence
    assert episode.cause.evidence.endswith("in it 112,000 arrived, 112,000 completed, the backlog 0 -> 0")


def test_a_fault_in_the_stretch_is_its_cause_and_a_holder_seen_elsewhere_is_not() -> None:
    restart = Fault(1199.5, "restart", "server restarted", 3.0, connections_lost=4)
    elsewhere = dataclasses.replace(NOTIFIER, first_s=100.0, last_s=200.0)
    (episode,) = episodes(soak(faults=(restart,), locks=LockCensus(4800, 0, (elsewhere,))))
    assert episode.cause.resource == "outage", episode
    assert episode.cause.evidence.startswith("restart at 1199.5 s: server restarted"), episode


def test_a_steady_run_and_a_small_rise_are_no_episode() -> None:
    assert episodes(soak(bad=(0, 0))) == ()
    assert episodes(soak(p99_ms=EPISODE_FLOOR_MS - 1)) == ()  # 6x the baseline, under the floor
    assert episodes(soak(p99_ms=60.0)) == ()  # 4x the baseline: not clearly worse


def test_a_prefilled_queue_is_not_judged_by_episodes() -> None:
    """Its messages all wait from the start: each second's p99 is its place in the drain."""
    paced = soak()
    drained = tuple(dataclasses.replace(s, offered=None) for s in paced.timeline)
    assert episodes(dataclasses.replace(paced, timeline=drained)) == ()


def test_a_run_whose_load_changes_on_purpose_is_not_judged_by_episodes() -> None:
    steady = soak()
    ramped = dataclasses.replace(steady.settings, rate_profile="ramp:100..1000/60s")
    profiled = dataclasses.replace(steady, settings=ramped)
    assert episodes(profiled) == ()


def test_the_wait_samples_are_kept_by_slice_of_the_run_and_a_long_run_merges_them() -> None:
    """A stretch's wait profile is its own samples: a second of WAL waits at 10 s reads as WAL waits
    between 10 s and 11 s, not as the run's CPU; past SLICES_MOST slices, pairs merge (twice as
    long each), nothing lost."""
    tally = WaitTally()
    cpu, wal = (4, 0, 0, 0, 0, 0, 0), (0, 0, 4, 0, 0, 0, 0)
    for tick in range(200):
        at = tick / 10
        tally.add_counts(wal if 10 <= at < 11 else cpu, {}, {}, at)
    slices = tally.slices()
    assert slices.slice_s == 1 and len(slices.profiles) == 20
    stretch = slices.between(10, 11)
    assert stretch is not None and stretch.ticks == 10 and stretch.share("wal-flush") == 1.0
    assert tally.profile().share("wal-flush") == 0.05
    tally.add_counts(cpu, {}, {}, SLICES_MOST + 0.5)  # past the last slice: pairs merge
    merged = tally.slices()
    assert merged.slice_s == 2 and sum(p.ticks for p in merged.profiles) == 201
    assert merged.between(10, 12) is not None and merged.between(10, 12).share("wal-flush") == 0.5


def test_a_stall_is_part_of_the_episode_its_catch_up_makes_and_alone_is_none() -> None:
    """Seconds in which nothing completed while work waited have no p99 of their own: beside a worse
    catch-up they are the episode's (its stalled seconds); alone, the faults name the pause."""
    steady = soak(bad=(0, 0))

    def stalled_then(catch_up_ms: float) -> RunResult:
        def second(s: SecondSample) -> SecondSample:
            if 1200 <= s.second < 1260:
                return dataclasses.replace(s, processed=0, backlog=800, e2e_p99_ms=None)
            return dataclasses.replace(s, e2e_p99_ms=catch_up_ms) if 1260 <= s.second < 1280 else s

        return dataclasses.replace(steady, timeline=tuple(second(s) for s in steady.timeline))

    (episode,) = episodes(stalled_then(4_000.0))
    assert (episode.from_s, episode.to_s, episode.stalled_s) == (1200, 1280, 60), episode
    assert "60 s in which nothing completed while work waited" in episode.text()
    assert episodes(stalled_then(20.0)) == ()


def short_run(per_s: int, bad: range) -> RunResult:
    """14 s at `per_s`, p99 10 ms a second but 150 ms in the seconds `bad` (the CI run's blip)."""
    seconds = [
        SecondSample(s, per_s, per_s, 0, 6.0, 8.0, 150.0 if s in bad else 10.0, offered=per_s)
        for s in range(14)
    ]
    return dataclasses.replace(soak(), timeline=tuple(seconds), elapsed_s=14.0)


def test_one_slow_message_in_a_second_of_few_is_no_episode_and_a_slow_stretch_is() -> None:
    """At 80/s a second's p99 is its slowest message: one held up once made an 'episode' of a clean
    run (CI: 146 ms against 10.6 ms). A window holds 100 completions at least, so a blip of one second
    is no episode; three such seconds are one (judged by two-second windows: the one wholly slow),
    and at 800/s one second is enough."""
    assert window_length(14.0, 80.0) == 2 and window_length(14.0, 800.0) == 1
    assert episodes(short_run(80, range(5, 6))) == ()
    (slow,) = episodes(short_run(80, range(5, 8)))
    assert (slow.from_s, slow.to_s) == (6, 8), slow
    (spike,) = episodes(short_run(800, range(5, 6)))
    assert (spike.from_s, spike.to_s) == (5, 6), spike
