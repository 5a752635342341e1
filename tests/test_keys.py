"""The producer's count of messages per group: exact while the groups fit, heavy hitters and distinct
bits beyond, and its memory set by the groups, never by the messages. And the payload sizes."""

from __future__ import annotations

import random

import pytest

from pgmq_sim.errors import UsageError
from pgmq_sim.model import keys
from pgmq_sim.model.keys import GroupTally
from pgmq_sim.model.skew import ZipfKeys, zipf_share
from pgmq_sim.settings import Payload

pytestmark = pytest.mark.unit
TYPES = ("type1", "type2", "type3")


def test_exact_counts_name_the_hottest_groups_and_count_the_distinct_ones() -> None:
    tally = GroupTally(TYPES, 50, expected_hot_share=0.0)
    for type_index, order_id, times in ((1, 7, 30), (0, 3, 20), (2, 50, 10), (0, 1, 1)):
        for _ in range(times):
            tally.add(type_index, order_id)
    found = tally.distribution()
    assert found.exact and found.messages == 61 and found.groups == 4
    assert found.groups_per_type == {"type1": 2, "type2": 1, "type3": 1}
    assert [(g.queue_type, g.order_id, g.messages) for g in found.hottest[:3]] == [
        ("type2", 7, 30),
        ("type1", 3, 20),
        ("type3", 50, 10),
    ]
    assert found.hot_share == pytest.approx(30 / 61)


def test_beyond_exact_counting_a_heavy_hitter_is_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keys, "EXACT_GROUPS", 10)  # force the bounded sketch
    rng = random.Random(3)
    tally = GroupTally(TYPES, 1_000_000, expected_hot_share=0.0)
    for _ in range(20_000):
        tally.add(0, 42) if rng.random() < 0.2 else tally.add(rng.randrange(3), rng.randint(1, 1_000_000))
    found = tally.distribution()
    assert not found.exact
    hot = found.hottest[0]
    assert (hot.queue_type, hot.order_id) == ("type1", 42)
    # Misra-Gries: a lower bound within messages / counters of the truth (about 4,000 here)
    assert 4_000 - 20_000 / keys.HEAVY_HITTERS - 300 < hot.messages <= 4_300
    assert found.groups is not None and 15_000 < found.groups < 16_200  # distinct, from the bits


def test_zipf_hot_share_matches_what_the_tally_counts() -> None:
    rng, sampler = random.Random(11), ZipfKeys(1000, 1.2)
    tally = GroupTally(TYPES, 1000, expected_hot_share=zipf_share(1000, 1.2) / 3)
    for _ in range(60_000):
        tally.add(rng.randrange(3), sampler.draw(rng))
    found = tally.distribution()
    assert found.hottest[0].order_id == 1
    assert found.hot_share == pytest.approx(found.expected_hot_share, rel=0.1)


@pytest.mark.parametrize("text,expected", [("4096", (4096, 4096)), ("100-8000", (100, 8000)), (" 0 ", None)])
def test_payload_sizes(text: str, expected: tuple[int, int] | None) -> None:
    payload = Payload.parse(text)
    assert (None if payload is None else (payload.min_bytes, payload.max_bytes)) == expected


@pytest.mark.parametrize("text", ["big", "9-3", "-1", "1-20000000"])
def test_bad_payload_sizes(text: str) -> None:
    with pytest.raises(UsageError, match="-payload-bytes"):
        Payload.parse(text)
