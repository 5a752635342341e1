"""The server's waits (result/waits) in words: each class's share of the backends' time in a
transaction, the lock events and the other waits named, as a verdict's evidence and the views say
them."""

from __future__ import annotations

from pgmq_sim.result.waits import CLASSES, WaitProfile

SHOWN_SHARE = 0.01  # a class below this share of the samples is left unsaid
OTHER_EVENTS = 3  # the other waits' events named, the most sampled first


def waits_text(w: WaitProfile) -> str:
    """e.g. 'on CPU 60%, Lock (...) 30% [Lock: tuple 100%] (2.1 backends in a transaction on average)'."""
    if not w.busy:
        return "no backend was seen in a transaction"
    detail = {"locks": lock_text(w), "other": other_text(w)}
    parts = [
        f"{CLASSES.get(name, name)} {share:.0%}" + (f" [{detail[name]}]" if detail.get(name) else "")
        for name, share in w.shares().items()
        if share >= SHOWN_SHARE
    ]
    return ", ".join(parts) + f" ({w.backends_busy:.1f} backends in a transaction on average)"


def other_text(w: WaitProfile) -> str:
    """e.g. 'Timeout:PgSleep 92%, IPC:SyncRep 8%' (each event's share of the other class's samples)."""
    total = sum(n for _, n in w.other_events)
    ranked = sorted(w.other_events, key=lambda e: -e[1])
    return ", ".join(f"{event} {n / total:.0%}" for event, n in ranked[:OTHER_EVENTS]) if total else ""


def lock_text(w: WaitProfile) -> str:
    """e.g. 'Lock: relation 96%, tuple 4%'."""
    shares = w.lock_shares()
    return "Lock: " + ", ".join(f"{event} {share:.0%}" for event, share in shares.items()) if shares else ""
