"""String-valued enums whose text is their value, wherever they are printed."""

from __future__ import annotations

import enum


class TextEnum(str, enum.Enum):
    """A closed set of names that JSON, text and comparisons see as plain strings.

    ``str()`` and f-strings give the value (``init-order``), not the member's
    name (``RiskKind.INIT_ORDER``), the same on every Python from 3.10.
    """

    def __str__(self) -> str:
        return str(self.value)
