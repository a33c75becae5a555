"""``elfpatch demo``: what it says is checked against the programs it runs and readelf.

The demo builds two fixtures, prints what their host program prints, fixes
the libraries and prints the program's output again.  The oracles: the same
fixtures built here show the bug (the program's output as the demo's story
tells it, readelf binding ``UNIQUE``); the demo's own fixed libraries (its
scratch folder kept for the test) carry no ``UNIQUE`` in readelf's eyes and
make the program print what the same sources built with ``-fno-gnu-unique``
print, which is what the demo claims.  Around that: the exit code, the
build-cache wording on a second run, and no compiler as one line and exit 2.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import require_tool
from elfpatch.fixtures import build, demo
from support.build import invoke
from support.checkout import require_installed

SCENARIOS = [story.scenario for story in demo.STORIES]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, cxx: object) -> Path:
    """A build cache of the module's own, so the first demo run really compiles."""
    return tmp_path_factory.mktemp("demo-cache")


def _run_demo(cache: Path) -> subprocess.CompletedProcess[str]:
    require_installed("elfpatch demo in a new process")
    environment = {**os.environ, "ELFPATCH_FIXTURE_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "elfpatch", "demo"], capture_output=True,
                          text=True, env=environment, timeout=600)


@pytest.fixture(scope="module")
def first_and_second(cache: Path) -> tuple[str, str]:
    """stdout of two subprocess runs of ``elfpatch demo`` on an empty cache."""
    first, second = _run_demo(cache), _run_demo(cache)
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert first.stderr == second.stderr == ""
    return first.stdout, second.stdout


def _unique_bindings(library: Path) -> list[str]:
    """Names readelf shows with binding UNIQUE in ``library``'s dynamic symbols."""
    readelf = require_tool("readelf")
    table = subprocess.run([readelf, "--dyn-syms", "-W", str(library)], capture_output=True,
                           text=True, check=True).stdout
    return [line.split()[-1] for line in table.splitlines()
            if len(line.split()) >= 8 and line.split()[4] == "UNIQUE"]


def _bindings(library: Path, names: list[str]) -> set[str]:
    readelf = require_tool("readelf")
    table = subprocess.run([readelf, "--dyn-syms", "-W", str(library)], capture_output=True,
                           text=True, check=True).stdout
    return {line.split()[4] for line in table.splitlines()
            if len(line.split()) >= 8 and line.split()[-1] in names}


def _claims(text: str) -> list[str]:
    """The ``key=value`` readings a story's text quotes, e.g. ``still_loaded=1``."""
    return re.findall(r"\b\w+=\d+\b", text)


def test_the_demo_runs_and_says_where_its_builds_come_from(first_and_second: tuple[str, str],
                                                           cache: Path) -> None:
    first, second = first_and_second
    assert first.count("  built with g++ in ") == len(demo.STORIES)
    assert "from the build cache" not in first
    assert second.count(f"  built with g++ earlier (from the build cache, {cache})") \
        == len(demo.STORIES)
    assert "built with g++ in " not in second
    for number, story in enumerate(demo.STORIES, 1):
        assert f"[{number}/{len(demo.STORIES)}] {story.title}" in first
    # Apart from the build lines the two runs tell the same story.
    assert _without_build_lines(first) == _without_build_lines(second)


def _without_build_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("  built with g++")]


@pytest.mark.parametrize("story", demo.STORIES, ids=SCENARIOS)
def test_the_fixture_shows_the_bug_the_demo_describes(story: demo.Story, cache: Path,
                                                      first_and_second: tuple[str, str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELFPATCH_FIXTURE_CACHE", str(cache))
    original = build.build_scenario(story.scenario)
    for library in original.libraries():
        assert _unique_bindings(library), f"{library.name}: readelf shows no UNIQUE symbol"
    before = original.run().stdout.splitlines()
    for claim in _claims(story.what_went_wrong):
        assert any(claim in line.split() for line in before), (claim, before)
    printed = first_and_second[0]
    assert "\n".join(f"    {line}" for line in before) in printed  # "./host prints:"


@contextmanager
def _kept(folder: Path) -> Iterator[str]:
    """Stands in for the demo's TemporaryDirectory: its fixed builds stay for the oracles."""
    folder.mkdir()
    yield str(folder)


@pytest.mark.parametrize("story", demo.STORIES, ids=SCENARIOS)
def test_after_the_fix_readelf_and_the_program_agree_with_the_demo(
        story: demo.Story, cache: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELFPATCH_FIXTURE_CACHE", str(cache))
    monkeypatch.setattr(demo.tempfile, "TemporaryDirectory",
                        lambda **_: _kept(tmp_path / "scratch"))
    told: list[str] = []
    demo.run_demo(told.append)  # in-process, as `elfpatch demo` calls it
    original = build.build_scenario(story.scenario)
    fixed = build.ScenarioBuild(original.scenario, original.variant,
                                tmp_path / "scratch" / story.scenario, original.toolchain)
    was_unique = sorted({n for lib in original.libraries() for n in _unique_bindings(lib)})
    for library in fixed.libraries():
        assert _unique_bindings(library) == [], library.name
        if story.scenario == "rtld_local_clash":  # the story says: GLOBAL, not LOCAL
            assert _bindings(library, was_unique) == {"GLOBAL"}, library.name
    before, after = original.run().stdout.splitlines(), fixed.run().stdout.splitlines()
    rebuilt = build.build_scenario(story.scenario, "no-gnu-unique").run().stdout.splitlines()
    assert after != before
    assert after == rebuilt  # "exactly like the same sources built with -fno-gnu-unique"
    text = "\n".join(told)
    assert demo._side_by_side(before, after) in text
    assert f"  now: {story.what_changed}" in text


def test_no_compiler_is_one_line_and_exit_2(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    environment = {**os.environ, "CXX": str(tmp_path / "no-such-g++"),
                   "ELFPATCH_FIXTURE_CACHE": str(tmp_path / "cache")}
    require_installed("elfpatch demo in a new process")
    result = subprocess.run([sys.executable, "-m", "elfpatch", "demo"], capture_output=True,
                            text=True, env=environment, timeout=600)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no C++ compiler" in result.stderr
    assert "install g++" in result.stderr
    assert not (tmp_path / "cache").exists()
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-g++"))
    in_process = invoke("demo")
    assert (in_process.exit_code, in_process.exception) == (2, None)
    assert in_process.stdout == "" and "no C++ compiler" in in_process.stderr
