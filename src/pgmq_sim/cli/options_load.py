"""The workload's options; and time, capacity and sweeps."""

from __future__ import annotations

import random
from typing import Any

from pgmq_sim.cli.option import (
    ADAPTIVE,
    POSITIVE,
    SWEEP_ONLY,
    Option,
    Range,
)
from pgmq_sim.model.extras import Delay, PriorityRange
from pgmq_sim.model.pressure import SUITES, PhaseSpec, is_number, parse_phases
from pgmq_sim.model.skew import KeySkew
from pgmq_sim.model.sweep import SweepSpec, parse_duration, parse_slo
from pgmq_sim.settings import (
    MAX_BATCH,
    MAX_PRODUCERS,
    MAX_TYPES,
    Payload,
)


def _drawn_seed(_: dict[str, Any]) -> int:
    """One seed per invocation: every cell of a comparison runs the same workload."""
    return random.SystemRandom().randrange(2**31)


def _budget(text: str) -> float:
    return parse_duration(text, "-sweep-budget")


def _phase(text: str) -> tuple[tuple[PhaseSpec, ...], float | None]:
    """-phase: a run's phases, or (with -suite) each phase's seconds."""
    return ((), float(text)) if is_number(text) else (parse_phases(text), None)


LOAD_OPTIONS = (
    # -- the workload ---------------------------------------------------------------------------
    Option(
        "types",
        "int",
        "message types `type1..typeN`",
        "workload",
        default=3,
        metavar="N",
        range=Range(1, MAX_TYPES, why="queue_type is varchar(10)"),
        example=("-types", "2"),
    ),
    Option(
        "key-skew",
        "text",
        "how `order_id`s are spread over the K orders; see [Traffic shapes](docs/traffic.md)",
        "workload",
        default="uniform",
        metavar="uniform|zipf:S",
        parse=KeySkew.parse,
        example=("-key-skew", "zipf:1.1"),
    ),
    Option(
        "payload-bytes",
        "text",
        "random (incompressible) payload per message, in the schema's `payload` column",
        "workload",
        default="0",
        metavar="N|MIN-MAX",
        shown_default="none",
        setting="payload",
        parse=Payload.parse,
        numbers=True,
        example=("-payload-bytes", "100-800"),
    ),
    Option(
        "priority",
        "text",
        "a uniform integer priority per message (a design's `$4`; a larger number is served first); the"
        " report gives the end-to-end latency per level",
        "workload",
        metavar="MIN-MAX",
        parse=PriorityRange.parse,
        example=("-queue", "priority", "-priority", "1-5"),
    ),
    Option(
        "delay",
        "text",
        "that share of messages is due MIN to MAX seconds after it is enqueued (a design's `$5`); its"
        " latency counts from then, and the audit fails a message completed early",
        "workload",
        metavar="SHARE:MIN-MAX",
        parse=Delay.parse,
        example=("-queue", "priority", "-delay", "0.3:1-5"),
    ),
    Option(
        "rate-profile",
        "text",
        "arrival rate over time: `ramp:A..B/Ts`, `step:A,B,C/Ts`, `burst:R*Ds/Ts` (over `-rate`), or a"
        " CSV file of `second,rate`",
        "workload",
        metavar="PROFILE",
        place="profile",
        example=("-rate-profile", "ramp:10..50/20s", "-duration", "30"),
    ),
    Option(
        "speed",
        "float",
        "replay a CSV profile F times faster",
        "workload",
        default=1.0,
        metavar="F",
        range=POSITIVE,
        example=("-speed", "2"),
    ),
    Option(
        "seed",
        "int",
        "random seed for message types, orders, payloads and work times; the seed used is printed,"
        " logged and in the JSON, so any run can be replayed",
        "workload",
        metavar="N",
        shown_default="drawn",
        fallback=_drawn_seed,
        example=("-seed", "7"),
    ),
    Option(
        "producers",
        "int",
        "enqueue sessions, each its own connection, as an application's pool has: messages fall due at"
        " the rate whether or not an enqueue is in flight, and a free session takes the oldest; see"
        " [Capacity](docs/capacity.md#the-enqueue-side)",
        "workload",
        default=1,
        metavar="N",
        range=Range(1, MAX_PRODUCERS, why="sessions of one producer"),
        example=("-producers", "4", "-rate", "100", "-fill-db", "300"),
    ),
    Option(
        "enqueue-batch",
        "int",
        "messages one enqueue transaction may carry when several are waiting (a COPY on the seed's"
        " table; a folder's enqueue.sql that many times): for an application that batches; by default"
        " each message is one transaction, however far behind",
        "workload",
        default=1,
        metavar="N",
        range=Range(1, MAX_BATCH, why="messages per enqueue"),
        example=("-enqueue-batch", "10", "-rate", "100", "-fill-db", "300"),
    ),
    # -- time, capacity and sweeps --------------------------------------------------------------
    Option(
        "duration",
        "float",
        "end the run after S seconds: the producer stops, work in flight finishes; see"
        " [Capacity](docs/capacity.md#runs-bounded-by-time)",
        "time",
        metavar="S",
        range=POSITIVE,
        example=("-duration", "30", "-rate", "100"),
    ),
    Option(
        "phase",
        "text",
        "a run in phases under one audit, each measured apart (`name=N duration=S [rate=R]"
        " [pressure=P]; ...`; in a scenario file a `[[phase]]` table each); with `-suite`, each"
        " phase's seconds; see [Scenarios](docs/scenarios.md#phases)",
        "time",
        metavar="PHASES|S",
        shown_default="none (`60` with `-suite`)",
        setting=("phases", "suite_phase_s"),
        parse=_phase,
        fallback=lambda _: ((), None),
        form="phases",
        numbers=True,
        example=("-phase", "name=base duration=2 rate=50; name=held duration=2 pressure=idle-in-tx"),
    ),
    Option(
        "suite",
        "text",
        "`pressure`: a run per pressure (baseline, pressure, recovery, `-phase` S each) for the design"
        " or each `-compare` cell, scored in one table; see [Faults](docs/faults.md#pressure-suite)",
        "time",
        metavar="pressure",
        choices=SUITES,
        example=("-suite", "pressure", "-rate", "50"),
    ),
    Option(
        "sweep",
        "text",
        "search for the knee (`auto`, `A..B`), or hold each rate (or number of workers) of a ladder"
        " for a step; in one run; report each step and the knee; in a scenario file, the `[sweep]`"
        " table, with `rate` or `workers` and the next six keys; see"
        " [Capacity](docs/capacity.md#sweeps)",
        "time",
        metavar="rate=auto|rate=A..B|workers=auto|rate=A,B,C|rate=A..B*F|workers=A,B,C",
        parse=SweepSpec.parse,
        form="sweep",
        example=ADAPTIVE,
    ),
    Option(
        "step",
        "float",
        "a sweep step's length (refused without `-sweep`, as are the next five)",
        "time",
        metavar="S",
        dest="step_s",
        shown_default="10",
        range=POSITIVE,
        table="sweep",
        needs=SWEEP_ONLY,
        example=("-sweep", "rate=100,200", "-step", "4"),
    ),
    Option(
        "settle",
        "float",
        "after a rate step, wait at most S seconds for its backlog to drain",
        "time",
        metavar="S",
        dest="settle_s",
        shown_default="`-step`",
        range=POSITIVE,
        table="sweep",
        needs=SWEEP_ONLY,
        example=("-sweep", "rate=100,200", "-settle", "3"),
    ),
    Option(
        "slo",
        "text",
        "the end-to-end p99 each sweep step must keep, the enqueue p99 (due time to commit), or both;"
        " an adaptive sweep's steps keep half the end-to-end headroom over the unloaded p99, and three"
        " holds in a row confirm its knee",
        "time",
        metavar="e2e-p99=MS[,enqueue-p99=MS]",
        setting=("slo_p99_ms", "slo_enqueue_p99_ms"),
        parse=parse_slo,
        form="slo",
        table="sweep",
        needs=SWEEP_ONLY,
        example=(*ADAPTIVE, "-slo", "e2e-p99=250,enqueue-p99=50"),
    ),
    Option(
        "resolution",
        "float",
        "an adaptive sweep bisects until the first failing rate is within PCT% of the knee",
        "time",
        metavar="PCT",
        dest="resolution_pct",
        shown_default="5",
        range=Range(0.1, 50, why="a percentage"),
        table="sweep",
        needs=SWEEP_ONLY,
        example=(*ADAPTIVE, "-resolution", "10"),
    ),
    Option(
        "repeat",
        "int",
        "an adaptive sweep runs each bisection step N times; a rate passes when most runs pass",
        "time",
        metavar="N",
        shown_default="1",
        range=Range(1, 9),
        table="sweep",
        needs=SWEEP_ONLY,
        example=(*ADAPTIVE, "-repeat", "3"),
    ),
    Option(
        "sweep-budget",
        "text",
        "bound an adaptive sweep's whole search (`90s`, `15m`, `1h`); the report says the resolution reached",
        "time",
        metavar="DURATION",
        dest="sweep_budget_s",
        parse=_budget,
        numbers=True,
        table="sweep",
        needs=SWEEP_ONLY,
        example=(*ADAPTIVE, "-sweep-budget", "15m"),
    ),
    Option(
        "bystander",
        "float",
        "a small read-and-update workload beside the queue, on a table of its own, at RATE"
        " transactions/s: its latency; see [Capacity](docs/capacity.md#a-neighbours-latency)",
        "time",
        metavar="RATE",
        range=Range(0, 100_000, low_open=True, why="transactions per second"),
        example=("-bystander", "20"),
    ),
)
