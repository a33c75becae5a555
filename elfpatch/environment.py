"""``check --environment``: UNIQUE clashes between the distributions installed in an interpreter.

torch 1.8 next to cupy 9 is the case: each wheel was fine alone, but both
carried CUB's UNIQUE caches, and loaded into one process they shared them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from elfpatch.analysis.check import CheckResult, LibraryCheck, find_clashes, gather_all
from elfpatch.errors import InputError
from elfpatch.inputs import ElfSource, has_elf_magic_file
from elfpatch.policy import Policy

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
    try:
        result = subprocess.run([python, "-c", _LIST_FILES], capture_output=True, text=True,
                                timeout=300, check=True)
        return json.loads(result.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        raise InputError(python, f"cannot list the installed distributions ({error})") from None


def check_environment(python: str, policy: Policy, jobs: int) -> CheckResult:
    result = CheckResult(policy)
    package_of: dict[str, str] = {}
    sources = []
    for distribution, files in sorted(installed_libraries(python).items()):
        for file in sorted(set(files)):
            if file not in package_of and has_elf_magic_file(Path(file)):
                package_of[file] = distribution
                sources.append(ElfSource(file))
    facts = gather_all(sources, False, jobs, result.errors)
    result.libraries = [LibraryCheck(f, ()) for f in facts]
    result.clashes = find_clashes(facts, package_of)
    return result
