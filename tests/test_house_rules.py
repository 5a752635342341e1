"""The house's rules, as tools/ checks them: the import graph has no circle and keeps its layers,
the sizes hold, each check names what breaks it, and the package root keeps at most ten modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.unit


def tool(name: str, *args: Path) -> subprocess.CompletedProcess[str]:
    """One of tools/, run as .ci/run runs it."""
    command = [sys.executable, str(REPO / "tools" / name), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_import_graph_of_the_package_has_no_circle_and_keeps_its_layers() -> None:
    checked = tool("check_imports.py")
    assert checked.returncode == 0, checked.stdout
    assert "no circles" in checked.stdout


def test_the_size_check_asks_about_each_long_part_and_fails_nothing(tmp_path: Path) -> None:
    """A module over 500 lines, a class over 250, a function over 100 (tools/check_sizes.py): the
    check names each, in every part (verdicts/ too), as a question, and exits 0: length alone is
    no reason to split a module."""
    checked = tool("check_sizes.py")
    assert checked.returncode == 0, checked.stdout
    package = tmp_path / "pgmq_sim"
    (package / "render").mkdir(parents=True)
    (package / "verdicts").mkdir()
    method = "    def long(self) -> None:\n" + "        pass\n" * 101
    (package / "render" / "big.py").write_text("class Big:\n" + method * 3 + "x = 1\n" * 200)
    (package / "verdicts" / "big.py").write_text("x = 1\n" * 600)
    checked = tool("check_sizes.py", package)
    assert checked.returncode == 0
    assert "render/big.py: 507 lines (a module at most 500): one concept, or two" in checked.stdout
    assert "render/big.py:1: class Big, 307 lines (at most 250)" in checked.stdout
    assert "render/big.py:2: function long, 102 lines (at most 100)" in checked.stdout
    assert "verdicts/big.py: 600 lines (a module at most 500)" in checked.stdout


def test_import_check_catches_a_circle_a_view_a_driver_and_each_forbidden_arrow(tmp_path: Path) -> None:
    package = tmp_path / "pgmq_sim"
    files = {
        "__init__.py": "",
        "errors.py": "",
        "settings.py": "from pgmq_sim import errors\n",  # a leaf: allowed everywhere
        "a.py": "from pgmq_sim import b\n",  # a module in no part
        "b.py": "def f():\n    from pgmq_sim.a import x\n",  # a deferred import is still a circle
        "render/terminal.py": "from pgmq_sim.actors import worker\n",  # a view importing an actor
        "engine/run.py": "import pgmq_sim.render.terminal\n",  # the engine drawing
        "result/run.py": "import psycopg\nfrom pgmq_sim.verdicts import checks\n",  # the data judging
        "verdicts/checks.py": "from pgmq_sim.result import run\n",  # allowed
        "verdicts/limits.py": "from pgmq_sim.db import views\n",  # a verdict reading the database
        "model/traffic.py": "from pgmq_sim.settings import Settings\n",  # the model depending up
        "db/views.py": "",
        "actors/worker.py": "from pgmq_sim.db import views\n",  # allowed
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    for folder in ("render", "engine", "result", "verdicts", "model", "db", "actors"):
        (package / folder / "__init__.py").write_text("")
    checked = tool("check_imports.py", package)
    assert checked.returncode == 1
    out = checked.stdout
    assert "import circle: pgmq_sim.a <-> pgmq_sim.b" in out
    assert "pgmq_sim.a is in no part of docs/architecture.md" in out
    assert "pgmq_sim.engine.run imports the view pgmq_sim.render.terminal" in out
    assert (
        "pgmq_sim.engine.run imports pgmq_sim.render.terminal: the part 'engine' may not import 'render'"
        in out
    )
    assert (
        "pgmq_sim.render.terminal imports pgmq_sim.actors.worker: the part 'render' may not import 'actors'"
        in out
    )
    assert (
        "pgmq_sim.result.run imports pgmq_sim.verdicts.checks: the part 'result' may not import 'verdicts'"
        in out
    )
    assert (
        "pgmq_sim.verdicts.limits imports pgmq_sim.db.views: the part 'verdicts' may not import 'db'" in out
    )
    assert (
        "pgmq_sim.model.traffic imports pgmq_sim.settings: the part 'model' may not import 'settings'" in out
    )
    assert "pgmq_sim.result.run must not load the driver or the SQL layer, but loads psycopg" in out
    assert "pgmq_sim.verdicts.limits must not load the driver or the SQL layer, but loads pgmq_sim.db" in out
    # the allowed arrows are not named
    assert "pgmq_sim.actors.worker imports" not in out and "pgmq_sim.verdicts.checks imports" not in out
    assert "pgmq_sim.settings imports" not in out


def test_the_package_root_keeps_at_most_ten_modules() -> None:
    root = REPO / "src" / "pgmq_sim"
    modules = sorted(p.name for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(modules) <= 10, modules
