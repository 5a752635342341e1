"""Ask about the house's long parts: a module over 500 lines, a class over 250, a function over
100 (a method counts as a function; a nested function counts inside its own). Length is a question,
not a failure: a declarative table, or one concept, may be long; a module holding two concepts is
split by them, never for its length alone. Names each one over its length as a question and exits
0; prints one line when none is.

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
        print(f"{problem}: one concept, or two to split by?")
    if found:
        return 0
    print(
        f"sizes of {package}: no module over {MODULE_LINES} lines, no class over {CLASS_LINES},"
        f" no function over {FUNCTION_LINES}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
