"""``elfpatch demo``: build two fixtures, show the bugs, fix the binaries, show them gone.

The fixture sources ship with the package, so this works from a normal
install; it needs only g++.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from elfpatch.errors import ElfpatchError

Echo = Callable[[str], None]


class DemoError(ElfpatchError):
    """The demo cannot run here (no compiler, or a build failed)."""


@dataclass(frozen=True)
class Story:
    scenario: str
    title: str
    what_went_wrong: str
    what_changed: str


STORIES = (
    Story("dlclose_noop", "dlclose does not unload a plugin",
          "after dlclose the plugin is still mapped (still_loaded=1, in_maps=1), and reopening "
          "it kept its old state: the counter went on to 3 instead of starting again at 1.",
          "dlclose unloads the plugin and a reload starts fresh, exactly like the same sources "
          "built with -fno-gnu-unique."),
    Story("rtld_local_clash", "two plugins opened with RTLD_LOCAL share one static "
          "(the PyTorch 1.8.0 bug)",
          "plugin 2 was built with version 2 of the header-only library but reads version 1's "
          "cache (cache_version=1), its own initialisation never ran (initialisations=0), and "
          "both plugins use one cache object (shared_cache=1).",
          "each plugin has its own cache, initialised once, exactly like the same sources built "
          "with -fno-gnu-unique. Fixed as one set, the two plugins define the same symbols, so "
          "elfpatch made them GLOBAL rather than LOCAL (in case they are meant to share): a "
          "GLOBAL symbol is no longer unique, and each RTLD_LOCAL plugin binds its own."),
)


def run_demo(echo: Echo) -> None:
    from elfpatch.fixtures import build

    if not build.compiler_available():
        raise DemoError("demo", "no C++ compiler found (g++)", hint="install g++ and retry")
    echo("elfpatch demo: STB_GNU_UNIQUE bugs reproduced with g++, fixed in the binaries, gone.\n")
    with tempfile.TemporaryDirectory(prefix="elfpatch-demo-") as scratch:
        for number, story in enumerate(STORIES, 1):
            echo(f"[{number}/{len(STORIES)}] {story.title}  (fixtures/{story.scenario})")
            _tell(story, Path(scratch) / story.scenario, echo)
            echo("")
    echo("The fixed plugins behave like a rebuild with -fno-gnu-unique. Note that a plugin "
         "which really unloads\nruns its destructors and unmaps its code: hosts holding "
         "callbacks into it now crash (fixtures/unload_exposes_bug).")


def _build(scenario: str, folder: Path, echo: Echo) -> object:
    from elfpatch.fixtures import build

    started, wall = time.monotonic(), time.time()
    try:
        built = build.build_scenario(scenario)
    except build.BuildError as error:
        raise DemoError(scenario, f"building the fixture failed: {error}") from None
    if build.built_at(built.dir) < wall:
        echo(f"  built with g++ earlier (from the build cache, {build.cache_root()})")
    else:
        echo(f"  built with g++ in {time.monotonic() - started:.1f} s")
    return built.copy_to(folder)


def _tell(story: Story, folder: Path, echo: Echo) -> None:
    built = _build(story.scenario, folder, echo)
    libraries = [str(p.name) for p in built.libraries()]  # type: ignore[attr-defined]
    before = built.run().stdout.splitlines()  # type: ignore[attr-defined]
    echo("  ./host prints:")
    echo("\n".join(f"    {line}" for line in before))
    echo(f"  what went wrong: {story.what_went_wrong}")
    command = [sys.executable, "-m", "elfpatch", "fix", "--in-place", *libraries]
    echo(f"  $ elfpatch fix --in-place {' '.join(libraries)}")
    fixed = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    echo("\n".join(f"    {line}" for line in fixed.stdout.splitlines() if line.strip()))
    if fixed.returncode != 0:
        raise DemoError(story.scenario, f"elfpatch fix failed: {fixed.stderr.strip()}")
    after = built.run().stdout.splitlines()  # type: ignore[attr-defined]
    echo("  ./host again, before | after:")
    echo(_side_by_side(before, after))
    echo(f"  now: {story.what_changed}")


def _side_by_side(before: list[str], after: list[str]) -> str:
    width = max((len(line) for line in before), default=0)
    rows = []
    for index in range(max(len(before), len(after))):
        left = before[index] if index < len(before) else ""
        right = after[index] if index < len(after) else ""
        marker = " " if left == right else "*"
        rows.append(f"  {marker} {left:<{width}} | {right}")
    return "\n".join(rows)
