"""Taking an address is not reading (``fixtures/address_only``), and reads across objects.

1. ``early.cpp``'s initializer passes ``&late_name`` to a function that
   stores the pointer; ``reader.cpp``'s reads ``late_name.size()``.  Both run
   before ``late.cpp`` constructs it.  The program prints the stored pointer's
   string (good by then) and the length read early (0): ``inits`` reports the
   read alone, in an executable (``lea``, and at -O0 through the stack), in a
   shared library (the address loaded from the GOT), and across objects
   (``--closure``: a library keeping the program's pointer is no risk).
2. ``risks.cross_object_risks`` itself, on the objects of a closure built
   from ``fixtures/cross_object_init_order``, checked against what the
   programs print.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_elfpatch
from support.inits import (
    MACHINES,
    closure_errors,
    errors,
    inits,
    inits_of,
    printed,
    risks,
    scenario,
)

from elfpatch.analysis.init_order import analyse_object_fully
from elfpatch.analysis.risks import ObjectInitialisation, RiskKind, cross_object_risks
from elfpatch.elf.file import ElfFile

LATE_NAME = "_Z9late_nameB5cxx11"  # std::string late_name
REMEMBERED = "late-value-built-at-run-time"
# program: (the object analysed, what the program prints)
PROGRAMS = {
    "program": ("program", {"remembered": REMEMBERED, "early_length": "0"}),
    "program_O0": ("program_O0", {"remembered": REMEMBERED, "early_length": "0"}),
    "host": ("libearly.so", {"remembered": REMEMBERED, "early_length": "0"}),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_read_is_an_error_and_the_address_is_not(machine: str, program: str) -> None:
    built = scenario("address_only", machine)
    analysed, output = PROGRAMS[program]
    assert printed(built, program) == output  # the pointer kept early is good later
    record = inits_of(built.path(analysed))
    assert errors(record) == [("init-order", LATE_NAME)]
    (risk,) = [r for r in record["risks"] if r["severity"] == "error"]
    assert risk["message"].startswith("reader.cpp reads late_name")
    assert not [r for r in risks(record) if "early.cpp" in r["message"]]


@pytest.mark.parametrize("machine", MACHINES)
def test_a_library_keeping_the_programs_pointer_is_no_cross_object_risk(machine: str) -> None:
    built = scenario("address_only", machine)
    assert printed(built, "app") == {"remembered": REMEMBERED}
    document = inits("--closure", str(built.path("app")))
    assert {Path(f["path"]).name for f in document["files"]} >= {"app", "libremember.so"}
    assert closure_errors(document, built.dir) == []


def test_the_walk_sees_the_address_taken(tmp_path: Path) -> None:
    """What the initializer does with late_name, as the effects tell it."""
    from elfpatch.analysis.effects import EffectsAnalyzer
    from elfpatch.analysis.initializers import list_initializers

    path = scenario("address_only").path("libearly.so")
    with ElfFile.open(path) as elf:
        entries = {e.translation_unit: e for e in list_initializers(elf, str(path)).followed}
        analyzer = EffectsAnalyzer(elf)
        early = analyzer.labelled(analyzer.effects(entries["early.cpp"].address or 0))
        reader = analyzer.labelled(analyzer.effects(entries["reader.cpp"].address or 0))
    assert LATE_NAME not in early.reads and LATE_NAME in early.addresses
    assert LATE_NAME in reader.reads


# -- cross_object_risks on a real closure ----------------------------------------------------

APP_NAME = "_Z8app_nameB5cxx11"
TOP_LABEL = "_Z9top_labelB5cxx11"


def closure_objects(folder: Path, names: list[str]) -> list[ObjectInitialisation]:
    """The objects in glibc's initialization order (dependencies first), analysed."""
    from elfpatch.analysis.init_order import exported_definitions

    objects = []
    for position, name in enumerate(names):
        with ElfFile.open(folder / name) as elf:
            analysis = analyse_object_fully(elf, name, in_closure=True)
            objects.append(ObjectInitialisation(name, position, tuple(analysis.analysed),
                                                exported_definitions(elf),
                                                analysis.exit_code))
    return objects


CLOSURES = {
    # program: (initialization order, lookup order, what it prints, reader, object)
    "app": (["libreader.so", "app"], ["app", "libreader.so"],
            {"reader_seen_length": "0", "app_name_length": "11"}, "libreader.so", APP_NAME),
    "stack": (["libbase.so", "libtop.so", "stack"], ["stack", "libtop.so", "libbase.so"],
              {"base_seen_length": "0", "top_label_length": "9"}, "libbase.so", TOP_LABEL),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(CLOSURES))
def test_cross_object_risks_matches_the_run(machine: str, program: str) -> None:
    built = scenario("cross_object_init_order", machine)
    order, lookup, output, reader, symbol = CLOSURES[program]
    assert printed(built, program) == output  # the library saw the global unconstructed
    objects = closure_objects(built.dir, order)
    found = cross_object_risks(objects, lookup)
    assert list(found) == [reader]
    assert [(r.kind, r.object) for r in found[reader]] == [(RiskKind.CROSS_OBJECT, symbol)]
    # The same objects in an order where the definer's initializers run first: no risk.
    swapped = [ObjectInitialisation(o.label, len(order) - 1 - o.position, o.initializers,
                                    o.defines) for o in objects]
    assert cross_object_risks(swapped, lookup) == {}


@pytest.mark.parametrize("program", ["app_first_use", "app_constinit"])
def test_cross_object_risks_of_the_fixed_programs(program: str) -> None:
    built = scenario("cross_object_init_order")
    assert printed(built, program) == {"reader_seen_length": "11", "app_name_length": "11"}
    library = f"libreader{program.removeprefix('app')}.so"
    objects = closure_objects(built.dir, [library, program])
    assert cross_object_risks(objects, [program, library]) == {}


def test_closure_command_agrees(tmp_path: Path) -> None:
    built = scenario("cross_object_init_order")
    result = run_elfpatch("inits", "--closure", str(built.path("app")))
    assert result.returncode == 0, result.stderr
    assert "cross-object-init-order" in result.stdout
