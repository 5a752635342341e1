"""A claim's answer read: where its msg_id, queue_type and order_id columns are (found by name: a
team's statement runs as written), and its rows as the messages claimed."""

from __future__ import annotations

from psycopg.pq.abc import PGresult

from pgmq_sim.db.statements import CLAIM_COLUMNS
from pgmq_sim.db.values import Claimed
from pgmq_sim.errors import SimError


def claim_columns(result: PGresult) -> tuple[int, int, int]:
    """Where the claim's msg_id, queue_type and order_id are, by name."""
    names = [result.fname(i) for i in range(result.nfields)]
    wanted = [c.encode() for c in CLAIM_COLUMNS]
    missing = [c.decode() for c in wanted if c not in names]
    if missing:
        raise SimError(
            f"the claim returned no {', '.join(missing)} column; it must return {', '.join(CLAIM_COLUMNS)}"
        )
    return names.index(wanted[0]), names.index(wanted[1]), names.index(wanted[2])


def claimed_rows(
    result: PGresult,
    clock: PGresult,
    places: tuple[int, int, int],
    keyed: bool,
    encoding: str,
    claim_s: float,
) -> list[Claimed]:
    """The claim's rows as messages (a keyed design's ids are text); `claim_s`: how long the claim
    statement ran on the server, from its arrival to its locks."""
    value = result.get_value
    at_id, at_type, at_order = places
    claimed_at = (clock.get_value(0, 0) or b"").decode()
    if keyed:
        claimed = [
            Claimed(
                0,
                (value(i, at_type) or b"").decode(encoding),
                int(value(i, at_order) or 0),
                claimed_at,
                1,
                (value(i, at_id) or b"").decode(encoding),
                claim_s=claim_s,
            )
            for i in range(result.ntuples)
        ]
    else:
        claimed = [
            Claimed(
                int(value(i, at_id) or 0),
                (value(i, at_type) or b"").decode(encoding),
                int(value(i, at_order) or 0),
                claimed_at,
                claim_s=claim_s,
            )
            for i in range(result.ntuples)
        ]
    return claimed
