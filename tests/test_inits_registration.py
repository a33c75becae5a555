"""Registrations, and findings that hold once a build is stripped (``fixtures/registration``).

Two test files register into ``registry``, a global of another TU, from their
initializers.  Linked first, their entries are emptied by the registry's own
constructor: the program prints ``tests=0``.  The oracle is what each build
prints: ``inits`` reports registration errors exactly where the program lost
its tests, at -O2 and with -flto, in an executable and in a shared library;
never a risk for ``registered_count`` (zero-initialized, bumped by every
registration) nor a destruction-order error for ``header_label`` (a header's
``static`` string: one object per TU, all of one name, each destructor
reading its own TU's copy).  A ``strip --strip-unneeded`` copy gives the same
findings, identified by address.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_elfpatch
from support.inits import MACHINES, inits_of, printed, risks, scenario, strip_unneeded
from support.readelf import readelf_symbols

# program run -> object analysed
PROGRAMS = {
    "registry_first": "registry_first",
    "tests_first": "tests_first",
    "registry_first_lto": "registry_first_lto",
    "tests_first_lto": "tests_first_lto",
    "shared_host": "libtests_first.so",
}
NOT_LTO = [p for p in PROGRAMS if not p.endswith("_lto")]


def findings(record: dict) -> set[tuple]:
    """What identifies each risk, whatever names the file keeps."""
    return {(r["severity"], r["kind"], r.get("object_address"), r["object"]
             if r.get("object_address") is None else None, r.get("reader_address"),
             r.get("constructed_by_address")) for r in record["risks"]}


def registration_errors(record: dict) -> list[dict]:
    """Init-order errors on the registry: a registration written before its constructor
    ran, or (-flto, the TUs' code inlined into one function) read before it."""
    return [r for r in risks(record, "init-order") if r["object"] == "registry"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_errors_where_the_program_lost_its_tests(machine: str, program: str) -> None:
    built = scenario("registration", machine)
    output = printed(built, program)
    assert output["count"] == "2"  # the counter needs no constructor: right in both orders
    assert output["farewell"] == "label-of-this-tu"
    record = inits_of(built.path(PROGRAMS[program]))
    found = registration_errors(record)
    assert bool(found) == (output["tests"] == "0"), (output, risks(record))
    assert all(r["object"] == "registry" for r in found)
    assert all(r["severity"] == "warning" or r in found for r in risks(record))
    assert not [r for r in record["risks"] if "registered_count" in r["message"]]
    assert not risks(record, "destruction-order")


@pytest.mark.parametrize("machine", MACHINES)
def test_the_order_that_works_is_a_link_order_dependence(machine: str) -> None:
    built = scenario("registration", machine)
    assert printed(built, "registry_first")["tests"] == "2"
    record = inits_of(built.path("registry_first"))
    warned = [r for r in risks(record, "link-order-dependence") if "writes into" in r["message"]]
    assert {r["object"] for r in warned} == {"registry"}
    assert len({r["reader_address"] for r in warned}) == 2  # test_one.cpp, test_two.cpp


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(NOT_LTO))
def test_a_stripped_build_gives_the_same_findings(machine: str, program: str,
                                                  tmp_path: Path) -> None:
    built = scenario("registration", machine)
    original = built.path(PROGRAMS[program])
    copy = strip_unneeded(machine, original, tmp_path)
    assert not [s for s in readelf_symbols(copy) if s.table == ".symtab"]
    assert findings(inits_of(copy)) == findings(inits_of(original))
    text = run_elfpatch("inits", str(copy)).stdout
    assert "registers ? for" not in text


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(p for p in PROGRAMS if p.endswith("_lto")))
def test_a_stripped_lto_build_gives_the_same_findings(machine: str, program: str,
                                                      tmp_path: Path) -> None:
    """gcc -flto inlines every TU's initialization into one function; stripped, that
    function is known only as the object's one initializer, read the same way."""
    built = scenario("registration", machine)
    original = built.path(PROGRAMS[program])
    copy = strip_unneeded(machine, original, tmp_path)
    assert findings(inits_of(copy)) == findings(inits_of(original))
    lost = printed(built, program)["tests"] == "0"
    assert bool(risks(inits_of(copy), "init-order")) == lost


@pytest.mark.parametrize("machine", MACHINES)
def test_same_named_objects_of_each_tu_stay_apart(machine: str) -> None:
    """Each TU's ``header_label`` is destroyed at exit: four objects, at the four
    addresses .symtab gives them (readelf)."""
    built = scenario("registration", machine)
    path = built.path("tests_first")
    labels = {s.value for s in readelf_symbols(path)
              if s.table == ".symtab" and s.name == "_ZL12header_label"}
    assert len(labels) == 4
    destroyed = {r["object_address"] for r in risks(inits_of(path), "exit-time-destructor")
                 if r["object"] == "_ZL12header_label"}
    assert destroyed == labels


def test_the_json_carries_addresses() -> None:
    built = scenario("registration")
    document = json.loads(run_elfpatch("inits", "--json", str(built.path("tests_first"))).stdout)
    (found, *_rest) = registration_errors(document["files"][0])
    registry = next(s.value for s in readelf_symbols(built.path("tests_first"))
                    if s.table == ".symtab" and s.name == "registry")
    assert found["object_address"] == registry
