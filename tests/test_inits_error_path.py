"""Code that runs only when a check fails (``fixtures/error_path``).

``early.cpp``'s initializer calls ``checked(seed)``, which calls ``fail``
only for a negative number; ``fail`` reads ``config_name`` to build its
message and throws, on every way through it, without being declared
``[[noreturn]]``.  It calls ``validated(seed)`` too, whose failed branch
reads ``config_name`` (itself, and through a call) and aborts, in place.
``never.cpp``'s initializer reads it only where ``getenv`` returned -1,
which it never does; ``allocated.cpp``'s only where ``malloc`` (or, in
``config_last_aligned``, ``aligned_alloc``) returned NULL, which it does only
when memory has run out; ``caught.cpp``'s in a catch block
around a call that does not throw (a landing pad, entered only by unwinding);
``force.cpp``'s (LLVM's way of forcing passes to link)
returns at once unless it did, before a block of calls with branches of its
own, one of which reads it; ``always.cpp``'s (LLVM's newer way) returns at
once when a function that always returns true says so.  ``reader.cpp``
really reads ``config_name`` early.

The oracles are what each build prints (``reader_seen=0`` where the read
came first; ``early_value=42``, ``early_validated=22`` and
``never_value=5`` always) and ASan's init-order checker in strict mode,
which stops at the first read of another TU's global while initializing:
``reader.cpp``'s, after ``early.cpp``'s, ``never.cpp``'s, ``allocated.cpp``'s and
``caught.cpp``'s initializers have run without touching it.  ``inits`` must
charge ``early.cpp``, ``never.cpp``, ``allocated.cpp``, ``caught.cpp``,
``force.cpp`` and ``always.cpp`` with nothing and report
``reader.cpp`` exactly where the program shows the bug, stripped or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    ASAN_STRICT,
    MACHINES,
    ORDER_KINDS,
    asan_build,
    asan_reader,
    charged_only_the_reader,
    inits_of,
    printed,
    risk_identities,
    risks,
    scenario,
    strip_unneeded,
)
from support.readelf import symtab_address, tu_initializer

PROGRAMS = ["config_last", "config_first", "config_last_lto", "config_first_lto",
            "config_last_aligned"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_only_the_real_read_is_reported(machine: str, program: str) -> None:
    built = scenario("error_path", machine)
    output = printed(built, program)
    assert output["early_value"] == "42"  # the check passed: fail never ran
    assert output["early_validated"] == "22"  # nor did the failed branch
    assert output["never_value"] == "5"  # nor the branch on getenv's result being -1
    assert output["allocated_value"] == "6"  # nor the one on malloc's being NULL
    assert output["caught_value"] == "43"  # nor the catch block
    path = built.path(program)
    found = risks(inits_of(path), *ORDER_KINDS)
    charged_only_the_reader(path, found, output, "_Z11config_nameB5cxx11")
    if not program.endswith("_lto"):  # the blocks of force.cpp and always.cpp never run
        for fragment in ("force", "non_foldable_always_true"):
            initializer = tu_initializer(path, fragment)
            assert initializer is not None
            assert not [r for r in found if r["reader_address"] == initializer], found
    if not program.endswith("_lto"):  # reader.cpp alone, an error or a warning
        assert len(found) == 1, found


@pytest.mark.parametrize("machine", MACHINES)
def test_the_handler_is_known_never_to_return(machine: str) -> None:
    """From its code alone: every way through ``fail`` ends in a throw or an unwind;
    ``checked`` returns.  (The verdict the composition of effects relies on.)"""
    from elfpatch.analysis.effects import EffectsAnalyzer
    from elfpatch.elf.file import ElfFile

    path = scenario("error_path", machine).path("config_last")
    with ElfFile.open(str(path)) as elf:
        analyzer = EffectsAnalyzer(elf)
        analyzer.index.prepare()
        fail = analyzer.summary(symtab_address(path, "_Z4failPKc"))
        checked = analyzer.summary(symtab_address(path, "_Z7checkedi"))
        assert fail.never_returns and not fail.may_return
        assert not checked.never_returns


@pytest.mark.parametrize("machine", MACHINES)
def test_what_a_branch_that_aborts_touches_is_dropped(machine: str) -> None:
    """``validated``'s first failed branch reads ``config_name`` and calls ``describe``,
    which reads it too, then calls ``abort``: the sweep drops that branch.  Its second
    hands ``config_name``'s size to ``give_up``, this program's own function, which
    aborts: that branch dies once ``give_up``'s summary says it never returns, when
    the effects are composed.  ``validated`` itself returns."""
    from elfpatch.analysis.effects import EffectsAnalyzer
    from elfpatch.analysis.effects.summary import READ
    from elfpatch.elf.file import ElfFile

    path = scenario("error_path", machine).path("config_last")
    config_name = f"{symtab_address(path, '_Z11config_nameB5cxx11'):#x}"
    with ElfFile.open(str(path)) as elf:
        analyzer = EffectsAnalyzer(elf)
        analyzer.index.prepare()
        address = symtab_address(path, "_Z9validatedi")
        validated = analyzer.summary(address)
        assert validated.may_return and not validated.never_returns
        # The oracles that the reads are there to charge: describe's own code reads
        # config_name, and the sweep alone keeps the read of the give_up branch.
        describe = analyzer.summary(symtab_address(path, "_ZL8describev"))
        assert (READ, config_name) in [event[:2] for event in describe.events]
        assert [event[:2] for event in validated.events].count((READ, config_name)) == 1
        assert analyzer.summary(symtab_address(path, "_Z7give_upPKcm")).never_returns
        composed = analyzer.effects(address)
        assert config_name not in composed.reads, composed.reads


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_stripped_builds_find_the_same(machine: str, program: str, tmp_path: Path) -> None:
    built = scenario("error_path", machine)
    original = built.path(program)
    copy = strip_unneeded(machine, original, tmp_path)
    assert risk_identities(inits_of(copy)) == risk_identities(inits_of(original))


@pytest.fixture(scope="module")
def asan_programs() -> Path:
    return asan_build("error_path")


@pytest.mark.parametrize("program", ["config_last", "config_first"])
def test_asan_stops_at_the_reader_only(asan_programs: Path, program: str) -> None:
    """Strict mode stops at the first read of another TU's global while initializing:
    reader.cpp's in both link orders, although early.cpp's initializer, linked before
    it in both, ran first (and called ``checked``)."""
    assert asan_reader(asan_programs / program, ASAN_STRICT) == "reader.cpp"
    found = risks(inits_of(asan_programs / program), *ORDER_KINDS)
    assert ["reader.cpp" in r["message"] for r in found] == [True], found
