"""Which fetch of a registry each piece of one function's code belongs to.

A function's events come in address order, and gcc lays code out of line:
a registration inlined into an initializer (gcc -flto merges every TU's
into one) fetches the registry, looks for its key, and inserts it on a
branch laid out after the next TU's look-up, which fetches the registry
anew.  In address order the insertion follows that look-up's fetch; it
belongs to the registration's.  Code belongs to the fetch of a key that
reaches it, through the function's stretches (``dying.Stretches``), without
passing another fetch of that key; where that is not the fetch that comes
last before it in address order, a *resume* of its own fetch (``FETCH`` at
``RESUME``) is put before it, and composing (``summary.LookupOrder``)
charges it to that one.  Worked out a stretch at a time: code up to a
stretch's first fetch belongs to whatever fetch reaches the stretch, code
after it to that fetch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from elfpatch.analysis.effects.dying import drop_events
from elfpatch.analysis.effects.summary import FETCH, RESUME, Event

# A stretch no fetch reaches, or one that several do.
_NONE, _SEVERAL = -1, -2
# How many stretches times keys fetched again one function's code is worked out for
# at most.  Past it (a merged initializer of thousands of TUs, each fetching several
# registries), each key's code is one use from its first fetch on: no look-up
# inside the function is told from a registration, none is reported.
_ATTRIBUTION_BUDGET = 200_000


def with_resumes(events: list[Event], stretch_of: list[int],
                 successors: Callable[[], Sequence[list[int]]]) -> None:
    """Resumes put before the stretches whose code belongs to another fetch than the
    one last before them, for each key fetched more than once; ``stretch_of``
    (each event's stretch, -1: made apart from the sweep; no longer than
    ``events``) kept in step, in place.  ``successors``: the stretches each falls
    or branches into, worked out if needed."""
    fetches: dict[str, list[int]] = {}
    for n, event in enumerate(events[:len(stretch_of)]):
        if event[0] == FETCH and stretch_of[n] >= 0:
            fetches.setdefault(event[1], []).append(n)
    again = {key: found for key, found in fetches.items() if len(found) > 1}
    if not again:
        return
    if len(again) * (max(stretch_of) + 1) > _ATTRIBUTION_BUDGET:
        _one_use_each(events, stretch_of, again)
        return
    following = successors()
    first_event: dict[int, int] = {}
    for n, stretch in enumerate(stretch_of):
        first_event.setdefault(stretch, n)
    resumes: dict[int, list[Event]] = {}  # event index -> the resumes to put before it
    for key, found in again.items():
        last_in = {stretch_of[n]: n for n in found}  # each stretch's last fetch of the key
        entries = entry_owners(last_in, following)
        current = _NONE
        for stretch in sorted(entries.keys() | last_in.keys()):
            owner = entries.get(stretch, _NONE)
            if owner >= 0 and owner != current and stretch in first_event:
                resumes.setdefault(first_event[stretch], []).append(
                    (FETCH, key, events[owner][2], RESUME))
                current = owner
            current = last_in.get(stretch, current)
    _insert(events, stretch_of, resumes)


def entry_owners(last_in: dict[int, int], successors: Sequence[list[int]]) -> dict[int, int]:
    """Each stretch one or more fetches of a key reach -> the one fetch that reaches
    its start without passing another (``_SEVERAL`` where more than one does).
    ``last_in``: each stretch holding fetches of the key -> the last of them (the
    one whose code runs on out of it)."""
    owners: dict[int, int] = {}
    for stretch, fetch in last_in.items():
        seen: set[int] = set()  # its own stretch again, in a loop: what runs before it
        pending = list(successors[stretch])
        while pending:
            reached = pending.pop()
            if reached in seen:
                continue
            seen.add(reached)
            owners[reached] = fetch if owners.get(reached, fetch) == fetch else _SEVERAL
            if reached not in last_in:  # a fetch there starts another use
                pending.extend(successors[reached])
    return owners


def _one_use_each(events: list[Event], stretch_of: list[int],
                  again: dict[str, list[int]]) -> None:
    """Each key's fetches after its first one left out, ``stretch_of`` in step."""
    drop_events(events, stretch_of, {n for found in again.values() for n in found[1:]})


def _insert(events: list[Event], stretch_of: list[int], resumes: dict[int, list[Event]],
            ) -> None:
    """``resumes`` put before the events they name, ``stretch_of`` in step."""
    if not resumes:
        return
    kept: list[Event] = []
    stretches: list[int] = []
    for n, event in enumerate(events[:len(stretch_of)]):
        put = resumes.get(n, ())
        kept += put
        stretches += [stretch_of[n]] * len(put)
        kept.append(event)
        stretches.append(stretch_of[n])
    events[:len(stretch_of)] = kept
    stretch_of[:] = stretches
