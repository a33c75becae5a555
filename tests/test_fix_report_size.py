"""The fix plan and its report grow linearly with the number of libraries in a set.

N copies of one library define the same UNIQUE symbols, so each symbol of
each library is "also defined by" the N-1 others.  Naming all of them in
every reason made the report grow with N squared (2,000 copies of a 15 KB
library: 240 MB).  Here each reason must stay under a fixed length, the
refusals must name a bounded sample plus counts, and the whole report must
grow in proportion to N.  Sizes, not times: speed is for
``benchmarks/fix_many.py``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.fixlib import VARIANTS, built_library, fix

from elfpatch.analysis.crosslib import SAMPLE_SIZE, LibrarySymbols, shared_uses
from elfpatch.plan.bindings import REASON_NAMES, Candidate, FixOptions, name_some, plan_library

NAME = "libcopy{:04d}.so"  # fixed width, so every label has the same length


def copies(library: Path, folder: Path, count: int) -> Path:
    folder.mkdir()
    for index in range(count):
        shutil.copyfile(library, folder / NAME.format(index))
    return folder


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return json.loads(resources.files("elfpatch.report").joinpath("fix.schema.json").read_text())


def reason_limit(folder: Path) -> int:
    """The longest reason allowed: fixed text plus REASON_NAMES labels of this set."""
    label = len(str(folder / NAME.format(0)))
    return 300 + 2 * REASON_NAMES * (label + 2)


def test_reasons_name_a_few_libraries_and_count_the_rest(library: Path, tmp_path: Path,
                                                         schema: dict[str, Any]) -> None:
    folder = copies(library, tmp_path / "set", 60)
    run = fix("--dry-run", folder)
    assert run.exit_code == 0, run.stderr
    assert run.document is not None
    jsonschema.validate(run.document, schema)
    reasons = [c["reason"] for lib in run.document["libraries"] for c in lib["changes"]]
    assert len(reasons) >= 60
    assert max(map(len, reasons)) <= reason_limit(folder)
    shared = [r for r in reasons if r.startswith("also defined by")]
    assert shared and all(r.count(".so") == REASON_NAMES for r in shared)
    assert all(" and 56 more: " in r for r in shared)  # 59 others, 3 of them named


def test_the_report_grows_in_proportion_to_the_set(library: Path, tmp_path: Path) -> None:
    sizes = {}
    for count in (20, 60):
        folder = copies(library, tmp_path / f"set{count}", count)
        json_run = fix("--dry-run", folder)
        text_run = fix("--dry-run", folder, as_json=False)
        assert json_run.exit_code == 0 and text_run.exit_code == 0
        sizes[count] = (len(json_run.stdout), len(text_run.stdout))
    for form in (0, 1):  # JSON, text; named N squared they grew 9-fold
        ratio = sizes[60][form] / sizes[20][form]
        assert 2.5 < ratio < 3.5, (form, sizes)


def test_refusals_carry_a_bounded_sample_and_counts(library: Path, tmp_path: Path,
                                                    schema: dict[str, Any]) -> None:
    folder = copies(library, tmp_path / "set", 30)
    run = fix("--strict", "--dry-run", folder)
    assert run.exit_code == 1 and run.document is not None
    jsonschema.validate(run.document, schema)
    refusals = run.document["refusals"]
    assert refusals
    for refusal in refusals:
        assert len(refusal["also_defined_by"]) == SAMPLE_SIZE
        assert refusal["library"] not in refusal["also_defined_by"]
        assert refusal["also_defined_by_count"] == 29
        assert (refusal["referenced_by"], refusal["referenced_by_count"]) == ([], 0)
    text = fix("--strict", "--dry-run", folder, as_json=False).stdout
    assert "and 26 more" in text
    assert max(map(len, text.splitlines())) <= reason_limit(folder)


# -- the plan itself, on synthetic sets (no compiler needed) ----------------------------------

def synthetic_set(count: int, names: tuple[str, ...]) -> list[LibrarySymbols]:
    return [LibrarySymbols(f"lib{index:05d}.so", unique_defined=set(names))
            for index in range(count)]


def test_shared_uses_keep_counts_and_a_bounded_sample() -> None:
    names = ("_ZZ1fvE1x", "_ZN1TIiE1sE")
    libraries = synthetic_set(2000, names)
    libraries.append(LibrarySymbols("user.so", undefined={names[0]}))
    uses = shared_uses(libraries)
    assert set(uses) == {lib.label for lib in libraries[:2000]}
    use = uses["lib00007.so"][names[0]]
    assert (use.also_defined_count, use.referenced_count) == (1999, 1)
    assert use.referenced_by == ("user.so",)
    assert len(use.also_defined_by) == SAMPLE_SIZE and "lib00007.so" not in use.also_defined_by
    assert uses["lib00007.so"][names[1]].referenced_count == 0


def test_plan_reasons_do_not_grow_with_the_set() -> None:
    names = ("_ZZ1fvE1x",)
    lengths = {}
    for count in (10, 2000):
        uses = shared_uses(synthetic_set(count, names))
        plan, _refused = plan_library("lib00000.so", [Candidate(".dynsym", 5, names[0],
                                                                True)],
                                      uses["lib00000.so"], FixOptions())
        (change,) = plan.changes
        assert change.target == "GLOBAL"
        lengths[count] = len(change.reason)
    assert lengths[2000] - lengths[10] <= len("1,997") - len("6")


def test_name_some() -> None:
    assert name_some(("a.so",), 1) == "a.so"
    assert name_some(("a.so", "b.so", "c.so", "d.so"), 2000) == "a.so, b.so, c.so and 1,997 more"


def test_the_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    """``benchmarks/fix_many.py`` on tiny sets: it works (its timings mean nothing here)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed (apt-get install g++)")
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "fix_many.py"
    done = subprocess.run([sys.executable, str(script), "--counts", "2,4",
                           "--work-dir", str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^ +(\d+)  (fix [^ ]+(?: [^ ]+)*) +\d", done.stdout, re.MULTILINE)
    assert rows == [("2", "fix --dry-run --json"), ("2", "fix -o OUT"),
                    ("4", "fix --dry-run --json"), ("4", "fix -o OUT")], done.stdout
