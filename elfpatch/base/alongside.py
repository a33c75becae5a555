"""Two pieces of work, one after the other unless the caller says how to run them.

Analyses and the verification of a patched file split their largest jobs
into two halves.  Whether those halves run in two processes is decided by
the service layer, which forks one half into a child (``service.parallel``);
the code below it takes an ``Alongside`` and defaults to ``in_turn``, so
reading, analysing and patching never start a process themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class Alongside(Protocol):
    """Runs ``here`` and ``there`` and returns both results, in that order."""

    def __call__(self, here: Callable[[], T], there: Callable[[], U], /) -> tuple[T, U]: ...


def in_turn(here: Callable[[], T], there: Callable[[], U], /) -> tuple[T, U]:
    """Both halves in this process, one after the other."""
    return here(), there()
