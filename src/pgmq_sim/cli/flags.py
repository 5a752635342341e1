"""Flags spelled as the Go tool spells them (-fill-db) and as GNU does (--fill-db)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def flag(name: str, dest: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """An option spelled both -name (as the Go tool) and --name."""
    return click.option(f"-{name}", f"--{name}", dest or name.replace("-", "_"), **kwargs)
