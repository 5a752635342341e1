"""The running account's bounds on its own memory: which messages' hidden seconds it keeps, and in
slices of how long."""

from __future__ import annotations

import pytest

from pgmq_sim.result.account import _Cohort
from pgmq_sim.result.running_account import HiddenKept, _at_share

pytestmark = pytest.mark.unit


def test_a_long_runs_hidden_seconds_are_kept_in_slices_twice_as_long_each_time_they_grow() -> None:
    kept = HiddenKept()
    assert kept.sliced([(5, 0.5), (6, 0.25)]) == [(5, 0.5), (6, 0.25)]  # by the second at first
    cohort = _Cohort()
    cohort.hidden = {4: 1.0, 5: 0.5, 6: 0.25, 9: 2.0}
    kept.coarser([cohort])
    assert cohort.hidden == {4: 1.5, 6: 0.25, 8: 2.0}  # pairs of seconds: nothing lost
    kept.coarser([cohort])
    assert cohort.hidden == {4: 1.75, 8: 2.0}
    assert kept.sliced([(11, 0.5)]) == [(8, 0.5)]  # what comes next, in the slices of now
    other = _Cohort()  # another type's, made before: the end puts it in the same slices
    other.hidden = {3: 1.0, 5: 1.0}
    kept.resliced([other])
    assert other.hidden == {0: 1.0, 4: 1.0}


def test_the_slowest_whose_hidden_seconds_are_kept_are_read_from_the_counts_so_far() -> None:
    counts = {bucket: 10 for bucket in range(100)}  # 1,000 messages, ten a bucket
    assert _at_share(counts, 0.98) == 97  # the bucket where 98% of them are reached
    assert _at_share({7: 1}, 0.98) == 7
