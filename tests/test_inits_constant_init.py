"""Constant-initialized globals are not init-order risks (``fixtures/constant_init``).

Under -std=c++20 gcc builds a short ``std::string``, a ``std::array`` of
them and a struct with a constexpr constructor completely in ``.data``;
their TU's initializer only registers their destructors.  The program, run,
shows they are ready when an earlier initializer reads them, and that
``full`` (built at run time, in ``.bss``) is not: ``inits`` reports that
read alone, as an executable and as a shared library, on x86-64 and aarch64.
"""

from __future__ import annotations

import pytest
from support.inits import DESTRUCTOR, MACHINES, errors, inits_of, printed, risks, scenario
from support.readelf import readelf_symbol_sections

FULL = "_Z4fullB5cxx11"  # const std::string full = prefix + "cd"
CONSTANT = {"_Z6prefixB5cxx11": "prefix", "_Z5namesB5cxx11": "names",
            "_Z5plainB5cxx11": "plain", "limits": "limit"}
PRINTED = {"prefix": "2", "full": "0", "names": "2", "plain": "5", "limit": "42", "number": "3"}
PROGRAMS = {"reader_first": "reader_first", "host_shared": "libconstant.so"}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_only_the_global_built_at_run_time_is_an_error(machine: str, program: str) -> None:
    built = scenario("constant_init", machine)
    # The oracle: every constant-initialized global is ready when reader.cpp's
    # initializer runs; full is still empty.
    assert printed(built, program) == PRINTED
    analysed = built.path(PROGRAMS[program])
    record = inits_of(analysed)
    assert errors(record) == [("init-order", FULL)]
    assert risks(record) == risks(record, "init-order")
    # Their destructors are still registered, and listed as such.
    registered = {r["object"] for r in risks(record, DESTRUCTOR)}
    assert set(CONSTANT) | {FULL} <= registered


@pytest.mark.parametrize("machine", MACHINES)
def test_what_the_analysis_relies_on(machine: str) -> None:
    """The constant-initialized objects' bytes are in the file; full's are not."""
    where = readelf_symbol_sections(scenario("constant_init", machine).path("reader_first"))
    assert {where[name] for name in CONSTANT} <= {".data", ".data.rel.local", ".data.rel"}
    assert where[FULL] == ".bss"
