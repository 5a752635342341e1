"""A DSN fit to print: rebuilt from its parsed parameters without any secret, and every form of the
password scrubbed out of a driver's message. Pure: no server."""

from __future__ import annotations

import threading
from urllib.parse import quote

import pytest
from secret_forms import PASSWORD, WRONG, assert_no_secret, forms

from pgmq_sim.dsn import redact, scrub
from pgmq_sim.engine.bounded import FirstError

pytestmark = pytest.mark.unit

H = "/tmp/sock dir"
E = quote(PASSWORD, safe="")


@pytest.mark.parametrize(
    "dsn,label",
    [
        (f"postgres://u:{E}@db.example:5433/app", "postgres://u:***@db.example:5433/app"),
        (
            f"postgresql://u:{E}@db.example/app?sslmode=require",
            "postgres://u:***@db.example/app?sslmode=require",
        ),
        (f"postgres://u:{quote(PASSWORD)}@h/app", "(unparseable DSN)"),  # quote() leaves / as is
        (f"postgres://u:{quote(PASSWORD, safe='#')}@h/app", "postgres://u:***@h/app"),  # # is valid as is
        (f"postgres://u@h/app?password={E}", "postgres://u:***@h/app"),
        (f"postgres://u:{E}@h/app?password=other", "postgres://u:***@h/app"),
        (
            f"postgres://u@h/app?sslpassword={E}&application_name=x",
            "postgres://u@h/app?application_name=x&sslpassword=***",
        ),
        (f"postgres://u:{E}@[::1]:5432/app", "postgres://u:***@[::1]:5432/app"),
        (f"postgres://u:{E}@h1:5,h2:6/app", "postgres://u:***@h1:5,h2:6/app"),
        (f"postgresql://u:{E}@/app?host={quote(H)}", f"postgres://u:***@/app?host={quote(H)}"),
        (
            f"host='{H}' user=u password='{PASSWORD.replace(chr(39), chr(92) + chr(39))}' dbname=app",
            f"postgres://u:***@/app?host={quote(H, safe='/')}",
        ),
        (f"host=h port=5 user=u dbname=app password={PASSWORD.split()[0]}", "postgres://u:***@h:5/app"),
        (f"dbname=postgres://u:{E}@h/app", "postgres://?dbname=postgres://u:***@h/app"),
        ("postgres://u@h/app", "postgres://u@h/app"),
        ("service=mine", "postgres://?service=mine"),
        (f"http://u:{E}@h", "(unparseable DSN)"),
        (f"postgres://u:{E}@[::1", "(unparseable DSN)"),
        (f"garbage {PASSWORD}", "(unparseable DSN)"),
        (f"postgres://u:{PASSWORD}@h/app", "(unparseable DSN)"),
        (f"postgres://u:{PASSWORD.replace(' ', '')}@h/app", "(unparseable DSN)"),
        (f"postgres://u:{PASSWORD.replace(' ', '').replace('/', '')}@h/app", "(unparseable DSN)"),
        (f"host=h password={PASSWORD}", "(unparseable DSN)"),
    ],
)
def test_redact(dsn: str, label: str) -> None:
    assert redact(dsn) == label
    assert_no_secret(redact(dsn), PASSWORD)


def test_scrub_hides_every_form_of_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    dsn = f"postgres://u:{E}@h/app?password={quote(WRONG, safe='')}"
    monkeypatch.setenv("PGPASSWORD", "env-Secret-9")
    message = " | ".join(sorted(forms(PASSWORD) | forms(WRONG) | {"env-Secret-9", dsn}))
    scrubbed = scrub(message, dsn)
    assert_no_secret(scrubbed, PASSWORD, WRONG, "env-Secret-9")
    assert "***" in scrubbed


def test_a_run_error_hides_the_listen_dsn_password_too() -> None:
    """-listen-dsn is a second DSN: an error a thread reports is scrubbed of both DSNs' secrets."""
    dsn, listen = "postgres://u@h/app", f"postgres://l:{E}@direct/app"
    errors = FirstError(threading.Event())
    errors.report("notify listener", RuntimeError(f"could not connect with {listen} ({PASSWORD})"))
    described = errors.describe(dsn, listen)
    assert described is not None
    assert_no_secret(described[1], PASSWORD)
    assert "postgres://l:***@direct/app" in described[1]
