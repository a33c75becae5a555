"""What a mangled name says about the object it names, without demangling it."""

from __future__ import annotations

# The anonymous namespace's component in a mangled name: its members are internal.
_ANONYMOUS = "_GLOBAL__N_"


def has_internal_linkage(symbol: str) -> bool:
    """A namespace-scope ``static`` or a member of an anonymous namespace (Itanium).

    Each TU has its own: two TUs' objects of such a name are different objects.
    """
    if symbol.startswith(("_ZL", "_ZStL")):
        return True
    if not symbol.startswith("_ZN"):
        return False
    at = 3
    while at < len(symbol):
        char = symbol[at]
        if char == "L" and at + 1 < len(symbol) and symbol[at + 1].isdigit():
            return True
        if not char.isdigit():
            return False
        end = at
        while end < len(symbol) and symbol[end].isdigit():
            end += 1
        length = int(symbol[at:end])
        if symbol.startswith(_ANONYMOUS, end):
            return True
        at = end + length
    return False
