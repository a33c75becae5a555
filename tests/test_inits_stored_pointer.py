"""A pointer kept, not read (``fixtures/stored_pointer``), and what a call is passed.

``deb.cpp`` hands ``&deb_versioning`` to ``System``'s constructor, which
stores it and then calls ``operator new[](unsigned long)`` with the pointer
still in an argument register.  ``length.cpp`` really reads
``deb_versioning`` early.  The oracle is what each build prints
(``early_length=0`` where the read came first; ``name_length=6`` always).
``inits`` must charge ``deb.cpp`` with nothing and report ``length.cpp``
exactly where the program shows the bug, stripped or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import MACHINES, ORDER_KINDS, inits_of, printed, risks, scenario, strip_unneeded

from elfpatch.analysis.effects.names import argument_registers, format_arguments
from elfpatch.cxx.names import parameter_types

PROGRAMS = ["stored_first", "stored_last", "stored_first_lto"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_only_the_real_read_is_reported(machine: str, program: str) -> None:
    built = scenario("stored_pointer", machine)
    output = printed(built, program)
    assert output["name_length"] == "6"
    found = risks(inits_of(built.path(program)), *ORDER_KINDS)
    assert not [r for r in found if "deb.cpp" in r["message"]], found
    errors = [r for r in found if r["severity"] == "error"]
    assert bool(errors) == (output["early_length"] == "0"), (output, found)
    if not program.endswith("_lto"):
        assert ["length.cpp" in r["message"] for r in found] == [True], found


@pytest.mark.parametrize("machine", MACHINES)
def test_the_library_and_its_stripped_copy(machine: str, tmp_path: Path) -> None:
    library = scenario("stored_pointer", machine).path("libstored_first.so")
    found = risks(inits_of(library), *ORDER_KINDS)
    assert [(r["severity"], "length.cpp" in r["message"]) for r in found] == [("error", True)]
    stripped = risks(inits_of(strip_unneeded(machine, library, tmp_path)), *ORDER_KINDS)
    # The object is exported: .dynsym names it, stripped or not.
    assert [(r["severity"], r["object"], r["reader_address"]) for r in stripped] == \
        [(r["severity"], r["object"], r["reader_address"]) for r in found]


@pytest.mark.parametrize(("mangled", "types", "registers"), [
    ("_Znwm", ["unsigned long"], 2),  # operator new(unsigned long): and a result's address
    ("_ZN9pkgSystemC2EPKcP19pkgVersioningSystem", ["char const*", "pkgVersioningSystem*"], 4),
    ("_ZNSt6vectorIiSaIiEE9push_backERKi", ["int const&"], 3),  # this, then the reference
    ("_ZZ1fvENKUliE_clEi", ["int"], 3),  # a lambda's own parameters, not f()'s
    ("_Z1fPFviEM3FooFvvE", ["void (*)(int)", "void (Foo::*)()"], 4),  # a member pointer: 2
    ("_Z1gSt17basic_string_viewIcSt11char_traitsIcEE",
     ["std::basic_string_view<char, std::char_traits<char> >"], 3),  # a class in two
    ("_Z1hn", ["__int128"], 3),
    ("_ZN1A1fIiEEvT_", ["int"], 3),  # a template: its return type printed first
    ("_Z1fv", [], 1),
])
def test_the_registers_a_call_can_read(mangled: str, types: list[str], registers: int) -> None:
    from elfpatch.cxx.demangle import demangle

    if demangle(mangled) == mangled:
        pytest.skip("no C++ demangler in this interpreter's runtime (apt-get install libstdc++6)")
    assert parameter_types(demangle(mangled)) == types
    assert argument_registers(mangled) == registers


@pytest.mark.parametrize("name", ["qsort_r", "_Z1fz", "_Z3bazv.constprop.0", "_Z1fv.isra.0"])
def test_not_known_is_every_register(name: str) -> None:
    """A C name not in the table, varargs, or a copy gcc made with parameters of its
    own choosing."""
    assert argument_registers(name) is None


@pytest.mark.parametrize(("name", "registers"), [
    ("__stack_chk_fail", 0), ("free", 1), ("malloc", 1), ("memcpy", 3),
    ("__cxa_throw", 3), ("pthread_once", 2), ("memcpy@GLIBC_2.14", 3)])
def test_c_functions_of_one_prototype_take_their_registers(name: str, registers: int) -> None:
    """A pointer left in ``rcx`` across the stack protector's failure call (nvJitLink's
    ``cl::opt`` constructors) is not passed to it."""
    assert argument_registers(name) == registers


@pytest.mark.parametrize(("name", "registers"), [
    ("_ZdlPvm", 2), ("_Znwm", 1), ("_ZNSt6vectorIiSaIiEE9push_backERKi", 2), ("memcpy", 3),
    ("__cxa_guard_acquire", 1)])
def test_a_result_with_a_register_of_its_own_takes_none_of_theirs(
        name: str, registers: int) -> None:
    """aarch64 passes a by-value result's address in x8: ``operator delete(void*,
    unsigned long)`` reads x0 and x1, not a global's address left in x2 (pyarrow 26's
    aarch64 ``libarrow.so``: a section anchor); a C name's count has no such slot."""
    from elfpatch.cxx.demangle import demangle

    if name.startswith("_Z") and demangle(name) == name:
        pytest.skip("no C++ demangler in this interpreter's runtime (apt-get install libstdc++6)")
    assert argument_registers(name, result_apart=True) == registers


@pytest.mark.parametrize(("text", "arguments"), [
    ("call %d by %p", 2), ("100%%", 0), ("%%d %ld", 1), ("%*.*s and %s", 4),
    ("%-8s|%08.3f|%lu\n", 3), ("%1$d %1$d", None)])
def test_a_formats_conversions_are_its_arguments(text: str, arguments: int | None) -> None:
    """A printf-family call takes one argument per conversion after its format (``*``
    one more); a register past them holds what gcc left there (aarch64's ``x5``
    holding a flag's page across ``snprintf``), passed to nobody."""
    assert format_arguments(text) == arguments
