"""Check the package's import graph: no circles, and the arrows between parts that
docs/architecture.md draws.

A part is a folder of the package (`model`, `db`, `actors`, ...) or one of the few modules at its
root (`settings`, `dsn`, ...). `ALLOWED` says which parts each part may import; any other arrow is
a problem, and so is a module in no known part. Every import counts, at module level or inside a
function: a circle through a deferred import is still a circle in the design. Besides the arrows:
the model, the result and the verdicts never load the driver (not even through another module), and
nothing but the command line and the views draws (`rich`). Exits 1 and names each problem; prints
one line when all is well.

    python tools/check_imports.py [src/pgmq_sim]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "pgmq_sim"
LEAVES = {"errors", "paths"}  # values and small tools every part may use
ALLOWED: dict[str, set[str]] = {
    # the base at the package's root
    "errors": set(),
    "paths": set(),
    "dsn": set(),
    "sqlfiles": set(),
    "runlog": set(),
    "model": set(),  # the run's vocabulary: kinds, events, traffic, keys, the sweep's plan, facts
    "settings": {"model"},
    "embedded": set(),
    "server": {"dsn", "embedded"},
    "designs": {"model", "sqlfiles"},  # the queue designs: built-in folders of SQL, and the loader
    # the parts
    "db": {"model", "dsn", "sqlfiles", "designs"},  # the only part that speaks SQL
    "result": {"model", "settings"},  # what a run measured and what its result is
    "verdicts": {"result", "model", "settings"},  # what is read from a result, never the database
    "actors": {"db", "designs", "model", "result", "settings", "sqlfiles", "dsn", "runlog"},
    "engine": {
        "actors",
        "db",
        "designs",
        "model",
        "result",
        "verdicts",
        "settings",
        "sqlfiles",
        "dsn",
        "runlog",
        "server",
    },
    "distributed": {
        *("engine", "actors", "db", "designs", "model", "result"),
        *("settings", "dsn", "runlog", "server"),
    },
    "render": {"result", "verdicts", "model", "settings"},  # the views: no actor, no engine, no database
    "cli": {"*"},
    "launch": {"cli"},
    "__main__": {"launch"},
    "": set(),  # the package's __init__
}
DRIVER = ("psycopg", "psycopg_pool", "pgmq_sim.db")
DRIVER_FREE = ("model", "result", "verdicts")  # built and tested without a server
VIEWS = ("pgmq_sim.cli", "pgmq_sim.render", "rich")  # what draws or prints
MAY_DRAW = ("cli", "render", "launch", "__main__")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def part_of(name: str) -> str:
    """pgmq_sim.db.claims -> db; pgmq_sim.settings -> settings; pgmq_sim -> ''."""
    return name.split(".")[1] if name.count(".") else ""


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


def arrow_problems(edges: dict[str, set[str]]) -> list[str]:
    found = []
    for name, targets in sorted(edges.items()):
        part = part_of(name)
        if part not in ALLOWED:
            found.append(
                f"{name} is in no part of docs/architecture.md: move it into a folder, or name its part"
            )
            continue
        allowed = ALLOWED[part]
        for target in sorted(t for t in targets if t.startswith(PACKAGE + ".")):
            other = part_of(target)
            if other != part and other not in LEAVES and "*" not in allowed and other not in allowed:
                found.append(f"{name} imports {target}: the part '{part}' may not import '{other}'")
    return found


def problems(root: Path, edges: dict[str, set[str]] | None = None) -> list[str]:
    edges = graph(root) if edges is None else edges
    found = [f"import circle: {' <-> '.join(c)}" for c in cycles(edges)]
    found += arrow_problems(edges)
    for name, targets in sorted(edges.items()):
        if part_of(name) not in MAY_DRAW:
            found += [f"{name} imports the view {t}" for t in sorted(targets) if under(t, VIEWS)]
    for name in sorted(edges):
        if part_of(name) in DRIVER_FREE:
            loaded = sorted(t for t in reach(edges, name) if under(t, DRIVER))
            if loaded:
                found.append(
                    f"{name} must not load the driver or the SQL layer, but loads {', '.join(loaded)}"
                )
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "src" / PACKAGE)
    edges = graph(root)  # every module parsed once
    found = problems(root, edges)
    for line in found:
        print(line)
    if not found:
        print(f"imports of {root}: no circles, every arrow allowed ({len(edges)} modules)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
