"""A destructor reads a function-local static through its accessor (``fixtures/
static_accessor``), stripped or not.

``journal()`` returns its function-local static; its jump into its ``.cold``
part (the cleanup when building the static throws) runs into
``_Unwind_Resume`` and returns nothing.  ``Closer``'s destructor reads the
journal through the reference at exit.  The oracle is what each build
prints: ``at_exit_open=0`` where the journal was destroyed first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    inits_of,
    printed,
    risks,
    same_when_stripped,
    scenario,
    strip_unneeded,
)
from support.readelf import symtab_address

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.elf.file import ElfFile

KIND = "destruction-order"


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("program", "open_at_exit"), [("closer_first", "0"),
                                                        ("opener_first", "1")])
def test_the_error_is_where_the_program_shows_it(machine: str, program: str,
                                                 open_at_exit: str, tmp_path: Path) -> None:
    built = scenario("static_accessor", machine)
    assert printed(built, program) == {"main": "done", "at_exit_open": open_at_exit}
    path = built.path(program)
    for record in (inits_of(path), inits_of(strip_unneeded(machine, path, tmp_path))):
        found = risks(record, KIND)
        assert [r["severity"] for r in found] == (["error"] if open_at_exit == "0" else []), \
            found


@pytest.mark.parametrize("machine", MACHINES)
def test_the_stripped_library_the_same(machine: str, tmp_path: Path) -> None:
    library = scenario("static_accessor", machine).path("libcloser_first.so")
    plain = same_when_stripped(machine, library, tmp_path)
    assert [r["severity"] for r in risks(plain, KIND)] == ["error"]


def test_the_accessor_returns_the_static() -> None:
    """Its jump into the ``.cold`` part is no return of something unknown (readelf
    gives the addresses)."""
    library = scenario("static_accessor").path("libcloser_first.so")
    analyzer = EffectsAnalyzer(ElfFile.open(library))
    assert analyzer.returned_global(symtab_address(library, "_Z7journalv")) == \
        symtab_address(library, "_ZZ7journalvE8instance")
