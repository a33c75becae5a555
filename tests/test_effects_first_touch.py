"""What a global's first touch is, when a pointer to it is handed to a function whose use
of it is worked out later (``summary.settle``), and which addresses of a file
without symbols make one object (``summary.object_keys``).

These are the rules behind ``fixtures/called_constructor`` and the stripped
-flto programs, held here on their own: a pass before any other touch of its
global is the first touch; one after a touch of the same object (known by
another key until the keys are placed) is not.
"""

from __future__ import annotations

from elfpatch.analysis.effects import Effects
from elfpatch.analysis.effects.summary import (
    USE_READ,
    USE_READ_FIRST,
    USE_WRITE,
    object_keys,
    rekeyed,
    settle,
)

CONSTRUCTOR = 0x1000  # the function the pointer is handed to


def _effects(first_access: tuple[tuple[str, bool], ...],
             pending: tuple[tuple[str, int, int, bool, bool, int], ...]) -> Effects:
    reads = tuple(key for key, written in first_access if not written)
    writes = tuple(key for key, written in first_access if written)
    return Effects(writes, reads, (), (), (), False, True, first_access=first_access,
                   pending=pending)


def _first(effects: Effects, use: int) -> dict[str, bool]:
    return dict(settle(effects, lambda _symbol, _function, _position, _foreign: use)
                .first_access)


def test_a_constructor_called_first_builds_its_object() -> None:
    """``Counter counter;`` built by a call, then read: the call is the first touch."""
    effects = _effects((("0x10", False),), (("0x10", CONSTRUCTOR, 0, False, False, 0),))
    assert _first(effects, USE_WRITE) == {"0x10": True}


def test_a_pass_after_a_read_is_not_the_first_touch() -> None:
    effects = _effects((("0x10", False),), (("0x10", CONSTRUCTOR, 0, False, False, 1),))
    assert _first(effects, USE_WRITE) == {"0x10": False}


def test_a_pass_that_uses_nothing_leaves_the_next_touch_first() -> None:
    effects = _effects((("0x10", False),), (("0x10", CONSTRUCTOR, 0, False, False, 0),))
    assert _first(effects, 0) == {"0x10": False}


def test_the_keys_of_one_object_share_their_first_touch() -> None:
    """A stripped -flto initializer stores a string's buffer pointer (``@0x10``), then
    hands the string (``^0x10``) to its constructor, which reads it first: once both
    keys are the object's, the store came first.  (Taken as the pass's own key, the
    pass looked first, and the string looked read before it was built: a false
    error on a gflags-like program's stripped -flto build.)"""
    effects = _effects((("@0x10", True),), (("^0x10", CONSTRUCTOR, 0, False, False, 1),))
    placed = rekeyed(effects, {"@0x10": "0x10", "^0x10": "0x10"})
    assert _first(placed, USE_READ | USE_READ_FIRST) == {"0x10": True}


def test_a_global_set_by_a_registration_is_no_member_of_the_registry() -> None:
    """``int plugin_ready`` right after ``std::vector<int> registry``: the registry's
    constructor stores its three pointers and nothing past them; the plugin's
    initializer hands the registry to push_back and stores plugin_ready."""
    constructor = ("^0x80", "@0x80", "@0x88", "@0x90", "!0x80", "!0x88", "!0x90")
    plugin = ("^0x80", "@0x88", "@0x98", "!0x98")
    placed = object_keys([constructor, plugin], written=("@0x80", "@0x88", "@0x90", "@0x98"))
    assert placed["@0x88"] == placed["@0x90"] == "0x80"
    assert placed["@0x98"] == "0x98"


def test_a_member_past_what_the_constructor_stores_is_still_a_member() -> None:
    """aarch64's ``stp xzr, xzr, [x0]`` stores two words under the first's key: the
    constructor's reach, not each store, says how far the object goes."""
    constructor = ("^0xb0", "@0xb0", "@0xc0", "!0xb0", "!0xc0")
    registration = ("^0xb0", "@0xb8", "!0xb8")
    placed = object_keys([constructor, registration], written=("@0xb0", "@0xb8", "@0xc0"))
    assert placed["@0xb8"] == placed["@0xc0"] == "0xb0"
