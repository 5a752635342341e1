"""How the produced messages spread over their (queue_type, order_id) groups: counted as they are
made, in memory bounded by the number of possible groups (never by the number of messages), and
reported as the hottest groups and their share. In an ordered queue the hottest group caps the run:
one group advances one message per work time, whatever the number of workers."""

from __future__ import annotations

import heapq
from array import array
from dataclasses import dataclass
from typing import Any

EXACT_GROUPS = 4_000_000  # types x orders counted exactly (4 bytes a group)
DISTINCT_GROUPS = 256_000_000  # up to this, a bit per group tells the distinct groups
HEAVY_HITTERS = 1024  # otherwise: Misra-Gries counters (a group above 1/1024 of messages is found)
TOP = 10


@dataclass(frozen=True)
class HotGroup:
    queue_type: str
    order_id: int
    messages: int

    def as_json(self, total: int) -> dict[str, Any]:
        return {
            "queue_type": self.queue_type,
            "order_id": self.order_id,
            "messages": self.messages,
            "share": round(self.messages / total, 5) if total else None,
        }


@dataclass(frozen=True)
class KeyDistribution:
    """What the producer made: messages, distinct groups, the hottest groups (exact counts, or lower
    bounds within messages/1024 when there were too many possible groups to count each)."""

    messages: int
    groups: int | None  # distinct non-empty groups (None: too many possible groups to tell)
    groups_per_type: dict[str, int]
    hottest: tuple[HotGroup, ...]
    exact: bool
    expected_hot_share: float  # the hottest group's share the skew promises (of all messages)

    @property
    def hot_share(self) -> float | None:
        return self.hottest[0].messages / self.messages if self.hottest and self.messages else None

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "groups": self.groups,
            "exact": self.exact,
            "expected_hot_share": round(self.expected_hot_share, 6),
            "hottest": [g.as_json(self.messages) for g in self.hottest],
        }


class GroupTally:
    """Counts messages per group as the producer makes them (the producer's thread only)."""

    def __init__(self, types: tuple[str, ...], orders: int, expected_hot_share: float) -> None:
        self._types = types
        self._orders = orders
        self._expected = expected_hot_share
        possible = len(types) * orders
        self.messages = 0
        self._counts = (
            [array("I", bytes(4 * (orders + 1))) for _ in types] if possible <= EXACT_GROUPS else None
        )
        self._seen = (
            [bytearray(orders // 8 + 1) for _ in types]
            if self._counts is None and possible <= DISTINCT_GROUPS
            else None
        )
        self._heavy: dict[tuple[int, int], int] = {}

    def add(self, type_index: int, order_id: int) -> None:
        self.messages += 1
        if self._counts is not None:
            self._counts[type_index][order_id] += 1
            return
        if self._seen is not None:
            self._seen[type_index][order_id >> 3] |= 1 << (order_id & 7)
        key = (type_index, order_id)
        heavy = self._heavy
        if key in heavy:
            heavy[key] += 1
        elif len(heavy) < HEAVY_HITTERS:
            heavy[key] = 1
        else:  # Misra-Gries: every counter pays for the newcomer; each miss is paid for by a hit
            for other in list(heavy):
                heavy[other] -= 1
                if heavy[other] == 0:
                    del heavy[other]

    def distribution(self) -> KeyDistribution:
        per_type: dict[str, int] = {}
        candidates: list[HotGroup] = []
        for index, queue_type in enumerate(self._types):
            if self._counts is not None:
                counts = self._counts[index]
                per_type[queue_type] = sum(1 for c in counts if c)
                best = heapq.nlargest(TOP, range(len(counts)), key=counts.__getitem__)
                candidates += [HotGroup(queue_type, k, counts[k]) for k in best if counts[k]]
            elif self._seen is not None:
                per_type[queue_type] = int.from_bytes(self._seen[index], "little").bit_count()
        if self._counts is None:
            candidates = [HotGroup(self._types[t], k, n) for (t, k), n in self._heavy.items()]
        hottest = tuple(sorted(candidates, key=lambda g: (-g.messages, g.queue_type, g.order_id))[:TOP])
        counted = self._counts is not None or self._seen is not None
        return KeyDistribution(
            self.messages,
            sum(per_type.values()) if counted else None,
            per_type,
            hottest,
            self._counts is not None,
            self._expected,
        )
