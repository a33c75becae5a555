"""Options an environment variable gives, applied by an initializer that splits them
at separators another TU builds later (``fixtures/env_option``): a true error that
only a run with the variable set shows (OpenImageIO's ``OPENIMAGEIO_OPTIONS``
crashes pycolmap 4.2's import so).

The oracle is what each program prints with the variable unset and set: unset,
nothing is split in either link order; set, ``options_first`` splits at an empty
string (``separators_seen=0``, the options read as one) and ``text_first`` at the
built one.  ``inits`` reads the code, not the environment: the error and the
warning are there either way, and the same when stripped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    order_risks_when_stripped,
    printed,
    scenario,
)

OPTIONS = {"ELFPATCH_FIXTURE_OPTIONS": "a=1,b=2;c=3"}
UNSET = {"options_applied": "0", "separators_seen": "-1"}
SEPARATORS = "_Z10separatorsB5cxx11"


@pytest.mark.parametrize("machine", MACHINES)
def test_the_order_shows_only_with_the_variable_set(machine: str) -> None:
    built = scenario("env_option", machine)
    assert printed(built, "options_first") == UNSET
    assert printed(built, "text_first") == UNSET
    assert printed(built, "options_first", env=OPTIONS) == {
        "options_applied": "1", "separators_seen": "0"}
    assert printed(built, "text_first", env=OPTIONS) == {
        "options_applied": "3", "separators_seen": "2"}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("program", "severity", "kind"), [
    ("options_first", "error", "init-order"),
    ("text_first", "warning", "link-order-dependence"),
    ("liboptions_first.so", "error", "init-order"),
])
def test_a_path_the_environment_selects_is_reported(machine: str, program: str, severity: str,
                                                     kind: str, tmp_path: Path) -> None:
    built = scenario("env_option", machine)
    found = order_risks_when_stripped(machine, built.path(program), tmp_path)
    assert [(r["severity"], r["kind"], r["object"]) for r in found] == [
        (severity, kind, SEPARATORS)]
