"""Which fetch of a registry each piece of one function's code belongs to.

A function's events come in address order, and gcc lays code out of line:
a registration inlined into an initializer (gcc -flto merges every TU's
into one) fetches the registry, looks for its key, and inserts it on a
branch laid out after the next TU's look-up, which fetches the registry
anew.  In address order the insertion follows that look-up's fetch; it
belongs to the registration's.  Each event belongs to the fetch of a key
that reaches it, through the function's stretches (``dying.Stretches``),
without passing another fetch of that key; where that is not the fetch
that comes last before it in address order, a *resume* of its own fetch
(``FETCH`` at ``RESUME``) is put before it, and composing
(``summary.LookupOrder``) charges it to that one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from elfpatch.analysis.effects.summary import FETCH, RESUME, Event

# An event no fetch reaches, or one that several do.
_NONE, _SEVERAL = -1, -2


def with_resumes(events: list[Event], stretch_of: list[int],
                 successors: Callable[[], Sequence[list[int]]]) -> None:
    """Resumes put before the events whose fetch is not the one last before them, for
    each key fetched more than once; ``stretch_of`` (each event's stretch, -1: made
    apart from the sweep; no longer than ``events``) kept in step, in place.
    ``successors``: the stretches each falls or branches into, worked out if needed."""
    fetches: dict[str, list[int]] = {}
    for n, event in enumerate(events):
        if event[0] == FETCH:
            fetches.setdefault(event[1], []).append(n)
    if all(len(found) == 1 for found in fetches.values()):
        return
    following = successors()
    for key, found in fetches.items():
        if len(found) > 1:
            # The indices move as resumes go in: found again, in the events as they are.
            found = [n for n, event in enumerate(events) if event[0] == FETCH
                     and event[1] == key and event[3] != RESUME]
            _resume(events, stretch_of, key, fetch_owners(stretch_of, found, following))


def fetch_owners(stretch_of: list[int], fetches: list[int],
                 successors: Sequence[list[int]]) -> list[int]:
    """For each event of the sweep (``stretch_of``), the index of the one fetch among
    ``fetches`` (event indices of one key's fetches) that reaches it without
    passing another; ``_NONE`` or ``_SEVERAL`` otherwise."""
    members: dict[int, list[int]] = {}
    for n, stretch in enumerate(stretch_of):
        if stretch >= 0:
            members.setdefault(stretch, []).append(n)
    fetching = {n for n in fetches if n < len(stretch_of)}
    owners = [_NONE] * len(stretch_of)

    def claim(fetch: int, events: list[int]) -> bool:
        """``fetch`` reaches ``events`` up to the next fetch; whether it reaches past."""
        for n in events:
            if n in fetching:
                return False
            owners[n] = fetch if owners[n] in (_NONE, fetch) else _SEVERAL
        return True

    for fetch in fetching:
        stretch = stretch_of[fetch]
        if stretch < 0:
            continue
        after = [n for n in members[stretch] if n > fetch]
        if not claim(fetch, after):
            continue
        seen: set[int] = set()  # its own stretch again, in a loop: what runs before it
        pending = list(successors[stretch])
        while pending:
            following = pending.pop()
            if following in seen:
                continue
            seen.add(following)
            if claim(fetch, members.get(following, [])):
                pending.extend(successors[following])
    return owners


def _resume(events: list[Event], stretch_of: list[int], key: str, owners: list[int]) -> None:
    """Resumes of ``key``'s fetches where an event's owner is not the fetch in force."""
    kept: list[Event] = []
    stretches: list[int] = []
    current = _NONE
    for n, event in enumerate(events[:len(owners)]):
        if event[0] == FETCH and event[1] == key:
            current = n
        elif owners[n] >= 0 and owners[n] != current:
            current = owners[n]
            kept.append((FETCH, key, events[current][2], RESUME))
            stretches.append(stretch_of[n])
        kept.append(event)
        stretches.append(stretch_of[n])
    events[:len(owners)] = kept
    stretch_of[:] = stretches
