"""Whole columns of fixed-size records, read without one object per record.

A table of N records of ``entsize`` bytes holds each field at a fixed offset.
Casting the table to the field's width and slicing with a stride gives the
column in C; ``array`` holds it compactly, byte-swapped when the file's
endianness differs from the machine's.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Collection

_TYPECODE = {1: "B", 2: "H", 4: "I", 8: "Q"}
_HOST_LITTLE = sys.byteorder == "little"


def column(table: memoryview, entsize: int, offset: int, width: int,
           little_endian: bool) -> array[int]:
    """Field of ``width`` bytes at ``offset`` in each ``entsize``-byte record."""
    code = _TYPECODE[width]
    count = len(table) // entsize
    if count == 0:
        return array(code)
    if entsize % width == 0 and offset % width == 0:
        flat = table[: count * entsize].cast(code)  # type: ignore[call-overload]
        per_record = entsize // width
        values = array(code, flat[offset // width :: per_record].tobytes())
    else:  # odd layouts: gather the bytes of the field record by record
        raw = b"".join(bytes(table[i * entsize + offset : i * entsize + offset + width])
                       for i in range(count))
        values = array(code, raw)
    if width > 1 and little_endian != _HOST_LITTLE:
        values.byteswap()
    return values


def byte_column(table: memoryview, entsize: int, offset: int) -> bytes:
    """One byte of each record, as a bytes object (searchable with ``re``)."""
    count = len(table) // entsize
    return table[offset : count * entsize : entsize].tobytes()


def byte_mask(wanted: Collection[int]) -> bytes:
    """A ``bytes.translate`` table mapping each wanted byte value to 1 and every other
    to 0: a byte column translated through it, ``itertools.compress`` picks the rows."""
    return bytes(1 if b in wanted else 0 for b in range(256))


def pack_column(values: array[int], little_endian: bool) -> bytes:
    """The raw bytes of a column in the file's byte order."""
    if values.itemsize > 1 and little_endian != _HOST_LITTLE:
        swapped = array(values.typecode, values)
        swapped.byteswap()
        return swapped.tobytes()
    return values.tobytes()
