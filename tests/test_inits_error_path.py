"""Code that runs only when a check fails (``fixtures/error_path``).

``early.cpp``'s initializer calls ``checked(seed)``, which calls ``fail``
only for a negative number; ``fail`` reads ``config_name`` to build its
message and throws, on every way through it, without being declared
``[[noreturn]]``.  ``reader.cpp`` really reads ``config_name`` early.  The
oracles are what each build prints (``reader_seen=0`` where the read came
first, ``early_value=42`` always) and ASan's init-order checker in strict
mode, which stops at the first read of another TU's global while
initializing: ``reader.cpp``'s, after ``early.cpp``'s initializer has run
without touching it.  ``inits`` must charge ``early.cpp`` with nothing and
report ``reader.cpp`` exactly where the program shows the bug, stripped or not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.inits import MACHINES, compiler_runs, inits_of, printed, risks, scenario, toolchain
from support.readelf import readelf_symbols

PROGRAMS = ["config_last", "config_first", "config_last_lto", "config_first_lto"]
ORDER_KINDS = ("init-order", "link-order-dependence")


def symbol_address(path: Path, name: str) -> int:
    return next(s.value for s in readelf_symbols(path) if s.table == ".symtab" and s.name == name)


def early_initializer(path: Path) -> int | None:
    """Where early.cpp's initializer starts (None: -flto merged it away)."""
    return next((s.value for s in readelf_symbols(path) if s.table == ".symtab"
                 and s.name.startswith("_GLOBAL__sub_I_") and "early" in s.name), None)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_only_the_real_read_is_reported(machine: str, program: str) -> None:
    built = scenario("error_path", machine)
    output = printed(built, program)
    assert output["early_value"] == "42"  # the check passed: fail never ran
    path = built.path(program)
    found = risks(inits_of(path), *ORDER_KINDS)
    config = symbol_address(path, "_Z11config_nameB5cxx11")
    assert all(r["object_address"] == config for r in found), found
    early = early_initializer(path)
    assert not [r for r in found if r["reader_address"] == early], found
    assert not [r for r in found if "early.cpp" in r["message"]], found
    errors = [r for r in found if r["severity"] == "error"]
    assert bool(errors) == (output["reader_seen"] == "0"), (output, found)
    if not program.endswith("_lto"):  # reader.cpp alone, an error or a warning
        assert len(found) == 1, found


@pytest.mark.parametrize("machine", MACHINES)
def test_the_handler_is_known_never_to_return(machine: str) -> None:
    """From its code alone: every way through ``fail`` ends in a throw or an unwind;
    ``checked`` returns.  (The verdict the composition of effects relies on.)"""
    from elfpatch.analysis.effects import EffectsAnalyzer
    from elfpatch.elf.file import ElfFile

    path = scenario("error_path", machine).path("config_last")
    with ElfFile.open(str(path)) as elf:
        analyzer = EffectsAnalyzer(elf)
        analyzer.index.prepare()
        fail = analyzer.summary(symbol_address(path, "_Z4failPKc"))
        checked = analyzer.summary(symbol_address(path, "_Z7checkedi"))
        assert fail.never_returns and not fail.may_return
        assert not checked.never_returns


def strip_tool(machine: str) -> str:
    name = "strip" if machine == "x86_64" else f"{machine}-linux-gnu-strip"
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (apt-get install binutils)")
    return name


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_stripped_builds_find_the_same(machine: str, program: str, tmp_path: Path) -> None:
    built = scenario("error_path", machine)
    original = built.path(program)
    copy = tmp_path / original.name
    shutil.copy(original, copy)
    subprocess.run([strip_tool(machine), "--strip-unneeded", str(copy)], check=True)

    def identity(record: dict) -> set[tuple]:
        return {(r["severity"], r["kind"], r.get("object_address"), r.get("reader_address"),
                 r.get("constructed_by_address")) for r in record["risks"]}
    assert identity(inits_of(copy)) == identity(inits_of(original))


ASAN = ("-fsanitize=address", "-g")
STRICT = "check_initialization_order=1:strict_init_order=1:detect_leaks=0"


@pytest.fixture(scope="module")
def asan_build() -> Path:
    if not compiler_runs(ASAN):
        pytest.skip("cannot link with -fsanitize=address (apt-get install libasan8)")
    fixture = build.SCENARIOS["error_path"]
    targets = [t for t in fixture.targets if not t.output.endswith("_lto")]
    return build.build_targets(fixture.sources(), targets, (*fixture.flags, *ASAN),
                               toolchain("x86_64"), label="error_path-asan")


@pytest.mark.parametrize("program", ["config_last", "config_first"])
def test_asan_stops_at_the_reader_only(asan_build: Path, program: str) -> None:
    """Strict mode stops at the first read of another TU's global while initializing:
    reader.cpp's in both link orders, although early.cpp's initializer, linked before
    it in both, ran first (and called ``checked``)."""
    result = subprocess.run([str(asan_build / program)], capture_output=True, text=True,
                            env={**os.environ, "ASAN_OPTIONS": STRICT}, timeout=60)
    assert "initialization-order-fiasco" in result.stderr
    frames = [line for line in result.stderr.splitlines() if " in _GLOBAL__sub_I_" in line]
    assert Path(frames[0].rpartition(" ")[2].partition(":")[0]).name == "reader.cpp"
    found = risks(inits_of(asan_build / program), *ORDER_KINDS)
    assert ["reader.cpp" in r["message"] for r in found] == [True], found
