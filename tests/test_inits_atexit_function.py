"""A function registered with ``atexit`` from an initializer (``fixtures/atexit_function``).

It destroys no object, so it is no exit-time destructor to leak; but it runs
at exit among the destructors, in the reverse order of registration, and what
it reads then is checked: linked before the string's TU, it is registered
first, runs last and reads the string destroyed (``farewell_intact=0``).

Each object links its own copy of libc's ``atexit`` (from libc_nonshared.a),
a local function that a stripped object no longer names.  Known by its code
(it hands its first argument to ``__cxa_atexit`` with no object), the
stripped program's findings are the unstripped one's; before, the function
registered was not known, and each call looked like a TU of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.inits import (
    DESTRUCTOR,
    MACHINES,
    errors,
    inits_of,
    printed,
    risks,
    same_when_stripped,
    scenario,
    strip_unneeded,
)
from support.readelf import readelf_symbols

PREFIX = "_Z10log_prefixB5cxx11"
# program: (what farewell() sees at exit, the errors)
PROGRAMS = {
    "farewell_first": ("0", [("destruction-order", PREFIX)]),
    "prefix_first": ("1", []),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_an_atexit_function_reading_a_destroyed_string(machine: str, program: str,
                                                       tmp_path: Path) -> None:
    built = scenario("atexit_function", machine)
    intact, expected = PROGRAMS[program]
    assert printed(built, program) == {"main": "done", "farewell_intact": intact}
    record = same_when_stripped(machine, built.path(program), tmp_path)
    assert errors(record) == expected
    if expected:
        (risk,) = risks(record, "destruction-order")
        assert risk["reader"] == "_ZL8farewellv"
        assert "prefix.cpp registered that destructor after farewell.cpp registered this " \
            "one" in risk["message"]
    # The string is the one object destroyed at exit; farewell() destroys none.
    assert [r["object"] for r in risks(record, DESTRUCTOR)] == [PREFIX]
    # Stripped, each TU is one initializer still, not a merge of one part per call.
    stripped = inits_of(tmp_path / program)
    assert [entry for entry in stripped["initializers"] if "parts" in entry] == []


@pytest.mark.parametrize("machine", MACHINES)
def test_a_static_arrays_cleanup_is_a_destructor(machine: str, tmp_path: Path) -> None:
    """gcc destroys a static array in a function of its own (``__tcf_0``), registered
    with ``__cxa_atexit`` and no object: unlike ``farewell()``, it destroys objects."""
    built = scenario("atexit_function", machine)
    assert printed(built, "prefix_first_words") == {"main": "done", "farewell_intact": "1"}
    record = same_when_stripped(machine, built.path("prefix_first_words"), tmp_path)
    assert errors(record) == []
    registered = sorted(r["message"].partition(" to run at exit")[0]
                        for r in risks(record, DESTRUCTOR))
    assert len(registered) == 2, registered
    assert registered[0].startswith("prefix.cpp registers ")
    assert registered[1] == "words.cpp registers __tcf_0 for an object"


@pytest.mark.parametrize("machine", MACHINES)
def test_a_cleanup_loop_from_the_end_reads_its_own_array(machine: str, tmp_path: Path) -> None:
    """``methods.cpp``'s array of structs with ``std::function`` members, followed in
    ``.bss`` by ``tail.cpp``'s string: gcc's ``__tcf_0`` starts from the address past
    the array's end, the string's, and reads each manager below it (aarch64: ``ldur
    x3, [x19, #-0x10]``).  Those reads are the array's: reading a negative offset as
    0 charged ``__tcf_0`` with reading the string, destroyed first (torch 2.14.1's
    aarch64 ``libarm_compute.so``: one false destruction-order error)."""
    built = scenario("atexit_function", machine)
    assert printed(built, "methods_then_tail") == {"main": "done", "farewell_intact": "1"}
    path = built.path("methods_then_tail")
    symbols = {s.name: s for s in readelf_symbols(path) if s.table == ".symtab"}
    array, tail = symbols["_ZN12_GLOBAL__N_17methodsE"], symbols["_Z9tail_nameB5cxx11"]
    assert array.value + array.size == tail.value  # what makes the test: the layout
    record = same_when_stripped(machine, path, tmp_path)
    assert errors(record) == []


def _chain_of_small_functions(length: int) -> str:
    """An initializer that calls the first of ``length`` small functions, each calling
    the next: none of them is libc's ``atexit``."""
    lines = ["int chain_end = 0;"]
    lines.append(f"__attribute__((noinline)) int link{length}(int x) {{ return x + chain_end; }}")
    for n in range(length - 1, -1, -1):
        lines.append(f"__attribute__((noinline)) static int link{n}(int x) "
                     f"{{ return link{n + 1}(x + 1) + 1; }}")
    lines.append("int chained = link0(1);")
    lines.append('int main() { return chained > 0 ? 0 : 1; }')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("machine", MACHINES)
def test_a_long_chain_of_small_functions_is_no_atexit_copy(machine: str,
                                                             tmp_path: Path) -> None:
    """Each small function without a name that a sweep meets is looked at as a possible
    copy of ``atexit``; the look must not follow its calls in turn (onnxruntime 1.32:
    a ``RecursionError``, an internal error, once its library was stripped of names)."""
    from support.inits import toolchain

    program = build.build_executable({"chain.cpp": _chain_of_small_functions(400)}, "chain",
                                     ("-O2", "-fno-optimize-sibling-calls"),
                                     toolchain=toolchain(machine))
    record = inits_of(strip_unneeded(machine, program, tmp_path))
    assert errors(record) == []
