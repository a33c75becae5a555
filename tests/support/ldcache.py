"""``/etc/ld.so.cache`` images made byte by byte, for the loader tests.

The layouts are glibc's (``sysdeps/generic/dl-cache.h``): the current
format with its hwcaps extension, and the old libc5 one that ldconfig used
to write in front of it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from elfpatch.loader import cache as ldcache


def new_cache(entries: Sequence[tuple[int, str, str, int]], hwcaps: Sequence[str] = ()) -> bytes:
    """A current-format cache image, entries already in ldconfig's order."""
    header_size, entry_size = 48, 24
    strings = bytearray()
    offsets: dict[str, int] = {}
    base = header_size + entry_size * len(entries)

    def string(text: str) -> int:
        if text not in offsets:
            offsets[text] = base + len(strings)
            strings.extend(text.encode() + b"\0")
        return offsets[text]

    body = b"".join(struct.pack("<iIIIQ", flags, string(name), string(path), 0, hwcap)
                    for flags, name, path, hwcap in entries)
    names = [string(h) for h in hwcaps]
    extension = b""
    extension_offset = 0
    if hwcaps:
        extension_offset = -(-(base + len(strings)) // 4) * 4
        strings.extend(b"\0" * (extension_offset - base - len(strings)))
        section = extension_offset + 8 + 16
        extension = (struct.pack("<II", 0xEAA42174, 1)
                     + struct.pack("<IIII", 1, 0, section, 4 * len(names))
                     + b"".join(struct.pack("<I", n) for n in names))
    header = struct.pack("<20sIIB3xI12x", ldcache.NEW_MAGIC, len(entries), len(strings), 2,
                         extension_offset)
    return header + body + bytes(strings) + extension


def old_cache(entries: Sequence[tuple[int, str, str]], then_new: bytes = b"") -> bytes:
    """A libc5-format cache image, followed by ``then_new`` (glibc's combined format)."""
    strings = bytearray()
    table = []
    for flags, name, path in entries:
        key = len(strings)
        strings.extend(name.encode() + b"\0")
        value = len(strings)
        strings.extend(path.encode() + b"\0")
        table.append(struct.pack("<iII", flags, key, value))
    head = ldcache.OLD_MAGIC + b"\0" + struct.pack("<I", len(entries)) + b"".join(table)
    if then_new:
        return head + b"\0" * (-len(head) % 8) + then_new
    return head + bytes(strings)
