"""A flag no initializer sets decides the path of the function an initializer calls
(``fixtures/quiet_flag``).

Each widget's constructor calls ``trace`` of another TU, which notes the widget
in ``journal`` (built by journal.cpp's initializer) only when ``tracing`` is
set.  ``tracing`` is a ``static int`` in .bss; only ``enable_tracing`` sets it,
and only ``main`` calls that, after start-up, when asked.  At load the flag is
zero: the journal is not touched, and the programs print ``traced=0`` in either
link order.  Built ``-DTRACED``, an initializer of the widgets' TU turns tracing
on first: both widgets are noted (``traced=2``), and the notes are lost when the
journal is built later (``notes=0``) or kept (``notes=2``).  Built ``-DBOUND``, it
does so through the flag's address handed to another TU's function, and
``-DLISTED`` through a table of pointers to the switches: the flag is then
written where no access names it, and must not be read as the loader left it.
A program may export its switch (``-DEXPORTED``, linked ``-rdynamic``) and it
is still quiet; a library's switch the program reaches through its copy
(``-DLIBRARY_SWITCH``: a COPY relocation) is filled from the library's, which
the library's initializer turned on before the program's run.  The oracle is what
the programs print.  ``inits`` must find nothing in the first builds (it
reported a false error, or a false warning, when it charged the widgets'
initializer with the path the flag rules out) and the real bug or its link-order
dependence in the others, on both machines, in a program and in a library.
Stripped, a static flag is no longer known to stay zero (``STRIPPED``).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    inits,
    inits_of,
    printed,
    risks,
    scenario,
    strip_unneeded,
)


def journal_findings(path: Path) -> list[str]:
    """The severity of each order risk (the journal is the only object at stake)."""
    return [r["severity"] for r in risks(inits_of(path), *ORDER_KINDS)]


# What a stripped copy still reports where the program works: without .symtab the
# flag (a static) is known only by its address, next to the counter and the journal
# the code writes and hands on, and nothing says where those end (a member of either
# could be what the code tests): the flag is not known to stay zero.  An exported
# flag's extent is in .dynsym.
STRIPPED = {"widgets_first": ["error"], "journal_first": ["warning"],
            "widgets_first_exported": []}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["widgets_first", "journal_first", "widgets_first_exported"])
def test_a_path_a_flag_unset_at_load_rules_out_is_no_finding(machine: str, program: str,
                                                            tmp_path: Path) -> None:
    built = scenario("quiet_flag", machine)
    assert printed(built, program)["traced"] == "0"
    assert journal_findings(built.path(program)) == []
    document = inits(str(built.path(program)))
    jsonschema.validate(document, json.loads(
        resources.files("elfpatch.report").joinpath("inits.schema.json").read_text()))
    quiet = document["files"][0]["coverage"]["quiet_at_load"]
    assert [(q["object"].endswith("tracing"), q["width"]) for q in quiet] == [(True, 4)]
    stripped = strip_unneeded(machine, built.path(program), tmp_path)
    assert journal_findings(stripped) == STRIPPED[program]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", ["widgets_first_traced", "journal_first_traced",
                                     "widgets_first_bound", "widgets_first_listed",
                                     "widgets_first_library_switch"])
def test_with_the_flag_set_at_load_the_real_bug_is_reported(machine: str, program: str,
                                                            tmp_path: Path) -> None:
    built = scenario("quiet_flag", machine)
    shown = printed(built, program)
    assert shown["traced"] == "2"
    expected = ["error"] if shown["notes"] == "0" else ["warning"]
    assert journal_findings(built.path(program)) == expected
    assert journal_findings(strip_unneeded(machine, built.path(program), tmp_path)) == expected
    assert "quiet_at_load" not in inits_of(built.path(program))["coverage"]


@pytest.mark.parametrize("machine", MACHINES)
def test_in_a_library_and_stripped(machine: str, tmp_path: Path) -> None:
    built = scenario("quiet_flag", machine)
    for name, expected, stripped in (("libwidgets_first.so", [], ["error"]),
                                     ("libwidgets_first_traced.so", ["error"], ["error"])):
        library = built.path(name)
        assert journal_findings(library) == expected, name
        assert journal_findings(strip_unneeded(machine, library, tmp_path)) == stripped, name
