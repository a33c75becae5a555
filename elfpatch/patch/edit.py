"""An edit: bytes the writer puts at one file offset, and the table they must lie in.

Its own module because both the makers of edits (``reorder.py``,
``rewrite.py``) and the proof that they stay in their tables (``regions.py``)
speak of it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """Bytes to write at a file offset, what they are (for reports and tests), and the
    kind of table they must lie in (one of the kinds of ``regions.py``)."""

    offset: int
    data: bytes | bytearray
    what: str
    table: str
