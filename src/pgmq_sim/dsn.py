"""A DSN as the tool handles it: checked without quoting it, redacted from its parsed parameters,
and scrubbed out of any text (a driver's message may quote it)."""

from __future__ import annotations

import contextlib
import os
import re
from urllib.parse import quote, quote_plus, unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgmq_sim.errors import UsageError

DSN_ENV = "PGMQ_SIM_DSN"
URI_SCHEME = re.compile(r"^postgres(?:ql)?://")
HIDDEN = "***"
UNPARSEABLE = "(unparseable DSN)"
DSN_FORMS = (
    "use postgres://user:password@host:port/dbname, percent-encoding special characters in the"
    " user name and password (# %23, / %2F, @ %40, : %3A, % %25, space %20),"
    " or key=value: host=H port=P user=U dbname=D password='...'"
)
PASSWORD_ENV = ("PGPASSWORD", "PGSSLPASSWORD")


def _secret_keywords() -> frozenset[str]:
    """The connection parameters libpq marks as secret (password, sslpassword, ...)."""
    names = {"password", "sslpassword", "oauth_client_secret"}
    with contextlib.suppress(Exception):
        names |= {o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults() if o.dispchar == b"*"}
    return frozenset(names)


SECRET_KEYWORDS = _secret_keywords()


def _is_secret(keyword: str) -> bool:
    return keyword in SECRET_KEYWORDS or "password" in keyword or "secret" in keyword


class BadDsn(Exception):
    """A DSN that cannot be used; the text is ours and never quotes the DSN."""


def _parse(dsn: str) -> dict[str, str]:
    """The DSN's parameters as libpq reads them, or BadDsn (without libpq's text, which quotes it)."""
    try:
        params = {key: str(value) for key, value in conninfo_to_dict(dsn).items()}
    except psycopg.Error:
        raise BadDsn("is not a valid connection string") from None
    # A password with an unencoded / or @ in a URL is split by libpq into host, port and
    # database: refuse it rather than connect to (and print) pieces of the password.
    hosts = params.get("host", "").split(",")
    if URI_SCHEME.match(dsn) and ("@" in params.get("dbname", "") or any("@" in h[1:] for h in hosts)):
        raise BadDsn("has an unencoded @ or / in its user name or password")
    if not all(port.strip().isdigit() for port in params.get("port", "").split(",") if port.strip()):
        raise BadDsn("has a port that is not a number")
    return params


def _looks_like_conninfo(text: str) -> bool:
    return "=" in text or bool(URI_SCHEME.match(text))


def _netloc(host: str, port: str) -> str | None:
    """host:port for a URL, or None when the hosts belong in the query (socket directories)."""
    hosts = host.split(",") if host else [""]
    ports = port.split(",") if port else []
    if any(h.startswith(("/", "@")) for h in hosts) or len(ports) not in (0, 1, len(hosts)):
        return None
    if len(ports) == 1:
        ports = ports * len(hosts)
    parts = []
    for i, name in enumerate(hosts):
        text = f"[{name}]" if ":" in name else quote(name, safe="")
        parts.append(text + (f":{ports[i]}" if ports and ports[i] else ""))
    return ",".join(parts)


def _label(params: dict[str, str]) -> str:
    """postgres://user:***@host:port/dbname?options, built from parsed parameters, secrets hidden."""
    rest = {key: value for key, value in params.items() if not _is_secret(key)}
    hidden = [key for key, value in params.items() if _is_secret(key) and value]
    user, host, port = rest.pop("user", ""), rest.pop("host", ""), rest.pop("port", "")
    dbname = rest.pop("dbname", "")
    if _looks_like_conninfo(dbname):  # a dbname may be a connection string: redact it too
        dbname, rest = "", {"dbname": redact(dbname)} | rest
    netloc = _netloc(host, port)
    if netloc is None:
        netloc, rest = "", {"host": host, "port": port} | rest
    userinfo = quote(user, safe="") + (f":{HIDDEN}" if "password" in hidden else "")
    query = [f"{key}={quote(value, safe='/:,@*')}" for key, value in rest.items() if value]
    query += [f"{key}={HIDDEN}" for key in hidden if key != "password"]
    return (
        "postgres://"
        + (f"{userinfo}@" if userinfo else "")
        + netloc
        + (f"/{quote(dbname, safe='')}" if dbname else "")
        + ("?" + "&".join(query) if query else "")
    )


def redact(dsn: str) -> str:
    """The DSN fit to print: rebuilt from its parsed parameters without any secret.

    A DSN that cannot be parsed is not printed at all.
    """
    try:
        return _label(_parse(dsn))
    except BadDsn:
        return UNPARSEABLE


def _secrets(dsn: str) -> list[str]:
    """Every form a secret of this DSN or the environment could take in a message, longest first."""
    found = {value for key, value in _parse_loosely(dsn).items() if _is_secret(key)}
    # In postgres://user:pw@host?password=other libpq keeps only the query's password.
    match = re.match(r"postgres(?:ql)?://([^@/]*)@", dsn)
    if match and ":" in match.group(1):
        found.add(match.group(1).split(":", 1)[1])
    found |= {os.environ.get(name, "") for name in PASSWORD_ENV}
    forms = set()
    for secret in filter(None, found):
        for text in {secret, unquote(secret), unquote(unquote(secret))}:
            escaped = text.replace("\\", "\\\\").replace("'", "\\'")  # as in key='value'
            forms |= {text, escaped, quote(text, safe=""), quote(text), quote_plus(text)}
    return sorted(filter(None, forms), key=len, reverse=True)


def holds_secret(dsn: str) -> bool:
    """Whether the DSN itself holds a password (or another secret): a scenario never keeps one."""
    match = re.match(r"postgres(?:ql)?://([^@/]*)@", dsn)
    return bool(match and ":" in match.group(1)) or any(_is_secret(key) for key in _parse_loosely(dsn))


def _parse_loosely(dsn: str) -> dict[str, str]:
    try:
        return {key: str(value) for key, value in conninfo_to_dict(dsn).items()}
    except psycopg.Error:
        return {}


def reason(exc: BaseException, dsn: str, *others: str | None) -> str:
    """An exception's first line, fit to print: never trust a driver's message not to quote a DSN
    (the run's, and any other it was given, as -listen-dsn)."""
    return scrub(first_line(exc), dsn, *others)


def scrub(text: str, dsn: str, *others: str | None) -> str:
    """The text with each DSN and every form of its password (or $PGPASSWORD's) hidden."""
    for each in (dsn, *others):
        if each:
            text = text.replace(each, redact(each))
            for secret in _secrets(each):
                text = text.replace(secret, HIDDEN)
    return text


def check_dsn(dsn: str, source: str = "-dsn") -> None:
    """A usage error, naming the form to use, for a DSN that cannot be used (never quoting it)."""
    try:
        _parse(dsn)
    except BadDsn as exc:
        raise UsageError(f"{source} {exc} (not shown: it may hold a password); {DSN_FORMS}") from None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
