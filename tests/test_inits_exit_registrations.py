"""Each exit-time destructor ``inits`` lists is one a real process registers, once.

``benchmarks/exit_registrations.py`` preloads a library that logs every
``__cxa_atexit`` call of the process, runs the program, and sets the objects
registered beside those ``inits --json`` lists.  On these fixtures every
initializer is followed to the end, so the two must be equal: no object
listed twice (a function-local static or an inline variable that several
TUs reach is registered by the first alone), none the process does not
register, none it registers that ``inits`` misses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.inits import scenario

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "exit_registrations.py"
# scenario: its programs whose objects more than one TU registers, or nest, or not
PROGRAMS = {
    "nested_statics": ("nested", "nested_calls", "lazy_names"),
    "atexit_function": ("farewell_first", "prefix_first"),
    "inline_constants": ("first", "first_lto", "second_lto"),
    "siof": ("bad_order",),
    "registration": ("tests_first", "registry_first_lto"),
    "lazy_registry": ("flags_first", "flags_first_lto"),
    "exit_use_after_free": ("freed_first",),
    "static_accessor": ("closer_first",),
    "ioinit_neighbour": ("facets_lto",),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_listed_destructors_are_those_registered_at_run_time(name: str) -> None:
    built = scenario(name)
    paths = [str(built.path(program)) for program in PROGRAMS[name]]
    result = subprocess.run([sys.executable, str(SCRIPT), "--run", "--json", *paths],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines():
        found = json.loads(line)
        assert found["at_run_time"] > 0, found
        assert found["elfpatch"] == found["elfpatch_objects"] == found["at_run_time"], found
        assert found["counted_twice"] == found["not_at_run_time"] == found["not_found"] == 0, \
            found
