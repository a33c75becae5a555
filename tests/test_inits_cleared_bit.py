"""A bit a constructor clears decides the path of the member function it calls
(``fixtures/cleared_bit``).

``Setting``'s constructor clears its bitfields (gcc stores the byte, or masks
the word it loaded), then calls ``Setting::rename`` of another TU, which notes
the rename in ``journal`` (built by journal.cpp's initializer) only when the
setting is observed, as LLVM's ``cl::Option::setArgStr`` consults the parser
only once ``FullyInitialized``.  No setting is observed while it is built: the
journal is not touched at load, and the programs print ``notes=0`` in either
link order.  Built observed (``-DOBSERVED``), the renames are noted: before
the journal's construction they are lost (``notes=0``), after it they stay
(``notes=2``).  The oracle is what the programs print.  ``inits`` must find
nothing in the first builds (it reported a false error, or a false warning,
when it charged the constructor with the path the bit rules out) and the
real bug or its link-order dependence in the others, on both machines, in a
program and in a library (the settings exported, reached through the GOT),
stripped or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, ORDER_KINDS, inits_of, printed, risks, scenario, strip_unneeded


def journal_findings(path: Path) -> list[str]:
    """The severity of each order risk about the journal."""
    return [r["severity"] for r in risks(inits_of(path), *ORDER_KINDS)
            if "journal" in r["message"]]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["settings_first", "journal_first"])
def test_a_path_the_cleared_bit_rules_out_is_no_finding(machine: str, program: str) -> None:
    built = scenario("cleared_bit", machine)
    assert printed(built, program)["notes"] == "0"
    assert journal_findings(built.path(program)) == []


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["settings_first_observed", "journal_first_observed"])
def test_with_the_bit_set_the_real_bug_is_reported(machine: str, program: str) -> None:
    built = scenario("cleared_bit", machine)
    notes = printed(built, program)["notes"]
    assert notes in ("0", "2")
    assert journal_findings(built.path(program)) == (["error"] if notes == "0" else ["warning"])


@pytest.mark.parametrize("machine", MACHINES)
def test_in_a_library_and_stripped(machine: str, tmp_path: Path) -> None:
    built = scenario("cleared_bit", machine)
    for name, expected in (("libsettings_first.so", []),
                           ("libsettings_first_observed.so", ["error"])):
        library = built.path(name)
        assert journal_findings(library) == expected, name
        assert journal_findings(strip_unneeded(machine, library, tmp_path)) == expected, name
