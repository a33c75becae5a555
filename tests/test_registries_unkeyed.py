"""Look-ups paired with registrations by the registry alone (``registries.early_lookups``),
on initializers made by hand: who counts as looking up, who as registering, and
what is said when a keyed call pairs the same look-up."""

from __future__ import annotations

from elfpatch.analysis.effects import Effects
from elfpatch.analysis.initializers import InitializerEntry
from elfpatch.analysis.registries import early_lookups, with_keyed
from elfpatch.analysis.risks import (
    AnalysedInitializer,
    Objects,
    Risk,
    RiskKind,
    Severity,
    set_on_first_use,
)
from elfpatch.elf.arrays import InitializerKind

REGISTRY = "0x5100"
GUARD = "0x50f8"
OBJECTS = Objects(lazy=frozenset({REGISTRY, GUARD}), guards=frozenset({GUARD}))


def initializer(unit: str, address: int, *, reads: tuple[str, ...] = (),
                updates: tuple[str, ...] = (), passed: tuple[str, ...] = (),
                complete: bool = True, symbol: str | None = None,
                locked: tuple[str, ...] = (), calls: tuple[str, ...] = (),
                ) -> AnalysedInitializer:
    entry = InitializerEntry(InitializerKind.INIT_ARRAY, address, address, symbol, None, unit,
                             None, None)
    effects = Effects((*updates, *locked), reads, (), calls, (), False, complete,
                      passed=passed, updates=updates, open_reads=reads, locked=locked)
    return AnalysedInitializer(entry, effects)


def verdicts(initializers: list[AnalysedInitializer]) -> list[tuple[str, str, str]]:
    return [(r.severity.value, r.kind.value, r.reader) for r in early_lookups(initializers,
                                                                              OBJECTS)]


def test_a_look_up_before_every_registration_is_an_error() -> None:
    found = verdicts([initializer("probe.cpp", 1, reads=(REGISTRY,)),
                      initializer("shapes.cpp", 2, updates=(REGISTRY,)),
                      initializer("more.cpp", 3, updates=(REGISTRY,))])
    assert found == [("error", "registration-order", "init_array[1]@0x1")]


def test_a_look_up_between_registrations_is_a_warning() -> None:
    (risk,) = early_lookups([initializer("shapes.cpp", 1, updates=(REGISTRY,)),
                             initializer("probe.cpp", 2, reads=(REGISTRY,)),
                             initializer("more.cpp", 3, updates=(REGISTRY,))], OBJECTS)
    assert (risk.severity, risk.kind) == (Severity.WARNING, RiskKind.LINK_ORDER)
    assert "after shapes.cpp registers into it but before more.cpp registers" in risk.message


def test_a_registration_only_possible_makes_a_warning() -> None:
    """Code that hands the registry to code not followed (``std::function`` inside a
    registration) may register: a look-up before it only may find nothing."""
    (risk,) = early_lookups([initializer("probe.cpp", 1, reads=(REGISTRY,)),
                             initializer("shapes.cpp", 2, passed=(REGISTRY,))], OBJECTS)
    assert (risk.severity, risk.kind) == (Severity.WARNING, RiskKind.REGISTRATION_ORDER)
    assert "before shapes.cpp may register into it: it may find none" in risk.message
    # Code that hands it on may register: it looks nothing up for sure.
    assert verdicts([initializer("probe.cpp", 1, reads=(REGISTRY,), passed=(REGISTRY,)),
                     initializer("shapes.cpp", 2, updates=(REGISTRY,))]) == []


def test_a_look_up_init_priority_puts_after_every_registration_is_no_risk() -> None:
    shapes = initializer("shapes.cpp", 1, updates=(REGISTRY,),
                         symbol="_GLOBAL__sub_I.00200_shapes.cpp")
    # The link order alone runs the registration first: correct by chance.
    assert verdicts([initializer("shapes.cpp", 1, updates=(REGISTRY,)),
                     initializer("probe.cpp", 2, reads=(REGISTRY,))]) == [
        ("warning", "link-order-dependence", "init_array[2]@0x2")]
    # init_priority(200) before the default: no link order reverses them.
    assert verdicts([shapes, initializer("probe.cpp", 2, reads=(REGISTRY,),
                                         symbol="_GLOBAL__sub_I_probe.cpp")]) == []
    # A constructor attribute's name does not say its priority: still by chance.
    assert verdicts([shapes, initializer("probe.cpp", 2, reads=(REGISTRY,),
                                         symbol="probe_constructor")]) == [
        ("warning", "link-order-dependence", "probe_constructor")]


def test_what_is_not_a_look_up_is_not_reported() -> None:
    registrar = initializer("shapes.cpp", 2, updates=(REGISTRY,))
    # A registration reads the registry too; code not followed to the end may register.
    assert verdicts([initializer("own.cpp", 1, reads=(REGISTRY,), updates=(REGISTRY,)),
                     registrar]) == []
    assert verdicts([initializer("probe.cpp", 1, reads=(REGISTRY,), complete=False),
                     registrar]) == []
    # The look-up's own TU registers in the order of its source; a guard holds no entry.
    assert verdicts([initializer("shapes.cpp", 1, reads=(REGISTRY,)), registrar]) == []
    assert verdicts([initializer("probe.cpp", 1, reads=(GUARD,)),
                     initializer("shapes.cpp", 2, updates=(GUARD,))]) == []


def test_reading_a_pointer_to_write_through_it_is_no_look_up() -> None:
    """``static Dispatcher& s = realSingleton()``: each registration reads ``s`` to
    write into what it points to (``*s``); that read looks nothing up."""
    pointer = "0x5200"
    objects = Objects(lazy=frozenset({pointer}))
    registrar = initializer("ops.cpp", 2, updates=(pointer,))
    assert [r.reader for r in early_lookups(
        [initializer("qrelu.cpp", 1, reads=(pointer,), updates=("*" + pointer,)),
         registrar], objects)] == []
    assert [r.reader for r in early_lookups(
        [initializer("probe.cpp", 1, reads=(pointer,)), registrar], objects)] == [
        "init_array[1]@0x1"]


def test_a_lock_alone_registers_nothing() -> None:
    """Both take the registry's lock; the registration alone inserts into a map."""
    insertion = "_ZSt29_Rb_tree_insert_and_rebalancebPSt18_Rb_tree_node_baseS0_RS_"
    probe = initializer("probe.cpp", 1, reads=(REGISTRY,), locked=(REGISTRY,))
    shapes = initializer("shapes.cpp", 2, reads=(REGISTRY,), locked=(REGISTRY,),
                         calls=(insertion,))
    assert verdicts([probe, shapes]) == [("error", "registration-order", "init_array[1]@0x1")]
    # Without the insertion, two look-ups: nothing registers.
    assert verdicts([probe, initializer("more.cpp", 2, reads=(REGISTRY,),
                                        locked=(REGISTRY,))]) == []


def test_a_pointer_set_where_it_is_found_null_points_to_a_registry() -> None:
    """``if (!global_) global_ = new Flags;``: read, then set, never written first."""
    pointer = "0x6000"
    getter = Effects((pointer,), (pointer, "*" + pointer), (), (), (), False, True,
                     first_access=((pointer, False), ("*" + pointer, True)),
                     updates=(pointer,))
    assert set_on_first_use([getter]) == {pointer}
    # Set by an initializer that writes it before reading it: built there, not on use.
    builder = Effects((pointer,), (), (), (), (), False, True,
                      first_access=((pointer, True),), updates=())
    assert set_on_first_use([getter, builder]) == frozenset()


def test_a_look_up_paired_by_key_too_is_said_once() -> None:
    unkeyed = early_lookups([initializer("probe.cpp", 1, reads=(REGISTRY,)),
                             initializer("shapes.cpp", 2, updates=(REGISTRY,))], OBJECTS)
    keyed = Risk(Severity.ERROR, RiskKind.REGISTRATION_ORDER, "init_array[1]@0x1", REGISTRY,
                 "init_array[2]@0x2", "probe.cpp looks up the key \"circle\"",
                 key="string:circle")
    other = Risk(Severity.ERROR, RiskKind.REGISTRATION_ORDER, "init_array[7]@0x7", REGISTRY,
                 "init_array[2]@0x2", "another look-up", key="string:square")
    assert with_keyed(unkeyed, [keyed]) == (keyed,)
    assert with_keyed(unkeyed, [other]) == (*unkeyed, other)
    assert with_keyed(unkeyed, []) == tuple(unkeyed)
