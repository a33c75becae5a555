"""The static destruction order fiasco, found in machine code and shown at run time.

``fixtures/exit_use_after_free``: a destructor reads a ``std::string`` whose
destructor, registered later, has already freed its buffer.  The program
says whether the string was intact at exit; ASan reports the
``heap-use-after-free``.  ``inits`` reports a ``destruction-order`` error
exactly where that happens (and a ``cross-object-destruction-order`` error
with ``--closure`` when the destructor is a library's), and none once the
string is never destroyed (``static T& t = *new T``).

``fixtures/destruction_order``: a service's destructor logs through a logger
destroyed first; the logger is also read by a detached thread, so its
exit-time destructor is one that matters (``read_at_exit``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.inits import (
    DESTRUCTOR,
    MACHINES,
    closure_errors,
    compiler_runs,
    errors,
    inits,
    inits_of,
    printed,
    risks,
    scenario,
    toolchain,
)

NAME = "_Z4nameB5cxx11"  # std::string name
ORDER = "destruction-order"
CROSS = "cross-object-destruction-order"
# program: (whether name is intact when the reporter's destructor reads it, the error)
PROGRAMS = {
    "freed_first": ("0", [(ORDER, NAME)]),
    "freed_last": ("1", []),
    "leaked": ("1", []),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_destructor_reading_a_destroyed_string(machine: str, program: str) -> None:
    built = scenario("exit_use_after_free", machine)
    intact, expected = PROGRAMS[program]
    assert printed(built, program) == {"main": "done", "at_exit_intact": intact}
    record = inits_of(built.path(program))
    assert errors(record) == expected
    if expected:
        (risk,) = risks(record, ORDER)
        assert risk["reader"] in ("_ZN8ReporterD1Ev", "_ZN8ReporterD2Ev")  # aliases
        assert risk["constructed_by"] == "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"
        assert "reporter.cpp registered this one" in risk["message"]
        assert "name.cpp registered that destructor" in risk["message"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("program", "intact"), [("app", "0"), ("app_leaked", "1")])
def test_a_librarys_destructor_reading_the_programs_string(machine: str, program: str,
                                                           intact: str) -> None:
    built = scenario("exit_use_after_free", machine)
    assert printed(built, program) == {"main": "done", "at_exit_intact": intact}
    document = inits("--closure", str(built.path(program)))
    library = "libreporter.so" if program == "app" else "libreporter_leaked.so"
    assert {Path(f["path"]).name for f in document["files"]} >= {program, library}
    expected = [(library, CROSS, NAME)] if intact == "0" else []
    assert closure_errors(document, built.dir) == expected
    # Each object alone: nothing to see.
    assert errors(inits_of(built.path(library))) == []


ASAN = ("-fsanitize=address", "-g")


@pytest.fixture(scope="module")
def asan_build() -> Path:
    if not compiler_runs(ASAN):
        pytest.skip("cannot link with -fsanitize=address (apt-get install libasan8)")
    fixture = build.SCENARIOS["exit_use_after_free"]
    targets = [t for t in fixture.targets if not t.shared and not t.libraries]
    return build.build_targets(fixture.sources(), targets, (*fixture.flags, *ASAN),
                               toolchain("x86_64"), label="exit_use_after_free-asan")


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_asan_agrees(asan_build: Path, program: str) -> None:
    import subprocess

    environment = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0"}
    result = subprocess.run([str(asan_build / program)], capture_output=True, text=True,
                            env=environment, timeout=60)
    _intact, expected = PROGRAMS[program]
    reported = "ERROR: AddressSanitizer: heap-use-after-free" in result.stderr
    assert reported == bool(expected), result.stderr[-2000:]
    if reported:  # in the reporter's destructor, run by exit
        assert "Reporter::~Reporter" in result.stderr and "exit" in result.stderr
    # The same finding from the instrumented binary.
    assert errors(inits_of(asan_build / program)) == expected


# -- fixtures/destruction_order -------------------------------------------------------------

LOGGER, SERVICE = "the_logger", "the_service"


def test_logger_destroyed_before_the_service_that_logs() -> None:
    built = scenario("destruction_order")
    result = built.run(program="buggy")
    assert "DESTROYED alive=0: service stopping" in result.stdout  # the oracle
    record = inits_of(built.path("buggy"))
    assert errors(record) == [(ORDER, LOGGER)]
    (risk,) = risks(record, ORDER)
    assert risk["reader"].startswith("_ZN7ServiceD")
    assert risk["constructed_by"].startswith("_ZN6LoggerD")
    # The logger is read at exit (by the service's destructor and the worker
    # thread): its destructor matters; nothing reads the service.
    matters = {r["object"]: r["read_at_exit"] for r in risks(record, DESTRUCTOR)}
    assert matters == {SERVICE: False, LOGGER: True}


def test_the_never_destroyed_logger_is_fine() -> None:
    built = scenario("destruction_order")
    result = built.run(program="cured")
    assert "log alive=1: service stopping" in result.stdout
    record = inits_of(built.path("cured"))
    assert errors(record) == []
    assert {r["object"] for r in risks(record, DESTRUCTOR)} == {SERVICE}


def test_a_thread_reading_a_global_makes_its_destructor_matter() -> None:
    """The worker thread (a std::thread body) alone reads the counter."""
    sources = {
        "counter.cpp": "#include <string>\nstd::string counter_name(30, 'c');\n",
        "worker.cpp": (
            "#include <cstdio>\n#include <string>\n#include <thread>\n"
            "extern std::string counter_name;\n"
            "void start() { std::thread([] { std::puts(counter_name.c_str()); }).detach(); }\n"),
        "main.cpp": "void start();\nint main() { start(); return 0; }\n",
    }
    program = build.build_executable(sources, "thread_reader", ["-O2", "-pthread"],
                                     toolchain=toolchain("x86_64"))
    record = inits_of(program)
    matters = {r["object"]: r["read_at_exit"] for r in risks(record, DESTRUCTOR)}
    assert matters == {"_Z12counter_nameB5cxx11": True}
