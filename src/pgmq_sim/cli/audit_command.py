"""`pgmq-sim audit`: re-check a queue left in the database (by a killed run, say) without
running anything: the verdict is judged from the journal and the run record alone."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
import psycopg
from rich.console import Console

from pgmq_sim.cli.flags import command_of
from pgmq_sim.cli.options import AUDIT
from pgmq_sim.cli.scenario import Scenario, scenario_of, scenario_toml
from pgmq_sim.db.connection import connect_checked
from pgmq_sim.db.queue import QueueDatabase
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.values import QueueShape
from pgmq_sim.dsn import DSN_ENV, check_dsn, reason, redact
from pgmq_sim.engine.judging import counts_after_windows
from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.model.quantities import count_text
from pgmq_sim.render.files import STDOUT, check_output_path, write_json
from pgmq_sim.result.audit import AuditVerdict
from pgmq_sim.verdicts.audit import SHOW, judge_audit


@command_of(AUDIT, "Audit the queue and journal a run left in the database: exactly once, in order.")
def audit_command(**_options: object) -> None:
    scenario = scenario_of(AUDIT, click.get_current_context())
    dsn = checked_audit(scenario)
    if scenario.options["print_config"]:
        click.echo(scenario_toml(scenario), nl=False)
        return
    json_path, reconnect_timeout = scenario.options["json_path"], scenario.options["reconnect_timeout"]
    # one line naming why there is no connection, once a passing refusal is waited out
    connect_checked(dsn, patience_s=reconnect_timeout).close()
    try:
        verdict = _audit(dsn, json_path, reconnect_timeout)
    except psycopg.Error as exc:
        raise SimError(f"database error: {reason(exc, dsn)}; check the server") from None
    sys.exit(0 if verdict.passed else 1)


def checked_audit(scenario: Scenario) -> str:
    """Every refusal that needs no server; the DSN the audit connects to."""
    dsn, json_path = scenario.options["dsn"] or os.environ.get(DSN_ENV) or None, scenario.options["json_path"]
    if dsn is None:
        raise UsageError(
            f"pgmq-sim audit needs -dsn or {DSN_ENV}: an embedded server is removed with its run"
        )
    check_dsn(dsn)
    if json_path:
        check_output_path(json_path, "-json")
    return dsn


def _audit(dsn: str, json_path: Path | None, reconnect_timeout: float) -> AuditVerdict:
    sessions = Sessions(dsn, reconnect_timeout=reconnect_timeout)
    tables = QueueDatabase(sessions).tables()
    if not tables["pgmq_sim_run"][0]:
        raise SimError(f"no pgmq-sim run found in {redact(dsn)}; run pgmq-sim there first")
    if not tables["msg_journal"][0]:
        raise SimError("the last run had no journal (-no-audit); there is nothing to audit")
    previous = QueueDatabase(sessions).previous_run()
    if previous is None:
        raise SimError(f"no run recorded in {redact(dsn)} (pgmq_sim_run is empty); run pgmq-sim there first")
    recorded = json.loads(previous.settings)
    design = recorded.get("design") or {"seed_table": True}  # older records: the seed's table
    if design["seed_table"] and not tables["msg_queue"][0]:
        raise SimError(f"no pgmq-sim run found in {redact(dsn)}; run pgmq-sim there first")
    at_least_once = design.get("delivery") == "at-least-once"
    shape = QueueShape(
        bool(design["seed_table"]),
        pending_sql=design.get("pending_sql"),
        redelivery_lease_s=float(recorded.get("lease", 30)) if at_least_once else None,
        keyed=bool(design.get("keyed")),
        # a group ordered by priority (procrastinate's lock), in a run with priorities: judged so again
        by_priority=design.get("group_order", "enqueue") != "enqueue" and bool(recorded.get("priority")),
    )
    db = QueueDatabase(sessions, shape)
    produced = db.produced(journal=True)  # the record's count lags by up to a second in a killed run
    retrying = recorded.get("tx") == "split" or bool(recorded.get("fail_rate"))
    if tables["pgmq_sim_windows"][0]:  # a run's live audit: go on from its closed windows
        counts, windows, why = counts_after_windows(db, previous.run_id, produced, retrying)
    else:
        counts, windows, why = db.audit_counts(produced, SHOW, retrying), [], None
    verdict = judge_audit(
        counts,
        expected=produced,
        ordered=previous.ordered,
        claim_sql=design.get("claim_sql"),
        at_least_once=at_least_once,
        # a run bounded by time or a sweep need not drain (older records: -duration alone said so)
        complete=previous.outcome == "completed" and recorded.get("drains", recorded.get("duration") is None),
        retrying=retrying,
    )
    console = Console(highlight=False, markup=False, stderr=json_path == STDOUT)
    state = previous.outcome or "unfinished (no outcome recorded: the run was killed or is running)"
    of = f" of {count_text(previous.target)}" if previous.target is not None else ""
    console.print(
        f"run {previous.run_id} started {previous.started_at:%Y-%m-%d %H:%M:%S}: {state};"
        f" {count_text(produced)}{of} produced"
    )
    if windows:
        failed = sum(not w.passed for w in windows)
        console.print(
            f"live audit: window(s) 1 to {len(windows)} (msg_id 1 to {windows[-1].hi:,}) judged"
            f" while the run went, {f'{count_text(failed)} failed' if failed else 'passed'}; msg_id"
            f" {windows[-1].hi + 1:,} to {produced:,} judged now"
        )
    if why is not None:
        console.print(f"live audit: {why}")
    done = f"{count_text(verdict.processed)}/{count_text(verdict.expected)} processed exactly once"
    detail = "; ".join(verdict.problems) or done
    console.print(f"audit {verdict.verdict}: {detail}; {count_text(verdict.left_behind)} still pending")
    for cause in verdict.causes:
        console.print(f"audit cause: {cause}")
    if json_path:
        write_json(
            json_path,
            {
                "run_id": previous.run_id,
                "outcome": previous.outcome or None,
                "audit": verdict.as_json(),
                "live_windows": len(windows),
                "judged_after": windows[-1].hi if windows else 0,
            },
        )
    return verdict
