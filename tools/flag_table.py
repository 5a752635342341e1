"""Write README.md's flag tables from the options (src/pgmq_sim/cli/options.py), or check them.

python tools/flag_table.py           # rewrite the tables between README's markers
python tools/flag_table.py --check   # exit 1 if README's tables are not the options'
"""

from __future__ import annotations

import sys
from pathlib import Path

from pgmq_sim.cli.flag_table import BEGIN, END, flag_tables

README = Path(__file__).resolve().parents[1] / "README.md"


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    written = text[:start] + flag_tables() + text[end:]
    if "--check" in argv:
        if written != text:
            print("README.md's flag tables are not the options': run python tools/flag_table.py")
            return 1
        print("README.md's flag tables are the options'")
        return 0
    README.write_text(written, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
