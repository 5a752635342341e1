"""The check that the run's role may own what the tool needs: a table or function of the tool's
that another role owns is refused before anything changes, named with its owner and the fix."""

from __future__ import annotations

from pgmq_sim.engine.bounded import call_bounded
from pgmq_sim.engine.state import RunState
from pgmq_sim.errors import UsageError


def refuse_foreign_owners(state: RunState, names: list[str], role: str) -> None:
    """A table or function of the tool's that another role owns (an earlier run as a superuser made
    it) would stop the run halfway, 'permission denied': refused before anything changes, named
    with its owner and the fix. `role`: the run's."""
    owned = call_bounded(lambda: state.db.foreign_owners(names), 30, state.signals, "owner check", True)
    if owned:
        name, owner, kind = owned[0]
        more = f" (and {', '.join(n for n, _, _ in owned[1:])})" if len(owned) > 1 else ""
        raise UsageError(
            f"{kind} {name}{more} belongs to role {owner} (an earlier run as {owner} made it), and this"
            f" run's role {role} may not replace it: as {owner}, ALTER {kind.upper()} {name} OWNER TO"
            f" {role} (or drop it), or run as {owner}"
        )
