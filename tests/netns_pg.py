"""Helper for test_distributed: start a TCP LocalPostgres on the given address (run it inside a
network namespace), print its DSNs as one JSON line, and remove it when stdin closes."""

from __future__ import annotations

import json
import sys

from pgmq_sim.embedded.postgres import SUPERUSER, LocalPostgres


def main() -> None:
    with LocalPostgres(tcp=True, host=sys.argv[1], port=5432) as pg:
        local = f"postgresql://{SUPERUSER}@/postgres?host={pg.socket_dir}&port={pg.port}"
        print(json.dumps({"dsn": pg.dsn, "local": local, "password": pg.password}), flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
