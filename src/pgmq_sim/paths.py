"""Paths as a person reads them."""

from __future__ import annotations

from pathlib import Path


def describe_path(path: Path) -> str:
    """A path fit to print on one line, whatever bytes its name holds."""
    return repr(str(path))[1:-1] if not str(path).isprintable() else str(path)
