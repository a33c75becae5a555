"""The paths a function takes when a caller passes it constants.

An initializer that calls ``make(2)`` runs only the ``case 2`` of
``make``'s switch: the globals the other cases read are not read.  A walk
started with the constants a caller passes (``FunctionWalk(constants=...)``)
decides each conditional branch that tests one of them right after a
compare, and each jump table it indexes; ``Paths`` records the control flow
of that first sweep.  The code reached from the entry only through branches
the constants rule out is then *pruned*, and the function is swept again
without it.

Only what is proved is dropped: code the flow of the first sweep does not
reach at all (landing pads of exceptions, targets of jumps not resolved)
stays, as does everything after a compare whose flags are not branched on
at once (counted as undecided).
"""

from __future__ import annotations

MASKS = {8: 0xFF, 16: 0xFFFF, 32: 0xFFFF_FFFF, 64: 0xFFFF_FFFF_FFFF_FFFF}

# Conditions, as x86 (jcc) and aarch64 (b.cc) name them, on the flags of
# ``compare a, b``: (unsigned relation, signed relation, equality) by name.
_CONDITIONS: dict[str, tuple[str, str]] = {
    "e": ("eq", ""), "z": ("eq", ""), "eq": ("eq", ""),
    "ne": ("ne", ""), "nz": ("ne", ""),
    "a": ("gt", "u"), "hi": ("gt", "u"), "ae": ("ge", "u"), "nb": ("ge", "u"),
    "hs": ("ge", "u"), "cs": ("ge", "u"), "b": ("lt", "u"), "lo": ("lt", "u"),
    "cc": ("lt", "u"), "be": ("le", "u"), "ls": ("le", "u"),
    "g": ("gt", "s"), "gt": ("gt", "s"), "ge": ("ge", "s"), "l": ("lt", "s"),
    "lt": ("lt", "s"), "le": ("le", "s"),
    "s": ("neg", ""), "mi": ("neg", ""), "ns": ("pos", ""), "pl": ("pos", ""),
}


def condition_holds(condition: str, value: int, other: int, width: int) -> bool | None:
    """Whether ``condition`` holds after comparing ``value`` with ``other`` (``width``
    bits); None for a condition not modelled (overflow, parity)."""
    found = _CONDITIONS.get(condition)
    mask = MASKS.get(width)
    if found is None or mask is None:
        return None
    relation, kind = found
    a, b = value & mask, other & mask
    if kind == "s":
        a, b = _signed(a, width), _signed(b, width)
    if relation == "eq":
        return a == b
    if relation == "ne":
        return a != b
    if relation in ("neg", "pos"):
        negative = _signed((a - b) & mask, width) < 0
        return negative if relation == "neg" else not negative
    return {"gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b}[relation]


def _signed(number: int, width: int) -> int:
    return number - (1 << width) if number >> (width - 1) & 1 else number


class Paths:
    """The control flow of one sweep: each instruction's successors, with and without
    the branches the constants decided."""

    def __init__(self, pruned: frozenset[int] = frozenset()) -> None:
        self.pruned = pruned  # instructions left out (the second sweep)
        self.current = -1  # the instruction being read
        self.successors: dict[int, list[int]] = {}
        self.dropped: dict[int, list[int]] = {}  # successors the constants rule out

    def instruction(self, address: int) -> None:
        self.current = address
        self.successors[address] = []

    def branch(self, target: int) -> None:
        self.successors[self.current].append(target)

    def falls(self, following: int | None) -> None:
        if following is not None:
            self.successors[self.current].append(following)

    def drop(self, target: int) -> None:
        """A successor of the current instruction the constants rule out."""
        self.dropped.setdefault(self.current, []).append(target)

    def unreachable(self, start: int) -> frozenset[int]:
        """Instructions reached from ``start`` only through a branch ruled out."""
        if not self.dropped:
            return frozenset()
        every = self._reach(start, True)
        return frozenset(every - self._reach(start, False))

    def _reach(self, start: int, every_path: bool) -> set[int]:
        seen, stack = {start}, [start]
        while stack:
            address = stack.pop()
            following = self.successors.get(address, [])
            if every_path:
                following = following + self.dropped.get(address, [])
            for target in following:
                if target not in seen and target in self.successors:
                    seen.add(target)
                    stack.append(target)
        return seen
