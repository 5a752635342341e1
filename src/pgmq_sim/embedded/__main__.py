"""Entry of the watchdog process: python -m pgmq_sim.embedded --watch TOP OWNER_PID OWNER_START."""

from __future__ import annotations

import sys
from pathlib import Path

from pgmq_sim.embedded.processes import watch


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] != "--watch":
        print("usage: python -m pgmq_sim.embedded --watch DIR OWNER_PID OWNER_START", file=sys.stderr)
        return 2
    watch(Path(argv[1]), int(argv[2]), int(argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
