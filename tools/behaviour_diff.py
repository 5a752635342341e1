"""Behaviour unchanged across a refactor (issue 52): the same seeded runs on two trees, their JSON
compared key by key, and each tree's HTML report rendered from the same documents, byte for byte.

A run's figures that are timed (latencies, CPU, the wait samples' shares, the seconds of its
timeline) differ from run to run on any tree; its keys, its counts and its settings do not. So the
JSON is compared by key (the keys only one tree wrote are listed) and the keys whose values
differ are named; the report, which is drawn from the JSON alone, must be the same bytes (but for
the minute it says it was written).

    python tools/behaviour_diff.py --old /tmp/old/src --new src --dsn postgresql://...
    (git archive <commit> src | tar -x -C /tmp/old: the old tree)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RUNS = {
    "drain": "-fill-db 2000 -workers 4 -orders 20 -claim indexed -work-ms 0-1 -seed 11",
    "paced": "-rate 300 -duration 4 -workers 4 -orders 20 -claim indexed -seed 12",
    "compare": "-fill-db 1000 -workers 4 -orders 20 -work-ms 0-1 -seed 13 -compare seed/poll,indexed/notify",
}
RENDER = (
    "import json, sys\n"
    "from pgmq_sim.render.report import run_report\n"
    "doc = json.load(open(sys.argv[1]))\n"
    "docs = doc['runs'] if 'runs' in doc else [doc]\n"
    "sys.stdout.write(run_report(docs, 'x', compare='runs' in doc))\n"
)


def run(tree: str, dsn: str, args: str, out: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "pgmq_sim", "-dsn", dsn, "-progress", "off", *args.split()]
    answer = subprocess.run(
        [*command, "-json", str(out)], env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True
    )
    if not out.exists():
        raise SystemExit(f"behaviour_diff: the run on {tree} wrote no JSON: {answer.stderr.strip()[-300:]}")
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def values(doc: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf by its path ('.limit.evidence', '.timeline[3].processed')."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from values(value, f"{prefix}.{key}")
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from values(value, f"{prefix}[{index}]")
    else:
        yield prefix, doc


def named(path: str) -> str:
    """A path to the key it is under, two deep, without list places: 'timeline.e2e_p99_ms'."""
    return ".".join(part.split("[")[0] for part in path.split(".")[1:3])


WRITTEN_AT = re.compile(r" on \d{4}-\d\d-\d\d \d\d:\d\d UTC")  # the page's own time: the minute it was drawn


def render(tree: str, document: Path) -> str:
    answer = subprocess.run(
        [sys.executable, "-c", RENDER, str(document)],
        env=dict(os.environ, PYTHONPATH=tree),
        capture_output=True,
        text=True,
    )
    if answer.returncode:
        raise SystemExit(f"behaviour_diff: {tree} could not draw the report: {answer.stderr.strip()[-300:]}")
    return WRITTEN_AT.sub(" on <the minute drawn>", answer.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", required=True, help="the old tree's src folder")
    parser.add_argument("--new", required=True, help="the new tree's src folder")
    parser.add_argument("--dsn", required=True, help="a database the runs may use (-replace-tables)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pgmq-behaviour-") as tmp:
        for name, flags in RUNS.items():
            flags += " -replace-tables"
            old = dict(values(run(args.old, args.dsn, flags, Path(tmp) / f"old-{name}.json")))
            new_json = Path(tmp) / f"new-{name}.json"
            new = dict(values(run(args.new, args.dsn, flags, new_json)))
            both = old.keys() & new.keys()
            unequal = [p for p in both if old[p] != new[p]]
            print(f"== {name}: {len(new)} values, {len(both) - len(unequal)} of them equal on both trees")
            for side, only in (("old", old.keys() - new.keys()), ("new", new.keys() - old.keys())):
                keys = ", ".join(sorted({named(p) for p in only})) or "none"
                print(f"   keys only the {side} tree wrote: {keys}")
            print(f"   keys whose values differ (timed): {', '.join(sorted({named(p) for p in unequal}))}")
            same = render(args.old, new_json) == render(args.new, new_json)
            print(f"   the report drawn from the same document: {'byte-identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
