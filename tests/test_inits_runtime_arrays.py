"""``inits`` order against run time: every array an initializer or finalizer can sit in.

g++ builds a program and a library whose entries each print a marker:
``.preinit_array`` function pointers (executables only: GNU ld refuses the
section in a shared object), ``__attribute__((constructor(N)))`` and
``destructor(N)``, ``init_priority`` objects, function pointers placed by
hand in ``.init_array`` and ``.fini_array``, and in the legacy ``.ctors``
and ``.dtors``.  The program runs; the markers it prints before ``main``
and after it are compared with the order ``elfpatch inits --json`` (and
``--closure`` for the program linked with the library) reports.

What this toolchain does with ``.ctors``/``.dtors`` is part of the test:
GNU ld (2.40 here) folds them into ``.init_array``/``.fini_array`` with
their slots reversed, so ``{a, b, c}`` in ``.ctors`` runs c, b, a and in
``.dtors`` runs a, b, c, as the old crt's loops did.  Kept in sections of
their own by a linker script, nothing runs them: gcc's crt has no
``__do_global_ctors_aux`` when gcc is built with init_array support (every
current Linux distribution), and ``_init``/``_fini`` do not walk them.

Objects with destructors are checked apart: their destructors, registered
with ``__cxa_atexit`` by the initializers ``inits`` marks
``registers_destructor``, run in reverse order of registration.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build
from support.inits import toolchain

# write(2), not stdio: a .preinit_array entry runs before any library is initialised.
COMMON = r"""
#pragma once
#include <cstring>
#include <unistd.h>
static void mark(const char* text) { ::write(1, text, std::strlen(text)); ::write(1, "\n", 1); }
#define MARKER(name) extern "C" void name() { mark(#name); }
// Aligned to a pointer: a 16-byte aligned array would leave a null slot that glibc calls.
#define SLOTS(where, array, ...) \
    __attribute__((section(where), used, aligned(sizeof(void*)))) \
    static void (*array[])() = {__VA_ARGS__};
struct Noisy {
    const char* made; const char* gone;
    Noisy(const char* m, const char* g) : made(m), gone(g) { mark(made); }
    ~Noisy() { mark(gone); }
};
"""


def _entries(prefix: str) -> str:
    """Initializers and finalizers of every kind an object file can hold, named ``prefix_*``."""
    text = """
extern "C" __attribute__((constructor(101))) void P_ctor_101() { mark("P_ctor_101"); }
extern "C" __attribute__((constructor(250))) void P_ctor_250() { mark("P_ctor_250"); }
extern "C" __attribute__((constructor)) void P_ctor() { mark("P_ctor"); }
extern "C" __attribute__((destructor(101))) void P_dtor_101() { mark("P_dtor_101"); }
extern "C" __attribute__((destructor(250))) void P_dtor_250() { mark("P_dtor_250"); }
extern "C" __attribute__((destructor)) void P_dtor() { mark("P_dtor"); }
__attribute__((init_priority(150))) Noisy P_object_150("P_object_150", "P_object_150_destroyed");
__attribute__((init_priority(300))) Noisy P_object_300("P_object_300", "P_object_300_destroyed");
Noisy P_object("P_object", "P_object_destroyed");
MARKER(P_init_slot_a) MARKER(P_init_slot_b) MARKER(P_fini_slot_a) MARKER(P_fini_slot_b)
MARKER(P_ctors_a) MARKER(P_ctors_b) MARKER(P_ctors_c)
MARKER(P_dtors_a) MARKER(P_dtors_b) MARKER(P_dtors_c)
SLOTS(".init_array", P_init_slots, P_init_slot_a, P_init_slot_b)
SLOTS(".fini_array", P_fini_slots, P_fini_slot_a, P_fini_slot_b)
SLOTS(".ctors", P_ctors_slots, P_ctors_a, P_ctors_b, P_ctors_c)
SLOTS(".dtors", P_dtors_slots, P_dtors_a, P_dtors_b, P_dtors_c)
"""
    return text.replace("P_", f"{prefix}_")


PREINIT = """
MARKER(P_preinit_a) MARKER(P_preinit_b)
SLOTS(".preinit_array", P_preinit_slots, P_preinit_a, P_preinit_b)
"""

SOURCES = {
    "common.h": COMMON,
    "prog.cpp": '#include "common.h"\n' + _entries("prog") + PREINIT.replace("P_", "prog_")
                + 'int main() { mark("main"); return 0; }\n',
    "lib.cpp": '#include "common.h"\n' + _entries("lib") + 'extern "C" int lib_value() '
               '{ return 7; }\n',
    "host.cpp": '#include "common.h"\nextern "C" int lib_value();\n' + PREINIT.replace(
        "P_", "host_") + """
extern "C" __attribute__((constructor(120))) void host_ctor_120() { mark("host_ctor_120"); }
extern "C" __attribute__((destructor(120))) void host_dtor_120() { mark("host_dtor_120"); }
Noisy host_object("host_object", "host_object_destroyed");
int main() { mark("main"); return lib_value() - 7; }
""",
    # Keeps .ctors and .dtors out of .init_array and .fini_array: placed before them,
    # these statements claim the input sections first.
    "keep_ctors.ld": "SECTIONS { .ctors : { KEEP (*(.ctors)) } .dtors : { KEEP (*(.dtors)) } }"
                     " INSERT BEFORE .init_array;\n",
    "preinit_lib.cpp": '#include "common.h"\n' + PREINIT.replace("P_", "plib_"),
    # A library global built by an initializer, and a program whose preinit array reads it.
    "table.cpp": '#include <vector>\nstd::vector<int> make() { return {1, 2, 3}; }\n'
                 'std::vector<int> lib_table = make();\n',
    "early.cpp": '#include "common.h"\n#include <cstdio>\n#include <vector>\n'
                 'extern std::vector<int> lib_table;\n'
                 'extern "C" void early_look() { char text[32]; std::snprintf(text, 32, '
                 '"seen=%zu", lib_table.size()); mark(text); }\n'
                 'SLOTS(".preinit_array", early_slots, early_look)\n'
                 'int main() { mark("main"); char text[32]; std::snprintf(text, 32, "now=%zu", '
                 'lib_table.size()); mark(text); return 0; }\n',
    # A slot left null (as a 16-byte aligned array of one pointer would leave one).
    "null_slot.cpp": '#include "common.h"\nMARKER(before_null)\n'
                     'SLOTS(".init_array", null_slots, before_null, nullptr)\n'
                     'int main() { mark("main"); return 0; }\n',
}

TARGETS = [
    build.Target("prog", ("prog.cpp",), flags=("-O1",)),
    build.Target("prog_own_ctors", ("prog.cpp",), flags=("-O1", "-Wl,-T,keep_ctors.ld")),
    build.Target("libinits.so", ("lib.cpp",), shared=True, flags=("-O1",)),
    build.Target("host", ("host.cpp",), flags=("-O1",), libraries=("libinits.so",)),
    build.Target("null_slot", ("null_slot.cpp",), flags=("-O1",)),
    build.Target("libtable.so", ("table.cpp",), shared=True, flags=("-O1",)),
    build.Target("early", ("early.cpp",), flags=("-O1",), libraries=("libtable.so",)),
]

# The C runtime's entries: in every order, but they print nothing.
RUNTIME = {"_init", "_fini", "frame_dummy", "__do_global_dtors_aux"}
_TU_INITIALIZER = re.compile(r"^_GLOBAL__sub_I(?:\.(\d{5}))?_")


@pytest.fixture(scope="module")
def built() -> Path:
    try:
        return build.build_targets(SOURCES, TARGETS, toolchain=toolchain("x86_64"),
                                   label="inits-runtime-arrays")
    except build.BuildError as error:
        pytest.skip(f"cannot link with g++ here (apt-get install g++): {error}")


def _run(program: Path) -> tuple[list[str], list[str]]:
    """The markers ``program`` prints before ``main`` and after it."""
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60,
                          cwd=program.parent)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    return lines[: lines.index("main")], lines[lines.index("main") + 1 :]


def _inits(*args: str) -> dict:
    result = run_elfpatch("inits", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _marker(entry: dict, prefix: str) -> str | None:
    """What ``entry`` prints: its function's name, or for a TU initializer its object's."""
    symbol = entry["symbol"]
    assert symbol is not None, entry
    if symbol in RUNTIME:
        return None
    tu = _TU_INITIALIZER.match(symbol)
    if tu:
        return f"{prefix}_object" + (f"_{int(tu.group(1))}" if tu.group(1) else "")
    return symbol


def _reported(record: dict, prefix: str) -> tuple[list[str], list[str], list[str]]:
    """(initializer markers, finalizer markers, object markers in registration order)."""
    markers = [(e, _marker(e, prefix)) for e in record["initializers"]]
    inits = [m for _, m in markers if m]
    registering = [m for e, m in markers if m and e["registers_destructor"]]
    finis = [m for m in (_marker(e, prefix) for e in record["finalizers"]) if m]
    return inits, finis, registering


def _split_exit(printed: list[str]) -> tuple[list[str], list[str]]:
    """(finalizer markers, destroyed-object markers) of what ran after ``main``."""
    gone = [line for line in printed if line.endswith("_destroyed")]
    return [line for line in printed if line not in gone], gone


def _destroyed(registering: list[str]) -> list[str]:
    return [f"{marker}_destroyed" for marker in reversed(registering)]


# -- what the toolchain does ---------------------------------------------------------------

def test_the_toolchain_folds_ctors_into_the_arrays_reversed(built: Path) -> None:
    """The facts the order tests rest on, from the program itself."""
    before, after = _run(built / "prog")
    assert [m for m in before if "_ctors_" in m] == ["prog_ctors_c", "prog_ctors_b",
                                                     "prog_ctors_a"]
    assert [m for m in after if "_dtors_" in m] == ["prog_dtors_a", "prog_dtors_b",
                                                    "prog_dtors_c"]
    own_before, own_after = _run(built / "prog_own_ctors")
    assert not [m for m in own_before + own_after if "_ctors_" in m or "_dtors_" in m]


def test_ld_refuses_a_preinit_array_in_a_shared_object() -> None:
    target = build.Target("libpreinit.so", ("preinit_lib.cpp",), shared=True)
    with pytest.raises(build.BuildError) as refused:
        build.build_targets(SOURCES, [target], toolchain=toolchain("x86_64"),
                            label="inits-preinit-dso")
    assert ".preinit_array section is not allowed in DSO" in refused.value.stderr


# -- one program ----------------------------------------------------------------------------

def test_a_program_runs_its_entries_in_the_order_inits_reports(built: Path) -> None:
    (record,) = _inits(str(built / "prog"))["files"]
    inits, finis, registering = _reported(record, "prog")
    before, after = _run(built / "prog")
    assert before == inits
    assert inits[:2] == ["prog_preinit_a", "prog_preinit_b"]  # the preinit array leads
    ran_finis, destroyed = _split_exit(after)
    assert ran_finis == finis
    assert destroyed == _destroyed(registering)


def test_ctors_in_a_section_of_their_own_do_not_run(built: Path) -> None:
    (record,) = _inits(str(built / "prog_own_ctors"))["files"]
    inits, finis, _ = _reported(record, "prog")
    before, after = _run(built / "prog_own_ctors")
    assert (inits, finis) == (before, _split_exit(after)[0])


# -- a program and its library, as the closure ------------------------------------------------

def _ours(document: dict, folder: Path) -> list[dict]:
    """The closure's records of the objects built here, in the order inits lists them."""
    inside = folder.resolve()
    return [f for f in document["files"] if Path(f["path"]).resolve().parent == inside]


def _closure_reported(built: Path) -> tuple[list[str], list[str], list[str]]:
    """The closure's markers, objects in the reported order (finalizers: the reverse)."""
    document = _inits("--closure", str(built / "host"))
    records = _ours(document, built)
    assert [Path(r["path"]).name for r in records] == ["libinits.so", "host"]
    parts = [_reported(r, "lib" if r["path"].endswith(".so") else "host") for r in records]
    inits = [m for part in parts for m in part[0]]
    finis = [m for part in reversed(parts) for m in part[1]]
    registering = [m for part in parts for m in part[2]]
    return inits, finis, registering


def test_a_library_and_its_program_run_in_the_order_the_closure_reports_but_preinit(
        built: Path) -> None:
    """Everything but the program's preinit array, which the next test holds apart."""
    inits, finis, registering = _closure_reported(built)
    before, after = _run(built / "host")
    assert [m for m in before if "preinit" not in m] == [m for m in inits if "preinit" not in m]
    ran_finis, destroyed = _split_exit(after)
    assert ran_finis == finis
    assert destroyed == _destroyed(registering)
    (alone,) = _inits(str(built / "libinits.so"))["files"]
    assert _reported(alone, "lib")[0] == [m for m in before if m.startswith("lib_")]


def test_the_programs_preinit_array_runs_before_its_libraries(built: Path) -> None:
    """The closure lists the program's preinit array as its own first step."""
    document = _inits("--closure", str(built / "host"))
    records = {r["path"]: r for r in _ours(document, built)}
    steps = [(s["path"], s["phase"]) for s in document["closure"] if s["path"] in records]
    host = next(path for path in records if not path.endswith(".so"))
    assert steps[0] == (host, "preinit_array") and steps[-1] == (host, "initializers")
    order = []
    for path, phase in steps:
        prefix = "lib" if path.endswith(".so") else "host"
        entries = [e for e in records[path]["initializers"]
                   if (e["kind"] == "preinit_array") == (phase == "preinit_array")]
        order += [m for m in (_marker(e, prefix) for e in entries) if m]
    before, _ = _run(built / "host")
    assert before[:2] == ["host_preinit_a", "host_preinit_b"]  # the run-time fact
    assert order == before
    text = run_elfpatch("inits", "--closure", str(built / "host")).stdout
    assert "[its .preinit_array: a program's runs before every library]" in text


# -- a null slot ------------------------------------------------------------------------------

def test_a_null_slot_is_not_named_after_a_file_symbol(built: Path) -> None:
    done = subprocess.run([str(built / "null_slot")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode < 0 and done.stdout == "before_null\n"  # killed after the marker
    (record,) = _inits(str(built / "null_slot"))["files"]
    (null,) = [e for e in record["initializers"] if e["address"] == 0]
    assert null["symbol"] is None, null


def test_a_preinit_reader_of_a_library_global_is_an_error(built: Path) -> None:
    """The program's preinit array runs before the library builds what it reads."""
    before, after = _run(built / "early")
    assert (before, after) == (["seen=0"], ["now=3"])  # read before the library's initializer
    document = _inits("--closure", str(built / "early"))
    (record,) = [r for r in _ours(document, built) if r["path"].endswith("/early")]
    errors = [(r["kind"], r["reader"], r["object"]) for r in record["risks"]
              if r["severity"] == "error"]
    assert ("cross-object-init-order", "early_look", "lib_table") in errors

