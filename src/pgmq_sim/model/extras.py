"""What a message may carry beside its key: a priority (-priority MIN-MAX) and a due time
(-delay SHARE:MIN-MAX), both drawn per message from the run's seeded randomness."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from pgmq_sim.errors import UsageError

PRIORITY_LIMIT = 1_000_000  # an integer column's priorities, and room to spare
DELAY_LIMIT_S = 86_400.0


@dataclass(frozen=True)
class PriorityRange:
    """A uniform integer priority per message; a larger number is served first."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> PriorityRange:
        match = re.fullmatch(r"\s*(-?\d+)\s*-\s*(-?\d+)\s*", text)
        if not match:
            raise UsageError(f"-priority '{text}' is not a range; give MIN-MAX, e.g. 1-5")
        low, high = int(match.group(1)), int(match.group(2))
        if not -PRIORITY_LIMIT <= low <= high <= PRIORITY_LIMIT:
            raise UsageError(f"-priority '{text}' must be MIN-MAX with MIN <= MAX, within +-{PRIORITY_LIMIT}")
        return cls(low, high)

    def draw(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"


@dataclass(frozen=True)
class Delay:
    """That share of messages is due MIN to MAX seconds (uniform) after it is enqueued."""

    share: float
    min_s: float
    max_s: float

    @classmethod
    def parse(cls, text: str) -> Delay:
        match = re.fullmatch(r"\s*([\d.]+)\s*:\s*([\d.]+)\s*(?:-\s*([\d.]+)\s*)?", text)
        if not match:
            raise UsageError(f"-delay '{text}' is not a delay; give SHARE:MIN-MAX seconds, e.g. 0.3:1-5")
        try:
            share, low = float(match.group(1)), float(match.group(2))
            high = float(match.group(3)) if match.group(3) is not None else low
        except ValueError:
            raise UsageError(
                f"-delay '{text}' is not a delay; give SHARE:MIN-MAX seconds, e.g. 0.3:1-5"
            ) from None
        if not (0 < share <= 1 and math.isfinite(low) and 0 <= low <= high <= DELAY_LIMIT_S):
            raise UsageError(
                f"-delay '{text}': SHARE must be in (0, 1] and 0 <= MIN <= MAX <= {DELAY_LIMIT_S:g} seconds"
            )
        return cls(share, low, high)

    def draw(self, rng: random.Random) -> float | None:
        """Seconds after its enqueue the message is due, or None (due at once)."""
        if rng.random() >= self.share:
            return None
        return rng.uniform(self.min_s, self.max_s)

    def __str__(self) -> str:
        return f"{self.share:g}:{self.min_s:g}-{self.max_s:g}"
