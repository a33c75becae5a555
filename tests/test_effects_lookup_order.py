"""Which use of a registry looked into it before another registered into it
(``summary.looked_up_first``), and which fetch each piece of code belongs to
(``fetches.entry_owners``, ``fetches.with_resumes``).

Each fetch of a registry from its accessor starts one use: the code after it
that reads the registry and writes nothing there is a look-up; a later use
that writes into it is a registration the look-up missed.  A use that
touches nothing is neither, and a registration that looks for its key before
inserting it (one fetch) is no look-up.
"""

from __future__ import annotations

import pytest

from elfpatch.analysis.effects import fetches
from elfpatch.analysis.effects.fetches import entry_owners, with_resumes
from elfpatch.analysis.effects.summary import (
    FETCH,
    PASS,
    READ,
    RESUME,
    UNKNOWN_PASS,
    USE_READ,
    USE_READ_FIRST,
    USE_WRITE,
    WRITE,
    Event,
    looked_up_first,
)

R = "_ZZ8registryvE1r"  # the registry, as a symbol names it


def test_a_look_up_before_a_registration() -> None:
    log = [(FETCH, R, 0), (READ, R, 0), (FETCH, R, 1), (READ, R, 0), (WRITE, R, 0)]
    assert looked_up_first(log, ()) == (R,)


def test_a_registration_before_a_look_up() -> None:
    log = [(FETCH, R, 0), (READ, R, 0), (WRITE, R, 0), (FETCH, R, 1), (READ, R, 0)]
    assert looked_up_first(log, ()) == ()


def test_a_use_that_touches_nothing_is_no_look_up() -> None:
    """An accessor called for its side effect, or whose use the budget left out."""
    log = [(FETCH, R, 0), (FETCH, R, 1), (WRITE, R, 0)]
    assert looked_up_first(log, ()) == ()


def test_code_that_resumes_an_earlier_use_belongs_to_it() -> None:
    """The registration's insertion, laid out after the look-up's fetch."""
    log = [(FETCH, R, 0), (READ, R, 0), (FETCH, R, 1), (READ, R, 0), (FETCH, R, 0),
           (WRITE, R, 0)]
    assert looked_up_first(log, ()) == ()


def test_passes_count_once_their_use_is_known() -> None:
    log = [(FETCH, R, 0), (PASS, R, 0), (FETCH, R, 1), (PASS, R, 1)]
    looks, inserts = USE_READ | USE_READ_FIRST, USE_READ | USE_READ_FIRST | USE_WRITE
    assert looked_up_first(log, (), {0: looks, 1: inserts}) == (R,)
    assert looked_up_first(log, (), {0: inserts, 1: looks}) == ()
    # Not known yet: the first pass may register as well.
    assert looked_up_first(log, ()) == ()


def test_code_not_followed_may_register() -> None:
    log = [(FETCH, R, 0), (READ, R, 0), (UNKNOWN_PASS, R, 0), (FETCH, R, 1), (WRITE, R, 0)]
    assert looked_up_first(log, ()) == ()


def test_guards_and_other_globals_say_nothing() -> None:
    guard = "_ZGVZ8registryvE1r"
    log = [(FETCH, R, 0), (READ, guard, 0), (WRITE, "flag", 0), (READ, R, 0),
           (FETCH, R, 1), (WRITE, guard, 0), (WRITE, R, 0)]
    assert looked_up_first(log, (guard,)) == (R,)


def test_members_of_a_registry_known_by_address() -> None:
    """A file without symbols: bare addresses just past the fetched start are its
    members until objects are placed; placed, only the same object is."""
    log = [(FETCH, "^0x4000", 0), (READ, "@0x4010", 0), (FETCH, "^0x4000", 1),
           (WRITE, "@0x4028", 0)]
    assert looked_up_first(log, ()) == ("@0x4010",)
    placed = [(FETCH, "0x4000", 0), (READ, "0x4000", 0), (FETCH, "0x4000", 1),
              (WRITE, "0x4030", 0)]
    assert looked_up_first(placed, ()) == ()


def test_each_stretch_belongs_to_the_fetch_that_reaches_it() -> None:
    """Stretches: 0 fetches and branches to 3 (its insertion, laid out last) or falls
    into 1; 1 falls into 2, which fetches again and falls into 4; 3 jumps back to
    1.  Code reached from two fetches is neither's."""
    successors = [[1, 3], [2], [4], [1], [], [4]]
    owners = entry_owners({0: 10, 2: 20}, successors)
    assert owners == {1: 10, 2: 10, 3: 10, 4: 20}
    assert entry_owners({0: 10, 2: 20, 5: 30}, successors)[4] == -2  # from 2 and from 5


def test_resumes_go_in_where_the_owner_changes() -> None:
    events: list[Event] = [(FETCH, R, 10, 0), (READ, R, None, 0), (FETCH, R, 20, 0),
                           (READ, R, None, 0), (WRITE, R, None, 0)]
    stretch_of = [0, 0, 1, 1, 2]
    with_resumes(events, stretch_of, lambda: [[1, 2], [], []])
    assert events == [(FETCH, R, 10, 0), (READ, R, None, 0), (FETCH, R, 20, 0),
                      (READ, R, None, 0), (FETCH, R, 10, RESUME), (WRITE, R, None, 0)]
    assert stretch_of == [0, 0, 1, 1, 2, 2]


def test_a_function_too_big_to_attribute_is_one_use_per_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget, each key's code is one use from its first fetch on: its look-up
    and registration inside the function are not told apart (no finding)."""
    monkeypatch.setattr(fetches, "_ATTRIBUTION_BUDGET", 1)
    events: list[Event] = [(FETCH, R, 10, 0), (READ, R, None, 0), (FETCH, R, 20, 0),
                           (WRITE, R, None, 0)]
    stretch_of = [0, 0, 1, 1]
    with_resumes(events, stretch_of, lambda: [[1], []])
    assert events == [(FETCH, R, 10, 0), (READ, R, None, 0), (WRITE, R, None, 0)]
    assert stretch_of == [0, 0, 1]
    log = [(FETCH, R, 0), (READ, R, 0), (WRITE, R, 0)]
    assert looked_up_first(log, ()) == ()


def test_a_stretch_without_events_takes_no_resume() -> None:
    """Stretch 2 holds no event (a jump, a compare): the resume goes before the next
    stretch the first fetch reaches that holds one."""
    events: list[Event] = [(FETCH, R, 10, 0), (FETCH, R, 20, 0), (READ, R, None, 0),
                           (WRITE, R, None, 0)]
    stretch_of = [0, 1, 1, 3]
    with_resumes(events, stretch_of, lambda: [[2], [], [3], []])
    assert events == [(FETCH, R, 10, 0), (FETCH, R, 20, 0), (READ, R, None, 0),
                      (FETCH, R, 10, RESUME), (WRITE, R, None, 0)]
    assert stretch_of == [0, 1, 1, 3, 3]
