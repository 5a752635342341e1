"""Paths, and other text a user gave, as a person reads them."""

from __future__ import annotations

from pathlib import Path


def describe_path(path: Path | str) -> str:
    """A path (or any text a user gave) fit to print on one line, whatever characters it holds."""
    return repr(str(path))[1:-1] if not str(path).isprintable() else str(path)
