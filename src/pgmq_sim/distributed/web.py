"""The queue's own figures in Locust's web UI: a "Queue" tab beside Locust's request statistics
(which show claims, completions and end-to-end latency as request entries, and the queue workers
as Users): messages produced and processed, the backlog, throughput, end-to-end percentiles, and
during a sweep the current step, and the live audit so far."""

from __future__ import annotations

import json
from typing import Any

from flask import Response, request
from locust.web import WebUI

from pgmq_sim.engine.state import RunState
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.stats import WorkerCounters

TAB = "queue"


def queue_rows(state: RunState) -> list[dict[str, str]]:
    totals = WorkerCounters.total(state.stats)
    elapsed = state.clock()
    e2e = LatencyHistogram.merged(s.e2e for s in state.stats).percentiles_ms()
    rows = [
        ("phase", state.phase() or ("running" if state.started else "starting")),
        ("workers", str(len(state.stats))),
        ("produced", str(state.produced.committed)),
        ("processed", str(totals.processed)),
        ("backlog", str(max(0, state.produced.committed - totals.finished))),
        ("msg/s (whole run)", f"{totals.processed / elapsed:.0f}" if elapsed > 0 else "-"),
        (
            "end to end p50 / p99 ms",
            " / ".join("-" if e2e[k] is None else f"{e2e[k]:.1f}" for k in ("p50", "p99")),
        ),
        ("empty claims", str(totals.empty_claims)),
        ("connections lost", str(totals.connections_lost)),
    ]
    if state.live_judge is not None:  # the audit so far, from the windows closed
        audit = state.live_judge.live()
        rows += [
            ("audit: windows closed (failed)", f"{audit.windows} ({audit.failed_windows})"),
            ("audit: msg_ids judged through", str(audit.through)),
            ("audit: checked", str(audit.checked)),
            (
                "audit: lost / duplicated / out of order",
                f"{audit.lost} / {audit.duplicated} / {audit.out_of_order}",
            ),
        ]
    limit = state.window_limits.last()
    if limit is not None:
        rows.append((f"limit (window to {limit.to_s:.0f} s)", f"{limit.resource}: {limit.evidence}"))
    return [{"name": name, "value": value} for name, value in rows]


def show_queue(web_ui: WebUI, state: RunState) -> None:
    web_ui.template_args["extended_tabs"] = [{"title": "Queue", "key": TAB}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB, "structure": [{"key": "name", "title": "Figure"}, {"key": "value", "title": "Value"}]}
    ]

    app = web_ui.app
    assert app is not None

    @app.after_request
    def with_queue(response: Response) -> Response:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        document: dict[str, Any] = dict(response.json or {})
        document["extended_stats"] = [{"key": TAB, "data": queue_rows(state)}]
        response.set_data(json.dumps(document))
        return response
