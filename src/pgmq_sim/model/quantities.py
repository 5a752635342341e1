"""How a quantity is said: one rule for every view and every verdict sentence, so a figure never
reads one way in one place and another way in the next.

A duration (a limit, the hidden time, an episode, a fault's outage, the enqueue account, a table's
cell): 5,000 ms never reads "5000 ms" in one place and "5.00 s" in another. A time on the run's
clock ("at 12.3 s") is a position, not a duration, and is said as such where it is used.

A count of things (messages, rows, tuples, claims, notifications, transactions, calls, windows):
50,000 never reads "50000" in one sentence and "50,000" in the next. An identifier (a msg_id, a
pid, an order id, a port, a seed) is a name, not a count, and is said as it is."""

from __future__ import annotations


def count_text(n: int) -> str:
    """A count of things, its thousands set apart by commas as a duration's are: 0, 999, 1,000,
    50,000, -1,234 (a difference may be negative)."""
    return f"{n:,}"


def ms_figure(ms: float) -> str:
    """Milliseconds to the precision their size deserves, no trailing zero: 0.42, 6, 12.3, 4,210 (a
    table's cell, and the number in every sentence)."""
    text = f"{ms:,.{0 if ms >= 100 else 1 if ms >= 10 else 2}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def ms_text(ms: float) -> str:
    """A duration in a sentence: 0.42 ms, 12.3 ms, 312 ms, 4,210 ms, 21.8 s."""
    return f"{ms / 1000:.1f} s" if ms >= 10_000 else f"{ms_figure(ms)} ms"


def seconds_text(seconds: float) -> str:
    """A duration measured in seconds, said by the same rule: 2.35 s reads 2,350 ms, 95 s 95.0 s."""
    return ms_text(seconds * 1000)
