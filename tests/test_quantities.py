"""How a quantity reads: a count of things has its thousands set apart as a duration's are, so one
sentence never says 50000 where the next says 50,000."""

from __future__ import annotations

import pytest

from pgmq_sim.model.quantities import count_text, ms_text

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "n,said",
    [(0, "0"), (1, "1"), (999, "999"), (1000, "1,000"), (50_000, "50,000"), (1_234_567, "1,234,567")],
)
def test_a_count_sets_its_thousands_apart(n: int, said: str) -> None:
    assert count_text(n) == said


def test_a_negative_count_a_difference_reads_by_the_same_rule() -> None:
    assert count_text(-1_234) == "-1,234"
    assert count_text(-7) == "-7"


def test_a_count_and_a_duration_set_their_thousands_apart_alike() -> None:
    assert ms_text(4_210) == f"{count_text(4_210)} ms"
