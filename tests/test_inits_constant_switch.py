"""Paths a constant argument selects (``fixtures/constant_switch``).

``early.cpp``'s initializers call ``by_case(1)`` (a switch, a jump table on
x86-64) and ``by_branch(3)`` (compares and branches); the cases they select
never read ``config_name``, which other cases do.  ``reader.cpp`` really
reads it early.  The oracles are what each build prints (``reader_seen=0``
where the read came first) and ASan's init-order checker in strict mode,
which names the TU whose read comes before the string is built.  ``inits``
must charge ``early.cpp`` with nothing and report ``reader.cpp`` exactly
where the program shows the bug, stripped or not.
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

CONFIG_NAME = "_Z11config_nameB5cxx11"
PROGRAMS = ["config_last", "config_first", "config_last_lto", "config_first_lto"]
ORDER_KINDS = ("init-order", "link-order-dependence")


def symbol_address(path: Path, name: str) -> int:
    return next(s.value for s in readelf_symbols(path) if s.table == ".symtab" and s.name == name)


def early_initializer(path: Path) -> int | None:
    """Where early.cpp's initializer starts (None: -flto merged it away)."""
    return next((s.value for s in readelf_symbols(path) if s.table == ".symtab"
                 and s.name.startswith("_GLOBAL__sub_I_") and "early" in s.name), None)


def order_findings(record: dict) -> list[dict]:
    return risks(record, *ORDER_KINDS)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_only_the_real_read_is_reported(machine: str, program: str) -> None:
    built = scenario("constant_switch", machine)
    output = printed(built, program)
    # The selected cases: right in every order, so early.cpp is charged with nothing.
    assert (output["early_case"], output["early_branch"]) == ("17", "5")
    path = built.path(program)
    found = order_findings(inits_of(path))
    config = symbol_address(path, CONFIG_NAME)
    assert all(r["object_address"] == config for r in found), found
    early = early_initializer(path)
    assert not [r for r in found if r["reader_address"] == early], found
    assert not [r for r in found if "early.cpp" in r["message"]], found
    errors = [r for r in found if r["severity"] == "error"]
    # -flto inlines the TUs into one function, whose loop building the string lays its
    # body before its condition: the string's address is known after the loop too.
    assert bool(errors) == (output["reader_seen"] == "0"), (output, found)
    if not program.endswith("_lto"):  # the working order still depends on the link order
        assert len(found) == 1, found


@pytest.mark.parametrize("machine", MACHINES)
def test_the_coverage_line_counts_what_was_decided(machine: str) -> None:
    built = scenario("constant_switch", machine)
    coverage = inits_of(built.path("config_last"))["coverage"]
    # by_branch(3): two compares; by_case(1): its bound, and on x86-64 its jump table.
    assert coverage["constant_branches"]["decided"] >= (4 if machine == "x86_64" else 2)
    assert coverage["constant_branches"]["undecided"] == 0
    from conftest import run_elfpatch
    text = run_elfpatch("inits", str(built.path("config_last"))).stdout
    assert "branches on constant arguments:" in text


def strip_tool(machine: str) -> str:
    name = "strip" if machine == "x86_64" else f"{machine}-linux-gnu-strip"
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (apt-get install binutils)")
    return name


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_stripped_builds_decide_the_same(machine: str, program: str, tmp_path: Path) -> None:
    built = scenario("constant_switch", machine)
    original = built.path(program)
    copy = tmp_path / original.name
    shutil.copy(original, copy)
    subprocess.run([strip_tool(machine), "--strip-unneeded", str(copy)], check=True)

    def identity(record: dict) -> set[tuple]:
        return {(r["severity"], r["kind"], r.get("object_address"), r.get("reader_address"),
                 r.get("constructed_by_address")) for r in record["risks"]}
    stripped, full = inits_of(copy), inits_of(original)
    assert identity(stripped) == identity(full)
    assert stripped["coverage"]["constant_branches"] == full["coverage"]["constant_branches"]


ASAN = ("-fsanitize=address", "-g")
DEFAULT = "check_initialization_order=1:detect_leaks=0"
STRICT = "check_initialization_order=1:strict_init_order=1:detect_leaks=0"


@pytest.fixture(scope="module")
def asan_build() -> Path:
    if not compiler_runs(ASAN):
        pytest.skip("cannot link with -fsanitize=address (apt-get install libasan8)")
    fixture = build.SCENARIOS["constant_switch"]
    targets = [t for t in fixture.targets if not t.output.endswith("_lto")]
    return build.build_targets(fixture.sources(), targets, (*fixture.flags, *ASAN),
                               toolchain("x86_64"), label="constant_switch-asan")


def asan_reader(program: Path, options: str) -> str | None:
    """The TU ASan's init-order checker stops in, or None when the run is clean."""
    result = subprocess.run([str(program)], capture_output=True, text=True,
                            env={**os.environ, "ASAN_OPTIONS": options}, timeout=60)
    if "initialization-order-fiasco" not in result.stderr:
        assert result.returncode == 0, result.stderr[-2000:]
        return None
    frames = [line for line in result.stderr.splitlines() if " in _GLOBAL__sub_I_" in line]
    return Path(frames[0].rpartition(" ")[2].partition(":")[0]).name


@pytest.mark.parametrize("program", ["config_last", "config_first"])
def test_asan_names_the_same_reader(asan_build: Path, program: str) -> None:
    """Default mode stops at a read of a global not yet built: reader.cpp's, in
    config_last only.  Strict mode stops at any read of another TU's global while
    initializing: reader.cpp's in both orders, after early.cpp's initializers,
    which run first in both and never touch config_name."""
    path = asan_build / program
    expected = "reader.cpp" if program == "config_last" else None
    assert asan_reader(path, DEFAULT) == expected
    assert asan_reader(path, STRICT) == "reader.cpp"
    found = order_findings(inits_of(path))
    assert [(r["severity"], r["object"]) for r in found] == \
        [("error" if expected else "warning", CONFIG_NAME)]
    assert "reader.cpp" in found[0]["message"]
