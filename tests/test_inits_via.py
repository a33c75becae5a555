"""How the reading code reaches the object a risk names (``Risk.via``).

In ``fixtures/registration`` each test TU's initializer calls
``add_test(char const*)``, whose code inserts into ``registry``; in
``fixtures/destruction_order`` ``Service``'s destructor calls
``log_line(char const*)``, which reads ``the_logger``.  readelf's symbol
table is the oracle for the names; a stripped copy gives the same chain, by
address.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import inits_of, risks, scenario, strip_unneeded
from support.readelf import symtab_address


@pytest.mark.parametrize(("fixture", "program", "kind", "function"), [
    ("registration", "tests_first", "init-order", "_Z8add_testPKc"),
    ("destruction_order", "buggy", "destruction-order", "_Z8log_linePKc"),
])
def test_the_function_that_touches_the_object(fixture: str, program: str, kind: str,
                                             function: str, tmp_path: Path) -> None:
    path = scenario(fixture).path(program)
    found = risks(inits_of(path), kind)
    assert found and all(r["via"] == [_demangled(function)] for r in found), found
    stripped = risks(inits_of(strip_unneeded("x86_64", path, tmp_path)), kind)
    assert [r["via"] for r in stripped] == [[f"{symtab_address(path, function):#x}"]] * len(
        found), stripped


def test_no_via_when_the_initializer_touches_it_itself() -> None:
    """``length.cpp``'s initializer reads ``deb_versioning`` in its own code."""
    found = risks(inits_of(scenario("stored_pointer").path("stored_first")), "init-order")
    assert found and all("via" not in r for r in found), found


def _demangled(symbol: str) -> str:
    from elfpatch.cxx.demangle import demangle

    shown = demangle(symbol)
    if shown == symbol:
        pytest.skip("no C++ demangler in this interpreter's runtime")
    return shown
