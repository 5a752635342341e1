"""What the cost account adds to each message's path, measured apart from the noise of a whole run.

At a steady rate with -wakeup notify a message costs the client one notification read, one credit
given and taken, and one claim that took it; about one in ten messages also costs an empty claim.
This times the account's own share of each (result/claims, actors/claim_reasons): the sender's
tally and two clock reads per notification, a credit kept with its sender, a claim counted by
reason and outcome, and one claim in 16 timed on the thread's CPU clock (db/wire LoopTime: at its
wake-up, its sends, its answers' reads) until it takes a message or waits again. The same
operations without the account (a bare integer credit, no count) are timed beside them; the
difference per message is printed against the 150 µs of client CPU a message may cost at 800/s
(docs/measurements.md).

    python bench/claim_account_cost.py [--empty-share 0.1] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from pgmq_sim.actors.claim_reasons import COMPLETION, NOTIFIED, ClaimTally, Credits
from pgmq_sim.db.wire import LoopTime
from pgmq_sim.result.claims import ClaimBook

LOOPS = 200_000
PID = 4242


def with_account(empty_share: float) -> Callable[[], None]:
    book = ClaimBook()
    tally = ClaimTally(book)
    credits = Credits()
    every = round(1 / empty_share) if empty_share else 0
    count = 0

    def message() -> None:
        nonlocal count
        began = time.perf_counter()  # the listener reads a notification
        sender = book.sender(PID)
        sender.notifications += 1
        if not sender.first_at:
            sender.first_at = began
        sender.last_at = began
        sender.told += 1
        credits.add(PID, 1)
        sender.read_s += time.perf_counter() - began
        source = credits.take()  # a waiting worker takes its credit
        tally.waiting()
        tally.woke(NOTIFIED, source, running=True)
        round_trip(tally.time)
        tally.answered(1)
        count += 1
        if every and count % every == 0:  # an empty claim now and then, and its commit's trip
            tally.woke(COMPLETION)
            round_trip(tally.time)
            round_trip(tally.time)
            tally.answered(0)
            tally.waiting()

    return message


def round_trip(meter: LoopTime) -> None:
    """What the claim's wire does with its meter: paused at the send, its answer's read timed, resumed."""
    meter.pause()
    if meter.armed:
        began = time.thread_time()
        meter.spent += time.thread_time() - began
    meter.resume()


def without_account(empty_share: float) -> Callable[[], None]:
    state = {"credits": 0}

    def message() -> None:
        state["credits"] += 1
        state["credits"] -= 1

    return message


def per_call_us(message: Callable[[], None]) -> float:
    """The process's CPU per call (not the wall clock: the machine is shared)."""
    began = time.process_time()
    for _ in range(LOOPS):
        message()
    return (time.process_time() - began) / LOOPS * 1e6


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--empty-share", type=float, default=0.1, help="empty claims per message (0.1)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds, median reported (5)")
    return parser


def main() -> None:
    args = arguments().parse_args()
    added, bare = [], []
    for _ in range(args.repeat):  # interleaved
        added.append(per_call_us(with_account(args.empty_share)))
        bare.append(per_call_us(without_account(args.empty_share)))
    a, b = statistics.median(added), statistics.median(bare)
    print(f"per message: with the account {a:.2f} us, without {b:.2f} us: the account adds {a - b:.2f} us")
    print(f"against 150 us of client CPU per message at 800/s: {(a - b) / 150:.2%} (target <= 2%)")


if __name__ == "__main__":
    main()
