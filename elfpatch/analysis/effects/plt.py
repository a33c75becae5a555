"""The GOT slot a PLT stub jumps through, read from the stub's instructions.

Only the stubs a call from the initializers lands on are decoded, one at a
time, from their first 16 bytes:

- x86-64: ``jmp qword ptr [rip + disp32]`` (``ff 25``), optionally after
  ``endbr64`` (IBT: the .plt.sec stubs of ``-z ibtplt`` / ``-fcf-protection``)
  and a ``bnd`` prefix (MPX, ``f2``).  That is the lazy-binding .plt entry's
  first instruction, every .plt.sec entry, and the .plt.got entries the
  linker makes for functions whose GOT slot is filled at load time.
- aarch64 (little-endian): ``adrp x16, page; ldr x17, [x16, #off]``,
  optionally after ``bti c`` (BTI, ``-z force-bti``): the .plt entries of
  GNU ld and lld.  The slot is ``page + off``.

Any other machine, a big-endian aarch64 object, or bytes of another shape
give None: the call is then not followed through the PLT.
"""

from __future__ import annotations

import struct

from elfpatch.elf.constants import EM_AARCH64, EM_X86_64

STUB_BYTES = 16  # the longest stub prefix read: endbr64 + bnd + jmp fits, as do 3 words
_ENDBR64 = b"\xf3\x0f\x1e\xfa"
_BND = b"\xf2"
_JMP_RIP_INDIRECT = b"\xff\x25"
_BTI_C = 0xD503245F


def stub_slot(machine: int, little_endian: bool, code: bytes, stub: int) -> int | None:
    """The GOT slot the stub at address ``stub``, whose bytes start ``code``, jumps
    through; None when the machine has no decoder or the bytes are no stub."""
    if machine == EM_X86_64:
        return x86_64_stub_slot(code, stub)
    if machine == EM_AARCH64 and little_endian:
        return aarch64_stub_slot(code, stub)
    return None


def x86_64_stub_slot(code: bytes, stub: int) -> int | None:
    """``[endbr64] [bnd] jmp qword ptr [rip + disp32]`` -> the slot address."""
    at = 4 if code.startswith(_ENDBR64) else 0
    if code[at : at + 1] == _BND:
        at += 1
    if code[at : at + 2] != _JMP_RIP_INDIRECT or len(code) < at + 6:
        return None
    disp: int = struct.unpack_from("<i", code, at + 2)[0]
    return stub + at + 6 + disp


def aarch64_stub_slot(code: bytes, stub: int) -> int | None:
    """``[bti c] adrp x16, page; ldr x17, [x16, #off]`` -> page + off."""
    words: list[int] = [w for (w,) in struct.iter_unpack("<I", code[: len(code) - len(code) % 4])]
    at = 1 if words and words[0] == _BTI_C else 0
    if len(words) < at + 2:
        return None
    adrp, ldr = words[at], words[at + 1]
    # adrp with Rd = x16; ldr (64-bit, unsigned offset) with Rn = x16, Rt = x17.
    if adrp & 0x9F00001F != 0x90000010 or ldr & 0xFFC003FF != 0xF9400211:
        return None
    immediate = ((adrp >> 5) & 0x7FFFF) << 2 | (adrp >> 29) & 3  # immhi:immlo
    if immediate & (1 << 20):
        immediate -= 1 << 21
    page = ((stub + 4 * at) & ~0xFFF) + (immediate << 12)
    return page + ((ldr >> 10) & 0xFFF) * 8
