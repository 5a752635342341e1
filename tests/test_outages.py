"""Outages measured from the timeline (verdicts/outages): from a fault to the next completion, the
recovery back to the rate before, a pause no longer than the run's usual being none, and a pause the
run's end cuts off still an outage."""

from __future__ import annotations

import dataclasses

import pytest

from pgmq_sim.model.events import Fault
from pgmq_sim.result.timeline import SecondSample, Timeline
from pgmq_sim.verdicts.outages import fault_effects

pytestmark = pytest.mark.unit


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
    assert kill.effect() == "out 2,300 ms, back to 100/s within 1,700 ms, 2 connection(s) lost"


def test_a_fault_never_back_to_its_rate_says_so() -> None:
    (fault,) = fault_effects(
        [Fault(3.2, "pause-pooler", "for 1 s")], [(3.2, 4.5)], [], _seconds([50] * 4 + [10] * 4)
    )
    assert (
        fault.recovery_s is None
        and fault.effect() == "out 1,300 ms, not back to 50/s by the end, 0 connection(s) lost"
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
        "out 3,050 ms, not recovered by the end of the run, 0 connection(s) lost; the pooler showed up to 5"
        " client(s) waiting for a server connection (longest 2,500 ms)"
    )
    assert met.as_json()["recovered"] is False
    (restart,) = fault_effects([Fault(7.0, "restart-server", "")], [(6.95, 10.0)], [], _cut_off(False), 10.0)
    assert (restart.outage_s, restart.open_at_end) == (3.0, True)
    # the same pause, in a run whose work was all done (nothing due, no backlog): no outage
    drained = [dataclasses.replace(s, offered=0, arrived=s.processed) for s in _cut_off(False)]
    assert fault_effects([], [(6.95, 10.0)], [], drained, 10.0) == []
    # nor one the run outlived: a closed pause of a second with nothing lost and nobody waiting
    assert fault_effects([], [(3.0, 4.2)], [], _seconds([100] * 10), 10.0) == []
