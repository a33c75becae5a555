"""``check --environment``: UNIQUE clashes between installed distributions and the paths checked.

torch 1.8 next to cupy 9 is the case: each wheel was fine alone, but both
carried CUB's UNIQUE caches, and loaded into one process they shared them.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

from elfpatch.analysis.check import (
    CheckResult,
    distribution_key,
    find_clashes,
    package_of_source,
)
from elfpatch.elf.source import ElfSource, has_elf_magic_file
from elfpatch.errors import InputError
from elfpatch.service.check import gather_all

# Run inside the target interpreter: every distribution and the absolute paths of its files.
_LIST_FILES = """
import importlib.metadata as m, json, os
out = {}
for d in m.distributions():
    name = d.metadata["Name"] or "?"
    files = [os.path.realpath(d.locate_file(f)) for f in (d.files or [])
             if str(f).endswith((".so",)) or ".so." in str(f)]
    if files:
        out.setdefault(name, []).extend(files)
print(json.dumps(out))
"""


def installed_libraries(python: str) -> dict[str, list[str]]:
    """{distribution: its ELF-looking files} of the interpreter ``python``."""
    try:
        result = subprocess.run([python, "-c", _LIST_FILES], capture_output=True, text=True,
                                timeout=300)
    except PermissionError:
        raise InputError(python, "is not executable",
                         hint="--python takes a Python interpreter") from None
    except OSError as error:
        raise InputError(python, f"cannot run it: {error.strerror or error}",
                         hint="--python takes a Python interpreter") from None
    except subprocess.TimeoutExpired:
        raise InputError(python, "listing its distributions took over 300 s") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise InputError(python, f"cannot list its installed distributions (exit "
                         f"{result.returncode}: {last})", hint="--python takes a Python 3.8+ "
                         "interpreter")
    try:
        listing = json.loads(result.stdout)
    except ValueError:
        raise InputError(python, "is not a Python interpreter (it did not print the list of "
                         "distributions)", hint="--python takes a Python interpreter") from None
    if not isinstance(listing, dict):
        raise InputError(python, "printed something other than the list of distributions")
    return listing


def add_environment(result: CheckResult, python: str, jobs: int) -> CheckResult:
    """``result`` with the clashes between installed distributions, and between them and
    ``result``'s paths.

    Installed libraries are held to the clash rule only: they are what the
    build runs next to, not what it ships.  A wheel that is itself installed
    is one distribution with its installed copy, never a clash with it.
    """
    package_of = {f.source.path: package_of_source(f.source)
                  for f in (lib.facts for lib in result.libraries)}
    sources = []
    for distribution, files in sorted(installed_libraries(python).items()):
        for file in sorted(set(files)):
            if file not in package_of and has_elf_magic_file(Path(file)):
                package_of[file] = distribution_key(distribution)
                sources.append(ElfSource(file))
    errors = list(result.errors)
    installed = gather_all(sources, False, jobs, errors)
    everything = [lib.facts for lib in result.libraries] + installed
    return dataclasses.replace(result, clashes=tuple(find_clashes(everything, package_of)),
                               errors=tuple(errors))
