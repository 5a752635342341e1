"""Check the house's sizes: no module over 500 lines, no class over 250, no function over 100
(a method counts as a function; a nested function counts inside its own). Exits 1 and names each
one over its limit; prints one line when all is well.

    python tools/check_sizes.py [src/pgmq_sim]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 500, 250, 100
EXCLUDED: tuple[str, ...] = ()  # folders of the package not checked


def problems(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts[0] in EXCLUDED:
            continue
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            found.append(f"{relative}: {lines} lines (a module at most {MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                limit, kind = (
                    (CLASS_LINES, "class") if isinstance(node, ast.ClassDef) else (FUNCTION_LINES, "function")
                )
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > limit:
                    found.append(
                        f"{relative}:{node.lineno}: {kind} {node.name}, {length} lines (at most {limit})"
                    )
    return found


def main(argv: list[str]) -> int:
    package = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "src" / "pgmq_sim"
    found = problems(package)
    for problem in found:
        print(problem)
    if found:
        return 1
    print(
        f"sizes of {package}: no module over {MODULE_LINES} lines, no class over {CLASS_LINES},"
        f" no function over {FUNCTION_LINES}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
