"""Runs an analysis over every input, keeping going past inputs that fail.

A corrupt file is reported as one error and the others are still analysed;
an unexpected exception while analysing a file is that file's error too:
what is wrong with its structure, or, when it reads cleanly, a bug of
elfpatch's (``failures.failure_of``).  Either keeps the traceback as text
(the CLI's ``--traceback`` prints it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from elfpatch.analysis.unique import FileScan, scan_elf
from elfpatch.elf.file import ElfFile
from elfpatch.elf.source import ElfSource
from elfpatch.errors import ElfpatchError
from elfpatch.service.failures import failures_judged
from elfpatch.service.inputs import expand, open_sources

T = TypeVar("T")


@dataclass
class RunResult(Generic[T]):
    results: list[T] = field(default_factory=list)
    errors: list[ElfpatchError] = field(default_factory=list)


# Told what is being analysed ("3/120 torch/lib/libc10.so"), for a progress line.
Progress = Callable[[str], None]


def run_per_file(paths: Iterable[str], analyse: Callable[[ElfSource, ElfFile], T],
                 progress: Progress | None = None) -> RunResult[T]:
    outcome: RunResult[T] = RunResult()
    inputs = list(expand(paths))  # names only, nothing opened: to count them first
    total = sum(1 for item in inputs if isinstance(item, ElfSource))
    number = 0
    for item in open_sources(inputs):
        if isinstance(item, ElfpatchError):
            outcome.errors.append(item)
            continue
        source, elf = item
        number += 1
        if progress is not None:
            progress(f"{number}/{total} {source.member or source.path}")
        try:
            with failures_judged(source.label, elf):
                outcome.results.append(analyse(source, elf))
        except ElfpatchError as error:
            outcome.errors.append(error)
        finally:
            elf.close()
    return outcome


def scan_paths(paths: Iterable[str], progress: Progress | None = None) -> RunResult[FileScan]:
    return run_per_file(paths, lambda source, elf: scan_elf(elf, source.path, source.member),
                        progress)
