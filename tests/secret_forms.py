"""A password with every character that needs quoting somewhere, and the check that no piece of it,
in any form a DSN or a driver could give it, appears in a text."""

from __future__ import annotations

from urllib.parse import quote, quote_plus, unquote

# Every character that needs quoting somewhere: # / @ : % space ' " (and %41, which decodes).
PASSWORD = "Zq#7/k@X:w%41 rd'\"Yv"
WRONG = "Wr0ng#pa/ss%20w@:d"


def forms(secret: str) -> set[str]:
    """The secret as it could appear: raw, percent-encoded (several ways), percent-decoded, quoted."""
    found = set()
    for text in (secret, unquote(secret)):
        found |= {text, quote(text, safe=""), quote(text), quote_plus(text)}
        found.add(text.replace("\\", "\\\\").replace("'", "\\'"))
    return found


def fragments(secret: str, size: int = 4) -> set[str]:
    """Every distinctive piece of `size` characters of every form of the secret (not "541+",
    which a log's time stamp has too)."""
    pieces = {form[i : i + size] for form in forms(secret) for i in range(len(form) - size + 1)}
    return {piece for piece in pieces if piece.strip("0123456789+-:./ ")}


def assert_no_secret(text: str | bytes, *secrets: str, size: int = 4) -> None:
    data = text if isinstance(text, bytes) else text.encode()
    for secret in secrets:
        for piece in sorted(fragments(secret, size)):
            assert piece.encode() not in data, (piece, secret)
