"""Check the package's import graph: no circles, and the layering docs/architecture.md describes.

Every import counts, at module level or inside a function: a circle through a deferred import is
still a circle in the design. Exits 1 and names each problem; prints one line when all is well.

    python tools/check_imports.py [src/pgmq_sim]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "pgmq_sim"
VIEWS = ("pgmq_sim.cli", "pgmq_sim.render", "rich")  # what draws or prints
MAY_USE_VIEWS = ("pgmq_sim.cli", "pgmq_sim.render", "pgmq_sim.launch", "pgmq_sim.__main__")
# a result is a leaf: the model and what it is made of never load the driver or the SQL layer
DRIVER_FREE = (
    "pgmq_sim.verdicts.checks",
    "pgmq_sim.verdicts.drift",
    "pgmq_sim.verdicts.diff",
    "pgmq_sim.result.run",
    "pgmq_sim.verdicts.advice",
    "pgmq_sim.verdicts.audit",
    "pgmq_sim.result.stats",
    "pgmq_sim.model.events",
    "pgmq_sim.result.costs",
    "pgmq_sim.result.roles",
    "pgmq_sim.model.sweep",
    "pgmq_sim.model.keys",
    "pgmq_sim.result.serverpath",
    "pgmq_sim.verdicts.limits",
    "pgmq_sim.result.waits",
    "pgmq_sim.verdicts.outages",
)
DRIVER = ("psycopg", "psycopg_pool", "pgmq_sim.db.connection", "pgmq_sim.db.sessions", "pgmq_sim.db.queue")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(name: str, path: Path) -> set[str]:
    """Every module this file imports (absolute names; relative imports resolved)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # from pkg import module
    return found


def graph(root: Path) -> dict[str, set[str]]:
    files = {module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = imports_of(name, path)
        internal = {t for t in targets if t in files and t != name}
        external = {t.split(".")[0] for t in targets if not t.startswith(PACKAGE)}
        edges[name] = internal | external
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in edges:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def reach(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def problems(root: Path) -> list[str]:
    edges = graph(root)
    found = [f"import circle: {' <-> '.join(c)}" for c in cycles(edges)]
    for name, targets in sorted(edges.items()):
        if not under(name, MAY_USE_VIEWS):
            found += [f"{name} imports the view {t}" for t in sorted(targets) if under(t, VIEWS)]
    for name in DRIVER_FREE:
        loaded = sorted(t for t in reach(edges, name) if under(t, DRIVER))
        if loaded:
            found.append(f"{name} must not load the driver or the SQL layer, but loads {', '.join(loaded)}")
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "src" / PACKAGE)
    found = problems(root)
    for line in found:
        print(line)
    if not found:
        print(f"imports of {root}: no circles, layers kept ({len(graph(root))} modules)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
