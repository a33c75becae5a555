"""A read no code seen makes (``fixtures/deep_pointer``): a warning that says so.

``holder.cpp`` and ``reader.cpp`` each hand ``&app_config`` eight calls down,
past how far ``inits`` follows a pointer into the code it is passed to; at
the bottom ``holder.cpp``'s chain only keeps the address and ``reader.cpp``'s
reads the object.  What happens there is not seen, so neither read may be
an error (one of them would be false): each is an ``init-order`` warning
worded "may read", and ``check`` does not fail on it.  The oracle is what
each build prints: ``early_size=0`` where the read came first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_elfpatch
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    inits_of,
    printed,
    risks,
    same_when_stripped,
    scenario,
)


@pytest.mark.parametrize("machine", MACHINES)
def test_the_programs_show_one_real_read(machine: str) -> None:
    built = scenario("deep_pointer", machine)
    first, last = printed(built, "deep_first"), printed(built, "deep_last")
    assert (first["kept"], first["name"], first["early_size"]) == ("1", "application", "0")
    assert (last["kept"], last["name"], last["early_size"]) == ("1", "application", "11")


@pytest.mark.parametrize("machine", MACHINES)
def test_a_read_not_seen_is_a_warning_that_says_so(machine: str) -> None:
    built = scenario("deep_pointer", machine)
    found = risks(inits_of(built.path("deep_first")), *ORDER_KINDS)
    assert sorted((r["severity"], r["kind"], r["message"].split(".cpp")[0]) for r in found) == [
        ("warning", "init-order", "holder"), ("warning", "init-order", "reader")], found
    assert all(" may read app_config before config.cpp constructs it" in r["message"]
               and "not followed to the end" in r["message"] for r in found), found


@pytest.mark.parametrize("machine", MACHINES)
def test_constructed_first_it_is_a_link_order_dependence(machine: str) -> None:
    found = risks(inits_of(scenario("deep_pointer", machine).path("deep_last")), *ORDER_KINDS)
    assert sorted((r["severity"], r["kind"], r["message"].split(" may read ")[0])
                  for r in found) == [("warning", "link-order-dependence", "holder.cpp"),
                                      ("warning", "link-order-dependence", "reader.cpp")], found


@pytest.mark.parametrize("machine", MACHINES)
def test_stripped_the_same(machine: str, tmp_path: Path) -> None:
    library = scenario("deep_pointer", machine).path("libdeep_first.so")
    plain = same_when_stripped(machine, library, tmp_path)
    assert [r["severity"] for r in risks(plain, *ORDER_KINDS)] == ["warning", "warning"]


def test_check_charges_no_init_order(tmp_path: Path) -> None:
    """``check`` fails on init-order errors only: a read not seen is none."""
    library = scenario("deep_pointer").path("libdeep_first.so")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.elfpatch]\ninit-order = "error"\ndestruction-order = "error"\n')
    result = run_elfpatch("check", "--format", "json", str(library), cwd=tmp_path)
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["passed"], report
    assert [f["rule"] for f in report["files"][0]["findings"]] == ["exit-time-destructor"]
