"""``members.reads_past_writes``: when a read of an object, keyed by address, is of bytes
its constructor never writes.  Each case leaves one reason out of the kept one
(``fixtures/constant_part`` checks the whole on programs gcc builds)."""

from __future__ import annotations

import dataclasses

from elfpatch.analysis.effects import Effects
from elfpatch.analysis.effects.summary import UNKNOWN_EFFECTS, AtExit
from elfpatch.analysis.members import reads_past_writes

START, END = 0x4040, 0x4100  # a vector at +0x08..+0x20, numbers from +0x20 on


def effects(**fields: object) -> Effects:
    return dataclasses.replace(UNKNOWN_EFFECTS, complete=True, **fields)


READER = effects(reads=("@0x4060",))
BUILDER = effects(writes=("@0x4048", "@0x4050", "@0x4058", "*@0x4048"),
                  atexit=(AtExit("^0x4040", None, 0x1270),), addresses=("^0x4040",),
                  groups=(("@0x4048", "%0x4048+16", "@0x4058"),))


def test_a_read_past_every_byte_written_is_apart() -> None:
    assert reads_past_writes(READER, BUILDER, START, END)


def test_a_read_of_a_written_word_is_not() -> None:
    assert not reads_past_writes(effects(reads=("@0x4058",)), BUILDER, START, END)


def test_a_vector_store_reaches_past_its_address() -> None:
    wide = dataclasses.replace(BUILDER, groups=(("%0x4058+16",),))
    assert not reads_past_writes(effects(reads=("@0x4060",)), wide, START, END)


def test_a_pointer_into_the_object_handed_on_may_write_anything_past_it() -> None:
    handed = dataclasses.replace(BUILDER, passed=("^0x4040",))  # to code not followed
    assert not reads_past_writes(READER, handed, START, END)
    stored = dataclasses.replace(BUILDER, addresses=("^0x4040", "^0x4050"))  # s._M_p = buf
    assert not reads_past_writes(READER, stored, START, END)


def test_a_constructor_not_followed_to_the_end_may_write_anything() -> None:
    assert not reads_past_writes(READER, dataclasses.replace(BUILDER, complete=False),
                                 START, END)


def test_a_read_only_assumed_or_of_no_known_address_is_not_apart() -> None:
    assert not reads_past_writes(effects(reads=("@0x4060",), assumed=("^0x4040",)), BUILDER,
                                 START, END)
    assert not reads_past_writes(effects(reads=("blosum",)), BUILDER, START, END)
