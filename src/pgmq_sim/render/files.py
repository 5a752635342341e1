"""Output files: checked before the run, written so a reader never sees half of one.

A regular file (or a new one) is written to a temporary file and renamed over it; a
symlink is followed, so the link stays a link; a device or pipe (/dev/stdout, a FIFO)
is written directly, never replaced. "-" means standard output.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.paths import describe_path
from pgmq_sim.render.lines import claims_text
from pgmq_sim.result.claims import ClaimAccount
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.knee import SweepVerdict
from pgmq_sim.verdicts.verdict import RunVerdict

STDOUT = Path("-")

JSON_VERSION = 3  # 3: claim and completion latencies split on the server's clock; costs, path, keys, sweep


def check_output_path(path: Path, flag: str) -> None:
    """Refuse before the run, not after it, a result file that cannot be written."""
    if path == STDOUT:
        return
    shown = describe_path(path)
    target = path.resolve() if path.is_symlink() else path
    if target.exists() and not (target.is_file() or _is_stream(target)):
        raise UsageError(f"cannot write {flag} file {shown}: it is a directory; choose a file path")
    folder = target.parent if str(target.parent) else Path(".")
    if not target.exists() and (not folder.is_dir() or not os.access(folder, os.W_OK)):
        raise UsageError(f"cannot write {flag} file {shown}; choose a path in a writable directory")
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"cannot write {flag} file {shown}: permission denied; choose another path")


def _is_stream(path: Path) -> bool:
    mode = path.stat().st_mode
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def write_text(path: Path, text: str, flag: str) -> None:
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = path.resolve() if path.is_symlink() else path
    try:
        if target.exists() and _is_stream(target):
            with target.open("w", encoding="utf-8") as stream:
                stream.write(text)
            return
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise SimError(
            f"cannot write {flag} file {describe_path(path)}: {exc.strerror or exc}; free space or choose"
            f" another {flag} path"
        ) from None


def write_json(path: Path, document: dict[str, Any]) -> None:
    write_text(path, json.dumps(document, indent=2, default=str) + "\n", "-json")


def result_document(result: RunResult, verdict: RunVerdict) -> dict[str, Any]:
    """A result's JSON document: the result, and its verdicts (the limit, what hid the slowest, the
    workers' time, the advice)."""
    hidden = verdict.hidden
    return run_json(result, verdict) | {
        "limit": verdict.limit.as_json(),
        "hidden": hidden.as_json() if hidden is not None else None,
        "cost": verdict.cost_json(),
        "enqueue_cause": verdict.enqueue_json(),
        "episodes": [e.as_json() for e in verdict.episodes],
        "time_split": verdict.time_split,
        "advice": list(verdict.advice),
    }


def run_json(r: RunResult, v: RunVerdict) -> dict[str, Any]:
    """A run's result as its JSON document's body, with the verdicts on a part of it in that part's
    place (the limit and the advice are added beside it)."""
    return {
        "version": JSON_VERSION,
        "outcome": r.outcome,
        "error": r.error,
        "ended_by": r.ended_by.as_json() if r.ended_by else None,
        "server": r.server,
        "strategy": r.strategy,
        "queue": r.queue,
        "ordered": r.ordered,
        "files": r.files,
        "target": r.target,
        "produced": r.produced,
        "processed": r.processed,
        "elapsed_s": round(r.elapsed_s, 4),
        "throughput_per_s": round(r.throughput_per_s, 2),
        "throughput_per_type_per_s": {
            t: round(n / r.elapsed_s, 2) if r.elapsed_s else 0.0 for t, n in r.per_type.items()
        },
        "processed_per_type": r.per_type,
        "latency_ms": {
            "e2e": r.e2e_ms,
            "claim": r.claim_ms,
            "complete": r.complete_ms,
            "e2e_by_priority": r.e2e_by_priority,
        },
        "empty_claims": r.empty_claims,
        "connections_lost": r.connections_lost,
        "reconnects": r.reconnects,
        "groups": r.groups,
        "groups_per_type": r.groups_per_type,
        "keys": r.keys.as_json() if r.keys else None,
        "work_mean_ms": round(r.work_mean_ms, 3),
        "ordering_bound_per_s": _round(r.ordering_bound_per_s),
        "ordering_bound_share": _round(r.bound_share, 3),
        "work_bound_per_s": _round(r.work_bound_per_s),
        "work_bound_share": _round(r.work_bound_share, 3),
        "worker_bound_per_s": _round(r.worker_bound_per_s),
        "workers": [w.as_json() for w in r.workers],
        "audit": r.audit.as_json() if r.audit else None,
        "audit_skipped": r.audit_skipped,
        "live_audit": r.live_audit.as_json() if r.live_audit else None,
        "limit_by_window": [s.as_json() for s in r.limit_by_window],
        "table": r.health.as_json() if r.health else None,
        "timeline": [s.as_json() for s in r.timeline],
        "faults": [f.as_json() for f in r.faults],
        "server_reasons": [c.as_json() for c in r.server_reasons],
        "server_timeouts": r.timeouts.as_json() if r.timeouts else None,
        "server_settings": r.census.as_json() if r.census else None,
        "producer": (r.producer.as_json() if r.producer else {})
        | ({"enqueue": r.enqueue.as_json()} if r.enqueue else {})
        or None,
        "retries": r.retries.as_json() if r.retries else None,
        "oldest_snapshot": r.snapshot.as_json() if r.snapshot else None,
        "server_cost": r.server_cost.as_json() if r.server_cost else None,
        "client": _client_json(r, v),
        "claims": r.claims.as_json()
        | {
            "sources": claims_sources(r.claims),
            "summary": claims_text(r.claims),
            "inflated_by_outside": v.claims_inflated,
        }
        if r.claims
        else None,
        "path": r.path.as_json() if r.path else None,
        "worker_backends_max": r.worker_backends_max,
        "pooler": r.pooler.as_json() if r.pooler else None,
        "waits": r.waits.as_json() if r.waits else None,
        "latency_split": r.latency.as_json() if r.latency else None,
        "locks": r.locks.as_json() if r.locks else None,
        "sweep": sweep_json(v.sweep) if v.sweep else None,
        "phases": [p.as_json() for p in r.phases],
        "bystander": _bystander_json(r, v),
        "drift": v.drift.as_json() if v.drift else None,
        "checks": [c.as_json() for c in v.checks],
        "stall_causes": list(r.stall_causes),
        "notes": list(r.notes),
        "settings": r.settings.as_json(),
    }


CLIENT_SOURCE = (
    "an empty claim's own CPU time on the loop (the worker's code from its wake-up to its next wait,"
    " its round trips' sends and reads; the loop's dispatch apart), measured on one claim in several"
    " and counted at their mean by reason"
)
SERVER_SOURCE = "pg_stat_statements, the empty claims' share by count"


def claims_sources(claims: ClaimAccount) -> dict[str, str | None]:
    """Where the claims' costs were measured, in words (the server's: only where it was read)."""
    return {
        "client_s": CLIENT_SOURCE,
        "server": SERVER_SOURCE if claims.server_empty_ms is not None else None,
    }


def _client_json(r: RunResult, v: RunVerdict) -> dict[str, Any]:
    """The client's cost, and whether it set the pace (before its processes, where it always was)."""
    measured = r.client.as_json()
    processes = measured.pop("processes")
    return measured | {"limited": v.client_limited, "processes": processes}


def _bystander_json(r: RunResult, v: RunVerdict) -> dict[str, Any] | None:
    """The neighbour's latencies, then whether beside and alone compare."""
    if r.bystander is None:
        return None
    return r.bystander.as_json() | (v.bystander.as_json() if v.bystander else {})


def sweep_json(v: SweepVerdict) -> dict[str, Any]:
    """A sweep's steps, its knee and how the search went, as the JSON's `sweep`."""
    s = v.sweep
    return {
        "spec": str(s.spec),
        "kind": s.spec.kind,
        "step_s": s.step_s,
        "settle_s": s.settle_s,
        "slo": {"e2e_p99_ms": s.slo_p99_ms, "enqueue_p99_ms": s.slo_enqueue_p99_ms},
        "max_sustainable_per_s": v.max_sustainable_per_s,
        "first_failing_per_s": v.first_failing_per_s,
        "knee_step": None if v.knee is None else v.knee.index + 1,
        "headline": v.headline,
        "limit": v.limit,
        "confirmed": _confirmed_json(v),
        "adaptive": _search_json(v),
        "steps": [s.as_json() for s in s.steps],
    }


def _confirmed_json(v: SweepVerdict) -> dict[str, Any] | None:
    s = v.sweep
    hold = s.hold
    if hold is None:
        return None
    share = s.hold_slo_share
    return {
        "rate": hold.setting,
        "seconds": round(hold.seconds, 3),
        "holds": s.confirmed_holds,
        "e2e_p99_ms": s.hold_p99_ms,
        "slo_share": None if share is None else round(share, 3),
        "verdict": "pass" if v.knee is hold else "fail",
    }


def _search_json(v: SweepVerdict) -> dict[str, Any] | None:
    s = v.sweep
    search = s.search
    if search is None:
        return None
    reached = v.resolution_reached
    return {
        "resolution": search.resolution,
        "resolution_reached": None if reached is None else round(reached, 4),
        "repeat": search.repeat,
        "budget_s": search.budget_s,
        "cut_by_budget": search.cut_by_budget,
        "unloaded_p99_ms": search.unloaded_ms,
        "pass_p99_ms": None if search.pass_ms is None else round(search.pass_ms, 1),
        "holds": [{"rate": rate, "passed": ok} for rate, ok in search.holds],
        "noise": s.noise(),
    }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)
