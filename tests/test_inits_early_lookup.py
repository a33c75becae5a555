"""A look-up in a registry built on first use, made before the registrations
(``fixtures/early_lookup``).

``probe.cpp``'s initializer looks ``"circle"`` up with an inlined
``std::map::count`` and a ``std::string`` key; ``shapes.cpp``'s registers it.
The oracle is what the program prints: ``found=0`` where the look-up ran
first, ``found=1`` otherwise, the registry holding 2 entries either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    inits,
    order_risks_when_stripped,
    printed,
    risks,
    same_when_stripped,
    scenario,
)

REGISTRATION_KINDS = (*ORDER_KINDS, "registration-order")


@pytest.mark.parametrize("machine", MACHINES)
def test_a_look_up_before_the_registrations_is_an_error(machine: str, tmp_path: Path) -> None:
    built = scenario("early_lookup", machine)
    assert printed(built, "probe_first") == {"found": "0", "entries": "2"}
    for path in (built.path("probe_first"), built.path("libprobe_first.so")):
        found = risks(same_when_stripped(machine, path, tmp_path), *REGISTRATION_KINDS)
        assert [(r["severity"], r["kind"]) for r in found] == [("error", "registration-order")]
        (risk,) = found
        assert risk["object_address"] is not None
        assert risk["reader_address"] != risk["constructed_by_address"]
    named = risks(same_when_stripped(machine, built.path("probe_first"), tmp_path),
                  "registration-order")
    assert named[0]["message"].startswith("probe.cpp looks up Registry::get()::registry")
    assert "before shapes.cpp registers into it" in named[0]["message"]


@pytest.mark.parametrize("machine", MACHINES)
def test_a_look_up_after_them_is_a_link_order_dependence(machine: str, tmp_path: Path) -> None:
    built = scenario("early_lookup", machine)
    assert printed(built, "shapes_first") == {"found": "1", "entries": "2"}
    found = order_risks_when_stripped(machine, built.path("shapes_first"), tmp_path)
    assert [(r["severity"], r["kind"]) for r in found] == [("warning", "link-order-dependence")]
    assert "after shapes.cpp registers into it" in found[0]["message"]


@pytest.mark.parametrize("machine", MACHINES)
def test_a_registry_behind_a_pointer_is_paired_too(machine: str, tmp_path: Path) -> None:
    """``static Operators* registry = new Operators``: what the code reads and writes
    through the pointer the accessor returns is the registry (``*`` before the
    pointer's name)."""
    built = scenario("early_lookup", machine)
    assert printed(built, "lookup_first") == {"found": "0", "entries": "1"}
    assert printed(built, "relu_first") == {"found": "1", "entries": "1"}
    early = risks(same_when_stripped(machine, built.path("lookup_first"), tmp_path),
                  *REGISTRATION_KINDS)
    late = order_risks_when_stripped(machine, built.path("relu_first"), tmp_path)
    assert [(r["severity"], r["kind"], r["object"]) for r in early] == [
        ("error", "registration-order", "*_ZZ9operatorsvE8registry")]
    assert early[0]["message"].startswith(
        "lookup.cpp looks up what operators()::registry points to")
    assert [(r["severity"], r["kind"]) for r in late] == [("warning", "link-order-dependence")]


@pytest.mark.parametrize("machine", MACHINES)
def test_a_look_up_counts_where_the_code_before_it_is_all_followed(
        machine: str, tmp_path: Path) -> None:
    """A call through a pointer the reading cannot follow (a hook) after the look-up
    leaves it a look-up; one before it may register the key first."""
    built = scenario("early_lookup", machine)
    assert printed(built, "probe_then_hook_first") == {"found": "0", "entries": "2"}
    assert printed(built, "hook_then_probe_first") == {"found": "0", "entries": "2"}
    after = risks(same_when_stripped(machine, built.path("probe_then_hook_first"), tmp_path),
                  *REGISTRATION_KINDS)
    assert [(r["severity"], r["kind"]) for r in after] == [("error", "registration-order")]
    assert after[0]["message"].startswith("probe_then_hook.cpp looks up")
    before = risks(same_when_stripped(machine, built.path("hook_then_probe_first"), tmp_path),
                   *REGISTRATION_KINDS)
    assert before == []


@pytest.mark.parametrize("machine", MACHINES)
def test_a_registry_a_locked_pointer_holds_is_paired_too(machine: str, tmp_path: Path) -> None:
    """gflags' shape: ``Flags::global()`` sets a null pointer under a lock to a registry
    built on first use (stored before it is built: the stores through the fresh
    pointer build it); defining a flag and looking it up both take the registry's
    lock, and only the definition inserts into its map.  Paired by the key too."""
    built = scenario("early_lookup", machine)
    assert printed(built, "flag_probe_first") == {"found": "0", "entries": "1"}
    assert printed(built, "depth_flag_first") == {"found": "1", "entries": "1"}
    early = risks(same_when_stripped(machine, built.path("flag_probe_first"), tmp_path),
                  *REGISTRATION_KINDS)
    late = order_risks_when_stripped(machine, built.path("depth_flag_first"), tmp_path)
    assert [(r["severity"], r["kind"], r["key"]) for r in early] == [
        ("error", "registration-order", "string:depth")]
    assert early[0]["object"] == "*_ZN12_GLOBAL__N_15Flags7global_E"
    assert early[0]["message"].startswith('flag_probe.cpp looks up the key "depth" with '
                                          "GetFlag(char const*, int*) in the registry that "
                                          "(anonymous namespace)::Flags::global_ points to, "
                                          "of ")
    assert [(r["severity"], r["kind"]) for r in late] == [("warning", "link-order-dependence")]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_same_registry_in_a_library_of_its_own(machine: str) -> None:
    """``libflags.so`` holds the registry and its functions, as Debian's libgflags.so
    does: ``--closure`` pairs the program's look-up and definition by their key."""
    built = scenario("early_lookup", machine)
    assert printed(built, "flag_probe_first_shared") == {"found": "0", "entries": "1"}
    assert printed(built, "depth_flag_first_shared") == {"found": "1", "entries": "1"}
    for program, expected in (("flag_probe_first_shared", ("error", "registration-order")),
                              ("depth_flag_first_shared", ("warning", "link-order-dependence"))):
        document = inits("--closure", str(built.path(program)))
        found = [(r["severity"], r["kind"], r["key"]) for record in document["files"]
                 for r in record["risks"] if r["kind"] in REGISTRATION_KINDS]
        assert found == [(*expected, "string:depth")], program
