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

from pathlib import Path

import pytest
from support.inits import (
    ASAN_DEFAULT,
    ASAN_STRICT,
    MACHINES,
    ORDER_KINDS,
    asan_build,
    asan_reader,
    charged_only_the_reader,
    inits_of,
    printed,
    risk_identities,
    risks,
    scenario,
    strip_unneeded,
)

CONFIG_NAME = "_Z11config_nameB5cxx11"
PROGRAMS = ["config_last", "config_first", "config_last_lto", "config_first_lto"]


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
    # -flto inlines the TUs into one function, whose loop building the string lays its
    # body before its condition: the string's address is known after the loop too.
    charged_only_the_reader(path, found, output, CONFIG_NAME)
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


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_stripped_builds_decide_the_same(machine: str, program: str, tmp_path: Path) -> None:
    built = scenario("constant_switch", machine)
    original = built.path(program)
    copy = strip_unneeded(machine, original, tmp_path)
    stripped, full = inits_of(copy), inits_of(original)
    assert risk_identities(stripped) == risk_identities(full)
    assert stripped["coverage"]["constant_branches"] == full["coverage"]["constant_branches"]


@pytest.fixture(scope="module")
def asan_programs() -> Path:
    return asan_build("constant_switch")


@pytest.mark.parametrize("program", ["config_last", "config_first"])
def test_asan_names_the_same_reader(asan_programs: Path, program: str) -> None:
    """Default mode stops at a read of a global not yet built: reader.cpp's, in
    config_last only.  Strict mode stops at any read of another TU's global while
    initializing: reader.cpp's in both orders, after early.cpp's initializers,
    which run first in both and never touch config_name."""
    path = asan_programs / program
    expected = "reader.cpp" if program == "config_last" else None
    assert asan_reader(path, ASAN_DEFAULT) == expected
    assert asan_reader(path, ASAN_STRICT) == "reader.cpp"
    found = order_findings(inits_of(path))
    assert [(r["severity"], r["object"]) for r in found] == \
        [("error" if expected else "warning", CONFIG_NAME)]
    assert "reader.cpp" in found[0]["message"]
