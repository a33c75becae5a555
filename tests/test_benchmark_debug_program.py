"""The -g program the listing's speed is measured on is what its script says, at a tiny size.

``benchmarks/debug_program.py`` writes and builds a many-TU program with
initializers and heavy debug info; here with two units, and ``inits`` lists
one initializer per unit, named by its file through DWARF.  Then
``benchmarks/inits.py --listing-seconds`` prints its verdict in seconds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from support.build import require_tool

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def build_program(folder: Path) -> Path:
    result = subprocess.run([sys.executable, str(BENCHMARKS / "debug_program.py"), "--units",
                             "2", "--types", "3", "--members", "2", str(folder)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return folder / "program"


def test_each_unit_has_an_initializer_named_by_its_file(tmp_path: Path) -> None:
    require_tool("g++")
    program = build_program(tmp_path / "built")
    listed = subprocess.run([sys.executable, "-m", "elfpatch", "inits", "--json", "--list-only",
                             str(program)], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    entries = json.loads(listed.stdout)["files"][0]["initializers"]
    ours = [e for e in entries if (e["symbol"] or "").startswith("_GLOBAL__sub_I_")]
    assert sorted(Path(e["translation_unit"]).name for e in ours) == ["unit_0.cpp", "unit_1.cpp"]
    assert {e["translation_unit_source"] for e in ours} == {"dwarf"}
    # The build is kept, and not redone for the same settings.
    built_at = program.stat().st_mtime_ns
    assert build_program(tmp_path / "built").stat().st_mtime_ns == built_at
    assert not list((tmp_path / "built").glob("*.o"))


def test_the_listing_has_a_target_in_seconds(tmp_path: Path) -> None:
    require_tool("g++")
    require_tool("readelf")
    program = build_program(tmp_path / "built")
    result = subprocess.run([sys.executable, str(BENCHMARKS / "inits.py"), "--runs", "1",
                             "--warmup", "0", "--listing-seconds", "1", str(program)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert re.search(r'^inits --json, machine code not read: [\d.]+ s, peak RSS \d+ MiB; '
                     r'target "within 1 s": (met|MISSED)$', result.stdout, re.MULTILINE), \
        result.stdout
