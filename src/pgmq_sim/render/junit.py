"""-junit FILE: one test case per -check and one for the audit, in the JUnit XML every CI reads."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from pgmq_sim.model.checks import number
from pgmq_sim.model.quantities import count_text
from pgmq_sim.render.files import write_text
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.verdict import RunVerdict


def junit_document(results: list[RunResult], verdicts: list[RunVerdict]) -> str:
    suites = ET.Element("testsuites", name="pgmq-sim")
    for result, verdict in zip(results, verdicts, strict=True):
        cases: list[tuple[str, str | None, str]] = []  # (name, failure or None, what was measured)
        skipped: dict[str, str] = {}  # a check not judged: skipped, with why
        for c in verdict.checks:
            value = "not measured" if c.value is None else f"{number(c.value)} {c.check.unit}".rstrip()
            failure = None if c.passed is not False else f"{c.check}: {value}"
            cases.append((f"check {c.check}", failure, value))
            if c.not_judged is not None:
                skipped[f"check {c.check}"] = f"not judged: {c.not_judged}"
        if result.audit is not None:
            audit = result.audit
            said = f"{audit.verdict}: {count_text(audit.processed)} of {count_text(audit.expected)} processed"
            failure = None if audit.passed else f"audit failed: {'; '.join(audit.problems)}"
            cases.append(("audit: exactly once, in order", failure, said))
        if result.outcome.exit_code != 0:
            cases.append((f"run {result.outcome}", result.error or str(result.outcome), str(result.outcome)))
        name = f"pgmq-sim {result.strategy}/{result.settings.wakeup}"
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=name,
            tests=str(len(cases)),
            failures=str(sum(1 for _, f, _ in cases if f is not None)),
            skipped=str(len(skipped)),
            time=f"{result.elapsed_s:.3f}",
        )
        for case_name, failure, measured in cases:
            case = ET.SubElement(suite, "testcase", classname=name, name=case_name)
            if failure is not None:
                ET.SubElement(case, "failure", message=failure).text = failure
            if case_name in skipped:
                ET.SubElement(case, "skipped", message=skipped[case_name])
            ET.SubElement(case, "system-out").text = measured
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def write_junit(path: Path, results: list[RunResult], verdicts: list[RunVerdict]) -> None:
    write_text(path, junit_document(results, verdicts), "-junit")
