"""Numbers known in part: which bits an instruction fixes, and what they are.

A constructor that clears a bitfield (``FullyInitialized = false``) rarely stores
a whole number: gcc loads the word, masks the field out (``and eax, 0xfc000000``,
``and x2, x2, #0xfc000000``, or ``and word ptr [obj + 2], 0x8000`` in place) and
stores it back.  The bits the mask clears are known whatever the word held, and
a callee passed the object's address that tests one of them (``test byte ptr
[rdi + 0xb], 0x40``, ``ldrh w0, [x0, #10]; tbnz w0, #4``) takes the one way
they select.  A number is kept as ``(mask, value)``: the bits known, and their
values (``value`` has no bit outside ``mask``).
"""

from __future__ import annotations

Bits = tuple[int, int]

UNKNOWN: Bits = (0, 0)
_WORD = (1 << 64) - 1


def exactly(number: int, width: int = 64) -> Bits:
    """Every bit of a ``width``-bit number known."""
    mask = (1 << width) - 1
    return mask, number & mask


def anded(bits: Bits, amount: int, width: int) -> Bits:
    """``bits`` after an AND with the number ``amount`` in a ``width``-bit operation:
    the bits it clears are known to be zero."""
    low = (1 << width) - 1
    mask, value = _within(bits, width)
    cleared = ~amount & low
    return _extended(bits, width, (mask & amount) | cleared, value & amount)


def ored(bits: Bits, amount: int, width: int) -> Bits:
    """``bits`` after an OR with ``amount``: the bits it sets are known to be one."""
    low = (1 << width) - 1
    mask, value = _within(bits, width)
    amount &= low
    return _extended(bits, width, mask | amount, value | amount)


def inserted(bits: Bits, field: Bits, lowest: int, count: int, width: int) -> Bits:
    """``bits`` with ``count`` bits from ``lowest`` up replaced by the low bits of
    ``field`` (aarch64 ``bfi``)."""
    place = ((1 << count) - 1) << lowest
    mask, value = _within(bits, width)
    field_mask = (field[0] << lowest) & place
    return _extended(bits, width, (mask & ~place) | field_mask,
                     (value & ~place) | ((field[1] << lowest) & field_mask))


def zero_extended(bits: Bits, width: int) -> Bits:
    """``bits`` of a ``width``-bit number loaded into a 64-bit register that a load
    zero-extends (x86-64 ``movzx`` and 32-bit moves, aarch64 ``ldrb``/``ldrh``/``ldr w``):
    the bits above it are known to be zero."""
    return bits[0] | (_WORD ^ ((1 << width) - 1)), bits[1]


def selected(bits: Bits, amount: int) -> int | None:
    """``bits`` AND ``amount`` when every bit ``amount`` selects is known; else None."""
    mask, value = bits
    return value & amount if mask & amount == amount else None


def whole(bits: Bits, width: int) -> int | None:
    """The ``width``-bit number when every one of its bits is known."""
    return selected(bits, (1 << width) - 1)


def _within(bits: Bits, width: int) -> Bits:
    low = (1 << width) - 1
    return bits[0] & low, bits[1] & low


def _extended(before: Bits, width: int, mask: int, value: int) -> Bits:
    """The whole register after a ``width``-bit operation wrote its low bits: a
    32-bit one zeroes the upper half (x86-64 and aarch64 alike), an 8- or 16-bit
    one (x86) leaves it as it was."""
    if width >= 32:
        return mask | (~((1 << width) - 1) & _WORD), value
    upper = ~((1 << width) - 1) & _WORD
    return mask | (before[0] & upper), value | (before[1] & upper)
