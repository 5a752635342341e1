"""-batch and a claim's batch size: a claim that does not take $2 takes one message, and the run
says so, whatever design it is (the design's text tells, not its name)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import settings

from pgmq_sim.cli.plan import run_input


@pytest.mark.unit
@pytest.mark.parametrize(("claim", "one"), [("seed", True), ("procrastinate", True), ("indexed", False)])
def test_a_claim_without_its_batch_size_is_said_to_take_one_message(claim: str, one: bool) -> None:
    given = run_input(settings(claim=claim, batch=4))
    said = [n for n in given.notes if n.startswith("-batch 4:")]
    assert bool(said) == one and given.design.takes_batch != one, given.notes
    if one:
        assert "takes one message (its text has no $2" in said[0], said


@pytest.mark.unit
def test_a_folder_claim_is_judged_by_its_text(tmp_path: Path) -> None:
    """A claim given by -next-msg that takes $2 is a batch claim, whatever the design's name."""
    claim = tmp_path / "claim.sql"
    claim.write_text(
        "select msg_id, queue_type, order_id from msg_queue where queue_type = $1 and status = 'N'"
        " order by msg_id limit $2 for update skip locked"
    )
    given = run_input(settings(next_msg=claim, batch=4))
    assert given.design.takes_batch and not [n for n in given.notes if n.startswith("-batch")]
