"""Terminal styling shared by the text reports: colour only where it helps.

Colour is used only on a terminal and never when ``NO_COLOR`` is set
(https://no-color.org); the decision is made once by the CLI and passed in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from elfpatch.errors import ElfpatchError, InternalError

Styler = Callable[[str, str], str]


def color_wanted(stream: object = None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream if stream is not None else sys.stdout
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def make_styler(color: bool) -> Styler:
    """``style(text, role)`` where role is one of bad, warn, good, dim, head."""
    roles: dict[str, dict[str, Any]] = {
        "bad": {"fg": "red", "bold": True},
        "warn": {"fg": "yellow"},
        "good": {"fg": "green"},
        "dim": {"dim": True},
        "head": {"bold": True},
    }

    def style(text: str, role: str) -> str:
        if not color:
            return text
        return click.style(text, **roles.get(role, {}))

    return style


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural_form or singular + 's')}"


def failed_inputs(errors: Sequence[ElfpatchError]) -> str:
    """The inputs a run could not do, in words: those it could not read, and apart
    those elfpatch failed on although they read cleanly (its own bug)."""
    internal = sum(isinstance(error, InternalError) for error in errors)
    parts = []
    if len(errors) > internal:
        parts.append(plural(len(errors) - internal, "input") + " could not be read")
    if internal:
        parts.append(f"elfpatch failed on {plural(internal, 'input')} (a bug of elfpatch)")
    return "; ".join(parts)
