"""The path to the server as a run uses it: the pooler mode (found or given), what it changed, TLS,
and what the role may see."""

from __future__ import annotations

from dataclasses import dataclass

from pgmq_sim.model.facts import PathFacts
from pgmq_sim.model.kinds import PoolerMode


@dataclass(frozen=True)
class RunPath:
    pooler: PoolerMode
    detected: bool  # found by the probe, not given by -pooler
    changes: tuple[str, ...]  # what this mode changed in the run
    facts: PathFacts

    @property
    def evidence(self) -> str:
        return self.facts.evidence

    @property
    def tls(self) -> str | None:
        return self.facts.tls

    @property
    def pooled(self) -> bool:
        return self.pooler != PoolerMode.NONE

    @property
    def transaction_pooled(self) -> bool:
        return self.pooler == PoolerMode.TRANSACTION

    def as_json(self) -> dict[str, object]:
        return {
            "pooler": str(self.pooler),
            "detected": self.detected,
            "evidence": self.evidence,
            "changes": list(self.changes),
            "tls": self.tls,
            "role": {"superuser": self.facts.superuser, "sees_all_sessions": self.facts.sees_all_sessions},
            "server_version": self.facts.version,
        }
